"""The Telegram channel: `POST /telegram/webhook`, and the translation of a Telegram update
into a plain inbound message (shared with `pam telegram`'s long polling)."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from bot.channels import MEDIA, VOICE, Inbound
from webhooks import accept, web

log = logging.getLogger(__name__)

CHANNEL = "telegram"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
blueprint = Blueprint("telegram", __name__, url_prefix="/telegram")

VOICE_FIELDS = ("voice", "audio", "video_note")
MEDIA_FIELDS = (
    "photo",
    "sticker",
    "document",
    "video",
    "animation",
    "location",
    "venue",
    "contact",
    "poll",
    "dice",
)


def _addressed_in_group(message: Any, bot_id: int | None, username: Callable[[], str]) -> bool:
    """In groups Pam answers only when mentioned, commanded (/help@PamBot) or replied to."""
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot_id:
        return True
    for entity in (message.entities or ()) + (message.caption_entities or ()):
        if entity.type == "text_mention" and entity.user is not None:
            if entity.user.id == bot_id:
                return True
        elif entity.type in ("mention", "bot_command"):
            text = message.text or message.caption or ""
            piece = text[entity.offset : entity.offset + entity.length]
            name = piece.rsplit("@", 1)[1] if "@" in piece else ""
            if name and name.lower() == username().lower():
                return True
    return False


def _strip_mention(text: str, username: Callable[[], str]) -> str:
    name = username()
    if not name:
        return text
    return text.replace(f"@{name}", "").replace(f"@{name.lower()}", "").strip()


def inbound_from_update(
    update: Any, bot_id: int | None, username: Callable[[], str]
) -> Inbound | None:
    """The inbound message in a Telegram `Update`, or None for what Pam ignores by design:
    edited messages, channel posts, membership changes, service messages, other bots, and
    group messages not addressed to Pam. Voice notes and media become a non-text kind."""
    message = update.message
    if message is None:  # edited_message, channel_post, my_chat_member, callback queries…
        return None
    user = message.from_user
    if user is None or user.is_bot:
        return None
    group = message.chat.type in ("group", "supergroup")
    if group and not _addressed_in_group(message, bot_id, username):
        return None
    if message.text:
        kind, text = "text", message.text
        if group:
            text = _strip_mention(text, username)
    elif any(getattr(message, name, None) for name in VOICE_FIELDS):
        kind, text = VOICE, ""
    elif any(getattr(message, name, None) for name in MEDIA_FIELDS):
        kind, text = MEDIA, ""
    else:  # new members, pinned messages and other service messages
        return None
    return Inbound(
        channel=CHANNEL,
        platform_id=str(update.update_id),
        address=f"{CHANNEL}:{user.id}",
        chat_id=str(message.chat.id),
        text=text,
        display_name=(user.first_name or None),
        kind=kind,
    )


def _username(telegram: Any) -> str:
    try:
        return str(telegram.username())
    except Exception as exc:  # Telegram unreachable: treat mentions as not for Pam, log it
        log.warning("could not ask Telegram for the bot's username: %s", type(exc).__name__)
        return ""


def parse_update(payload: Any) -> Any:
    """A python-telegram-bot `Update` from webhook JSON; ValueError if it is not one."""
    from telegram import Update

    if not isinstance(payload, dict) or not isinstance(payload.get("update_id"), int):
        raise ValueError("not a Telegram update")
    try:
        return Update.de_json(payload, None)
    except Exception as exc:  # a structurally wrong update: say so, never a 500
        raise ValueError(f"malformed update: {type(exc).__name__}") from exc


@blueprint.post("/webhook")
def webhook() -> ResponseReturnValue:
    """Authenticate (secret token), persist, acknowledge."""
    started = time.monotonic()
    context = web()
    settings = context.settings
    secret = settings.telegram_webhook_secret
    if not settings.telegram_bot_token or not secret:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        return jsonify(error="Forbidden", detail="wrong or missing secret token"), 403
    try:
        update = parse_update(request.get_json(silent=True))
    except ValueError as exc:
        return jsonify(error="Bad Request", detail=str(exc)), 400
    telegram = context.telegram()
    inbound = inbound_from_update(update, telegram.bot_id, lambda: _username(telegram))
    if inbound is None:
        log.info("inbound ignored channel=%s update=%s", CHANNEL, update.update_id)
        return jsonify(status="ignored"), 200
    new = accept(inbound, started)
    return jsonify(status="accepted" if new else "duplicate"), 200
