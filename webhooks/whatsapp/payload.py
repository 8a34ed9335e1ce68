"""Reading Twilio's WhatsApp webhook form into a plain inbound message (a voice note's media
URL kept for the worker to fetch: webhooks/whatsapp/media.py)."""

from __future__ import annotations

from typing import Any

from memory.messages import MEDIA, VOICE, Inbound, VoiceNote
from webhooks.whatsapp import CHANNEL


def inbound_from_form(form: Any) -> Inbound | None:
    """The inbound message in Twilio's webhook form, or None when there is nothing to answer
    (no MessageSid or no sender)."""
    sid = (form.get("MessageSid") or form.get("SmsMessageSid") or "").strip()
    sender = (form.get("From") or "").strip()
    if not sid or not sender:
        return None
    wa_id = (form.get("WaId") or "").strip()
    address = f"whatsapp:+{wa_id.lstrip('+')}" if wa_id else sender
    body = form.get("Body") or ""
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
        platform_id=sid[:100],
        address=address[:200],
        chat_id=sender[:100],
        text=text,
        display_name=(form.get("ProfileName") or "").strip()[:100] or None,
        kind=kind,
        voice=voice,
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
