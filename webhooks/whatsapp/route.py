"""The WhatsApp channel through Twilio: `POST /whatsapp/webhook` (signed by Twilio), the
optional `POST /whatsapp/status` delivery callback, and replies through Twilio's REST API."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue
from sqlalchemy import update

from bot.channels import PermanentSendError, TransientSendError
from bot.splitting import utf16_length
from memory.messages import MEDIA, VOICE, Inbound, Sent
from memory.models import OutboxItem
from webhooks.web import accept, web

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
SIGNATURE_HEADER = "X-Twilio-Signature"
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
blueprint = Blueprint("whatsapp", __name__, url_prefix="/whatsapp")

# Twilio error codes that no retry can fix: unsubscribed or blocked recipient, invalid or
# non-WhatsApp number, outside the 24-hour session window, sender not enabled.
PERMANENT_CODES = {21211, 21408, 21610, 21612, 21614, 63003, 63016, 63018, 63024, 63032}


def called_url() -> str:
    """The URL Twilio called, as Twilio signed it: from PAM_PUBLIC_URL when set, else the
    request's own, its scheme as the trusted proxies (PAM_PROXY_HOPS) forwarded it."""
    public = web().settings.web.public_url
    path = request.full_path if request.query_string else request.path
    if public:
        return public.rstrip("/") + path
    return f"{request.scheme}://{request.host}{path}"


def _signed() -> bool:
    from twilio.request_validator import RequestValidator, get_signature_algorithm

    settings = web().settings
    signature = request.headers.get(SIGNATURE_HEADER, "")
    signature_settings = request.headers.get("X-Twilio-Webhooks-Signature-Settings")
    # With signature settings, Twilio signs with the webhook SharedKey secret; otherwise with
    # the account's auth token.
    token = (
        settings.whatsapp.webhook_shared_key if signature_settings else settings.whatsapp.auth_token
    )
    if not token or not signature:
        return False
    algorithm = get_signature_algorithm(signature_settings)
    validator = RequestValidator(token)
    return bool(validator.validate(called_url(), request.form, signature, algorithm=algorithm))


def _guard() -> ResponseReturnValue | None:
    settings = web().settings
    if not settings.whatsapp.auth_token or not settings.whatsapp.account_sid:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    if request.mimetype != "application/x-www-form-urlencoded":
        return jsonify(error="Unsupported Media Type", detail="Twilio posts forms"), 415
    if not _signed():
        return jsonify(error="Forbidden", detail="missing or invalid X-Twilio-Signature"), 403
    return None


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


def _twiml() -> Response:
    return Response(EMPTY_TWIML, status=200, mimetype="text/xml")


@blueprint.post("/webhook")
def webhook() -> ResponseReturnValue:
    """Validate Twilio's signature, persist, and answer at once with empty TwiML."""
    started = time.monotonic()
    refused = _guard()
    if refused is not None:
        return refused
    inbound = inbound_from_form(request.form)
    if inbound is None:
        log.info("inbound ignored channel=%s: nothing to answer", CHANNEL)
        return _twiml()
    accept(inbound, started)
    return _twiml()


@blueprint.post("/status")
def status() -> ResponseReturnValue:
    """Twilio's status callback: record deliveries that failed after Twilio accepted them
    (for example outside the 24-hour session window)."""
    refused = _guard()
    if refused is not None:
        return refused
    sid = (request.form.get("MessageSid") or "").strip()
    state = (request.form.get("MessageStatus") or "").strip()
    if sid and state in ("failed", "undelivered"):
        code = (request.form.get("ErrorCode") or "").strip()[:20]
        with web().engine.begin() as connection:
            connection.execute(
                update(OutboxItem)
                .where(OutboxItem.channel == CHANNEL, OutboxItem.platform_message_id == sid)
                .values(status="failed", last_error=f"twilio {state}: error {code}")
            )
        log.warning("whatsapp delivery %s error=%s", state, code)
    return "", 204


class TwilioSender:
    """Sends WhatsApp replies through Twilio's REST API, from TWILIO_WHATSAPP_NUMBER."""

    max_chars = 1600  # Twilio's limit for one WhatsApp message body

    @staticmethod
    def length(text: str) -> int:
        """Twilio counts emoji and other astral characters double (UTF-16 code units)."""
        return utf16_length(text)

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        from_number: str,
        api_url: str | None = None,
        status_callback: str | None = None,
        timeout: float = 15.0,
    ) -> None:
        from twilio.http.http_client import TwilioHttpClient
        from twilio.rest import Client

        self.client = Client(account_sid, auth_token, http_client=TwilioHttpClient(timeout=timeout))
        if api_url:
            self.client.api.base_url = api_url.rstrip("/")
        number = from_number.strip()
        self.from_number = number if number.startswith("whatsapp:") else f"whatsapp:{number}"
        self.status_callback = status_callback

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send one WhatsApp message; raise TransientSendError or PermanentSendError."""
        from twilio.base.exceptions import TwilioException, TwilioRestException

        extra = {"status_callback": self.status_callback} if self.status_callback else {}
        try:
            message = self.client.messages.create(
                from_=self.from_number, to=chat_id, body=text, **extra
            )
        except TwilioRestException as exc:
            if exc.status == 429 or exc.status >= 500:
                raise TransientSendError(f"twilio answered {exc.status} ({exc.code})") from exc
            if exc.code in PERMANENT_CODES or 400 <= exc.status < 500:
                raise PermanentSendError(f"twilio refused: {exc.status} ({exc.code})") from exc
            raise TransientSendError(f"twilio error {exc.status} ({exc.code})") from exc
        except (TwilioException, OSError) as exc:  # connection errors, timeouts
            raise TransientSendError(f"twilio unreachable: {type(exc).__name__}") from exc
        return Sent(platform_id=message.sid)
