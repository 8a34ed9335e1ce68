"""`POST /whatsapp/webhook` (signed by Twilio) and the optional `POST /whatsapp/status`
delivery callback."""

from __future__ import annotations

import logging
import time

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue

from webhooks.web import accept, web
from webhooks.whatsapp import CHANNEL
from webhooks.whatsapp.payload import MalformedSid, inbound_from_form
from webhooks.whatsapp.signature import called_base, signed

log = logging.getLogger(__name__)

EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
blueprint = Blueprint("whatsapp", __name__, url_prefix="/whatsapp")


def _guard() -> ResponseReturnValue | None:
    settings = web().settings
    if not settings.whatsapp.auth_token or not settings.whatsapp.account_sid:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    if request.mimetype != "application/x-www-form-urlencoded":
        return jsonify(error="Unsupported Media Type", detail="Twilio posts forms"), 415
    if not signed():
        web().refused(
            CHANNEL,
            "missing or invalid X-Twilio-Signature",
            f"checked with TWILIO_AUTH_TOKEN against {called_base()}; the signature covers "
            "the URL Twilio calls, so set PAM_PUBLIC_URL to your app's public https URL",
        )
        return jsonify(error="Forbidden", detail="missing or invalid X-Twilio-Signature"), 403
    return None


def _twiml() -> Response:
    return Response(EMPTY_TWIML, status=200, mimetype="text/xml")


@blueprint.post("/webhook")
def webhook() -> ResponseReturnValue:
    """Validate Twilio's signature, persist, and answer at once with empty TwiML."""
    started = time.monotonic()
    refused = _guard()
    if refused is not None:
        return refused
    try:
        inbound = inbound_from_form(request.form)
    except MalformedSid as exc:
        # Never Twilio's own form, though signed: a captured one re-sliced. Refused, so that
        # it cannot pass for a new message (Twilio itself would not resend it).
        log.warning("inbound refused channel=%s: %s", CHANNEL, exc)
        return jsonify(error="Bad Request", detail=str(exc)), 400
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
        web().outbox.failed_on_platform(CHANNEL, sid, f"twilio {state}: error {code}")
        log.warning("whatsapp delivery %s error=%s", state, code)
    return "", 204
