"""What the worker needs of a channel: a sender for replies and the errors it raises, and the
links media are served under. Channel adapters (webhooks/) implement `Sender` (and
`ChartSender` where the platform takes images); the messages themselves are
memory.messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memory.messages import Sent, VoiceNote


@dataclass(frozen=True)
class Button:
    """A button under one of Pam's texts: its `label`, in the learner's language, and the
    `command` a tap says for the learner ("/translate 41", "/forget yes 7f3a"). A tap is never
    trusted: it is answered as that command typed by the learner who tapped, so the command
    looks up whatever it names within that learner's own data."""

    label: str
    command: str


class TransientSendError(Exception):
    """Delivery failed but may succeed later (timeouts, 5xx, rate limits)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentSendError(Exception):
    """Delivery can never succeed (blocked bot, invalid recipient, outside the session
    window): recorded, not retried."""


class RecipientBlocked(PermanentSendError):
    """The learner blocked Pam on the platform (Telegram's 403 "bot was blocked by the user"):
    nothing reaches them, and Pam stops writing first to them (check-ins off, and why)."""


class Sender(Protocol):
    """Delivers one reply text to one chat on one channel. `max_chars` is the platform's
    limit per message, as its `length` measures text: longer replies are split before they
    are queued."""

    max_chars: int

    def length(self, text: str) -> int:
        """The size of `text` as the platform counts it against `max_chars`."""
        ...

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send `text`; raise TransientSendError or PermanentSendError on failure."""
        ...


@runtime_checkable
class ChartSender(Sender, Protocol):
    """A sender that can deliver a /progress chart with its caption; a sender without
    `send_chart` gets the caption alone."""

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """Send the chart `png` (or its public `url`, None when Pam has no public address)
        with `caption`; raise TransientSendError or PermanentSendError on failure."""
        ...


@runtime_checkable
class ButtonSender(Sender, Protocol):
    """A sender that can show buttons under a text (Telegram's inline keyboard, WhatsApp's
    quick replies); a sender without `send_buttons` sends the text alone, and the learner
    types the commands. Where the platform cannot take these buttons (too many, too long) it
    sends the text alone too."""

    def send_buttons(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, idempotency_key: str
    ) -> Sent:
        """Send `text` with `buttons` under it; raise TransientSendError or
        PermanentSendError on failure."""
        ...


@runtime_checkable
class TemplateSender(Sender, Protocol):
    """A sender that can deliver a check-in outside the platform's free-form window through
    the operator's approved template (WhatsApp: a content template, its SID a setting)."""

    def send_template(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send `text` as the template's variable; raise PermanentSendError when there is no
        template, TransientSendError or PermanentSendError on failure."""
        ...


@runtime_checkable
class GroupChats(Protocol):
    """A channel with group chats (Telegram): a chat several people read, where Pam keeps
    what it knows of one member to itself (the channel makes each member of a group a
    learner of their own, so a group's prompt never holds their private memory)."""

    def in_group(self, chat_id: str) -> bool:
        """Whether replies to `chat_id` are read by others than the learner."""
        ...

    def private_chat_link(self, start: str) -> str | None:
        """A link that opens the learner's private chat with Pam and says `/start <start>`
        there (one of the commands' names), None when Pam cannot tell it right now."""
        ...


@runtime_checkable
class RepeatConfirms(Protocol):
    """A channel whose user confirms what Pam asks first (a /forget) by saying the command
    again within the time the question stays open: the HTTP API, where a program sends the
    messages. Elsewhere a repeated /forget asks again, so that a stray second tap of a
    command menu erases nothing."""

    repeat_confirms: bool


class MediaLinks(Protocol):
    """Signed, expiring links to stored charts and spoken replies, under the web app's public
    address."""

    def url(self, chart_id: int, nonce: str) -> str | None:
        """The link to the chart, or None when Pam has no public address (PAM_PUBLIC_URL)."""
        ...

    def voice_url(self, clip_id: int, nonce: str) -> str | None:
        """The link to the spoken reply, or None when Pam has no public address."""
        ...

    @property
    def public(self) -> bool:
        """Whether links can be made at all (PAM_PUBLIC_URL is set)."""
        ...


# -- voice --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Audio:
    """A voice note's audio as downloaded: its bytes, the type the platform served it as (None
    when it said none) and a file name for the transcription request ("voice.oga")."""

    data: bytes
    content_type: str | None
    name: str


class VoiceTooLarge(Exception):
    """The voice note is bigger than the cap (PAM_VOICE_MAX_BYTES, or the platform's own
    download limit): told before the download, or noticed while it ran (and then stopped)."""


class VoiceUnavailable(Exception):
    """The download failed but may succeed later (timeouts, 5xx, 429): the turn is tried again
    from the inbox."""


class VoiceRefused(Exception):
    """The download can never succeed: a media URL on a host that is not the platform's, a
    redirect loop, the file gone (404) or refused (4xx). Nothing was fetched from a foreign
    host."""


@runtime_checkable
class VoiceFetcher(Protocol):
    """A channel whose voice notes the worker can download (Telegram's client, Twilio's
    sender)."""

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        """The audio of `note`, at most `max_bytes` long. Raises VoiceTooLarge,
        VoiceUnavailable or VoiceRefused."""
        ...


@runtime_checkable
class VoiceSender(Sender, Protocol):
    """A sender that can deliver a spoken reply: OGG/Opus audio, as a voice message.
    `voice_by_link`: the platform fetches the audio from its public link (WhatsApp, the API's
    callback), so without PAM_PUBLIC_URL there is nothing to send — and nothing to speak."""

    voice_by_link: bool

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        """Send `audio` (or its public `url`, None when Pam has no public address) as a voice
        message; raise TransientSendError or PermanentSendError on failure."""
        ...
