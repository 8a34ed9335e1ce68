"""Reading Twilio's WhatsApp webhook form into a plain inbound message (a voice note's media
URL kept for the worker to fetch: webhooks/whatsapp/media.py; a tap on a quick reply, the
command it says: webhooks/whatsapp/buttons.py)."""

from __future__ import annotations

import re
from typing import Any

from memory.messages import MEDIA, VOICE, Inbound, VoiceNote
from webhooks.whatsapp import CHANNEL
from webhooks.whatsapp.buttons import tapped_command
from webhooks.whatsapp.language import number_language

# A message's sid as Twilio writes it: SM (or MM, with media) and 32 hex digits (Twilio's
# "What is a SID?" glossary; its OpenAPI spec's pattern for a Message's sid).
_MESSAGE_SID = re.compile(r"(SM|MM)[0-9a-fA-F]{32}")
# The fields that carry the message's sid: Twilio sends all three, equal (SmsSid and
# SmsMessageSid are kept for older integrations).
SID_FIELDS = ("MessageSid", "SmsMessageSid", "SmsSid")


class MalformedSid(ValueError):
    """A signed form whose message sid is none Twilio writes: Twilio's signature runs keys
    and values together without a separator, so a captured request can be re-sliced (the
    sid swallowing the fields after it) and stay validly signed."""


def message_sid(form: Any) -> str:
    """The message's sid: "" when the form carries none; MalformedSid when one is not
    Twilio's shape or they disagree."""
    sids = {(value or "").strip() for name in SID_FIELDS for value in _values(form, name)}
    sids.discard("")
    if any(not _MESSAGE_SID.fullmatch(sid) for sid in sids):
        raise MalformedSid("the message sid is not SM or MM and 32 hex digits")
    if len(sids) > 1:
        raise MalformedSid("MessageSid, SmsMessageSid and SmsSid disagree")
    return sids.pop() if sids else ""


def _values(form: Any, name: str) -> list[str]:
    """Every value of the field `name`: a form may repeat a key, and the signature covers
    each value."""
    if hasattr(form, "getlist"):
        return list(form.getlist(name))
    return [form[name]] if name in form else []


def inbound_from_form(form: Any) -> Inbound | None:
    """The inbound message in Twilio's webhook form, or None when there is nothing to answer
    (no message sid or no sender). MalformedSid when its sid is none Twilio sends."""
    sid = message_sid(form)
    sender = (form.get("From") or "").strip()
    if not sid or not sender:
        return None
    wa_id = (form.get("WaId") or "").strip()
    address = f"whatsapp:+{wa_id.lstrip('+')}" if wa_id else sender
    # A tap on a quick reply says its button's command (ButtonPayload), not its title (Body).
    body = tapped_command(form) or form.get("Body") or ""
    media_types = [
        form.get(f"MediaContentType{n}") or "" for n in range(int(_number(form, "NumMedia")))
    ]
    voice = _voice_note(form, media_types)
    # Media with a caption: the caption is answered as text, after the friendly note.
    if any(_is_audio(kind) for kind in media_types):
        kind, text = VOICE, body
    elif (
        media_types
        or form.get("Latitude")
        or form.get("Longitude")
        # Twilio's MessageType for what WhatsApp does not pass on (polls, edits, …)
        or (form.get("MessageType") or "").strip().lower() == "unsupported"
    ):
        kind, text = MEDIA, body
    elif body.strip():
        kind, text = "text", body
    else:
        return None
    return Inbound(
        channel=CHANNEL,
        platform_id=sid,
        address=address[:200],
        chat_id=sender[:100],
        text=text,
        display_name=(form.get("ProfileName") or "").strip()[:100] or None,
        kind=kind,
        voice=voice,
        language_hint=number_language(address),
    )


def _voice_note(form: Any, media_types: list[str]) -> VoiceNote | None:
    """The first audio item of the form, by its media URL (Twilio tells neither its length
    nor its size); None without one (a form without the URL has nothing to fetch)."""
    for n, content_type in enumerate(media_types):
        if _is_audio(content_type):
            url = (form.get(f"MediaUrl{n}") or "").strip()
            return VoiceNote(ref=url, content_type=content_type.strip()) if url else None
    return None


def _is_audio(content_type: str) -> bool:
    return content_type.strip().lower().startswith("audio/")


def _number(form: Any, name: str) -> int:
    try:
        return max(0, min(10, int(form.get(name) or 0)))
    except ValueError:
        return 0
