"""`POST /telegram/webhook`: check the secret token, read the update, accept what Pam answers."""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from webhooks.telegram import CHANNEL
from webhooks.telegram.buttons import tap_answered
from webhooks.telegram.payload import (
    NotAnUpdate,
    inbound_from_update,
    log_unreadable,
    parse_update,
    update_type,
)
from webhooks.web import accept, json_body, web

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
blueprint = Blueprint("telegram", __name__, url_prefix="/telegram")


class TelegramUnavailable(Exception):
    """Telegram could not tell Pam its own username, needed to read a group message."""


def _username(telegram: Any) -> str:
    try:
        return str(telegram.username())
    except Exception as exc:
        log.warning("could not ask Telegram for the bot's username: %s", type(exc).__name__)
        raise TelegramUnavailable from exc


@blueprint.post("/webhook")
def webhook() -> ResponseReturnValue:
    """Authenticate (secret token), persist, acknowledge (a tap on a button: with the
    answer to its callback query)."""
    started = time.monotonic()
    context = web()
    settings = context.settings
    secret = settings.telegram.webhook_secret
    if not settings.telegram.bot_token or not secret:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        context.refused(
            CHANNEL,
            "wrong or missing secret token",
            "TELEGRAM_WEBHOOK_SECRET must be the secret `pam telegram set-webhook` registered; "
            "run it again after changing the secret",
        )
        return jsonify(error="Forbidden", detail="wrong or missing secret token"), 403
    payload = json_body()
    try:
        update = parse_update(payload)
    except NotAnUpdate as exc:
        return jsonify(error="Bad Request", detail=str(exc)), 400
    except ValueError as exc:
        # An update Pam cannot read is one Telegram would deliver again and again after a
        # 4xx: acknowledge it, and say which one (never its content).
        log_unreadable(payload, exc)
        return jsonify(status="ignored", detail=str(exc)), 200
    telegram = context.telegram()
    try:
        inbound = inbound_from_update(update, telegram.bot_id, lambda: _username(telegram))
    except TelegramUnavailable:  # a 503 makes Telegram deliver the update again later
        body = jsonify(error="Service Unavailable", detail="Telegram is unreachable")
        return body, 503, {"Retry-After": "5"}
    if inbound is None:
        log.info(
            "inbound ignored channel=%s update=%s type=%s",
            CHANNEL,
            update.update_id,
            update_type(payload),
        )
    else:
        admission = accept(inbound, started)
    if update.callback_query is not None:
        # A tap: answered in the webhook's own response, so the button stops spinning
        # whatever came of it (stored, a redelivery, or no tap on Pam's buttons).
        return jsonify(tap_answered(update.callback_query.id)), 200
    if inbound is None:
        return jsonify(status="ignored"), 200
    return jsonify(status=admission.value), 200
