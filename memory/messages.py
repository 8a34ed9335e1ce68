"""Messages as plain data, the way every layer sees them: what a learner sent on some channel
(stored in the inbox) and what a delivered reply came back as, and the learner's text as Pam
keeps it (`clean_text`: typed, or a voice note's transcript). Channel adapters translate to and
from these."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Inbound:
    """One message a learner sent on some channel, as the core sees it.

    `address` identifies the learner across the whole system (e.g. "telegram:12345"); it is
    the learner's external id. `chat_id` is where replies go on the channel. `platform_id`
    is the platform's own message id, unique per channel, used to recognise redeliveries.
    `kind` is "text", or what was sent instead (one of NOT_TEXT); a voice note's `voice` says
    where the worker fetches its audio (`text` is then its caption, if any); `language_hint`
    what the platform says of the sender's language."""

    channel: str
    platform_id: str
    address: str
    chat_id: str
    text: str
    display_name: str | None = None
    kind: str = "text"
    voice: VoiceNote | None = None
    # What the platform says of the sender's language (Telegram's language_code, "de" or
    # "pt-br"; the language of a WhatsApp number's country): Pam's guess at their native
    # language until they say it. None where the channel tells nothing.
    language_hint: str | None = None


@dataclass(frozen=True)
class VoiceNote:
    """A voice note as its channel announced it: where its audio is (`ref`: Telegram's file_id,
    Twilio's media URL) and what the channel said of it beforehand — its type, length and
    size, None where it says nothing. `source`: what the learner sent ("voice", "audio",
    "video_note" on Telegram; "voice" on WhatsApp). Kept in the inbox until the worker has
    transcribed it; the audio itself is never stored."""

    ref: str
    content_type: str | None = None
    seconds: float | None = None
    size: int | None = None
    source: str = "voice"

    def to_json(self) -> str:
        """The note as the inbox keeps it."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> VoiceNote | None:
        """The note the inbox kept, or None (none, or not one Pam wrote)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(
                ref=str(data["ref"]),
                content_type=data.get("content_type"),
                seconds=data.get("seconds"),
                size=data.get("size"),
                source=str(data.get("source") or "voice"),
            )
        except (ValueError, KeyError, TypeError):
            return None


# What learners send that is not text: a voice note is transcribed (when voice is on); anything
# else gets a friendly answer in their language.
VOICE = "voice"
MEDIA = "media"
NOT_TEXT = (VOICE, MEDIA)
# Not a message but a note the web stored in place of one it turned away: the learner had
# too many messages waiting (PAM_MAX_QUEUED_PER_ADDRESS). Pam says "slow down" for it, once
# a minute at most, and never sees what was turned away.
TURNED_AWAY = "turned_away"


@dataclass(frozen=True)
class Sent:
    """A delivered reply: the platform's id for it, when it gives one."""

    platform_id: str | None = None


def clean_text(text: str) -> str:
    """The learner's text with surrounding whitespace and invisible control characters removed
    (newlines and tabs stay; RTL marks, CJK and emoji are kept as they are)."""
    # Half an emoji (a lone surrogate, legal in JSON) cannot be stored: pair what pairs, and
    # replace what cannot with U+FFFD.
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = unicodedata.normalize("NFC", text)
    kept = (ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")
    return "".join(kept).strip()
