"""Reading Twilio's WhatsApp webhook form into a plain inbound message."""

from __future__ import annotations

from typing import Any

from memory.messages import MEDIA, VOICE, Inbound
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
    # Media with a caption: the caption is answered as text, after the friendly note.
    if any(kind.startswith("audio/") for kind in media_types):
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
    )


def _number(form: Any, name: str) -> int:
    try:
        return max(0, min(10, int(form.get(name) or 0)))
    except ValueError:
        return 0
