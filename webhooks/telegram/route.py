"""The Telegram channel: `POST /telegram/webhook`, and the translation of a Telegram update
into a plain inbound message (shared with `pam telegram`'s long polling)."""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from memory.messages import MEDIA, VOICE, Inbound
from webhooks.telegram.client import chat_address
from webhooks.web import accept, json_body, web

log = logging.getLogger(__name__)

CHANNEL = "telegram"
_SURROGATE = re.compile("[\ud800-\udfff]")
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


def _entities(message: Any) -> list[tuple[Any, str]]:
    # python-telegram-bot slices entity texts by UTF-16 offsets, as Telegram counts them.
    pieces = {**message.parse_entities(), **message.parse_caption_entities()}
    return sorted(pieces.items(), key=lambda item: item[0].offset)


def _names_pam(piece: str, username: Callable[[], str]) -> bool:
    name = piece.rsplit("@", 1)[1] if "@" in piece else ""
    return bool(name) and name.lower() == username().lower()


def _addressed_in_group(message: Any, bot_id: int | None, username: Callable[[], str]) -> bool:
    """In groups Pam answers only when mentioned, commanded (/help@PamBot) or replied to."""
    replied = message.reply_to_message
    # In a forum topic every message "replies" to the topic's first (service) message.
    if (
        replied is not None
        and replied.forum_topic_created is None
        and replied.from_user is not None
        and replied.from_user.id == bot_id
    ):
        return True
    for entity, piece in _entities(message):
        if entity.type == "text_mention" and entity.user is not None:
            if entity.user.id == bot_id:
                return True
        elif entity.type in ("mention", "bot_command") and _names_pam(piece, username):
            return True
    return False


def _strip_mentions(message: Any, username: Callable[[], str]) -> str:
    """The message text (or caption) without the @mentions of Pam (other mentions stay)."""
    encoded = (message.text or message.caption or "").encode("utf-16-le")
    for entity, piece in reversed(_entities(message)):
        if entity.type == "mention" and _names_pam(piece, username):
            start, end = 2 * entity.offset, 2 * (entity.offset + entity.length)
            encoded = encoded[:start] + encoded[end:]
    return encoded.decode("utf-16-le").strip()


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
        kind = "text"
    elif any(getattr(message, name, None) for name in VOICE_FIELDS):
        kind = VOICE
    elif any(getattr(message, name, None) for name in MEDIA_FIELDS):
        kind = MEDIA
    else:  # new members, pinned messages and other service messages
        return None
    # A caption is answered as text, after the friendly note about what Pam cannot see.
    text = message.text or message.caption or ""
    if group and text:
        text = _strip_mentions(message, username)
    # A message in a forum topic is answered in that topic; a reply thread of an ordinary
    # group carries a thread id too, but replies there go to the chat itself.
    thread = message.message_thread_id if message.is_topic_message else None
    return Inbound(
        channel=CHANNEL,
        platform_id=str(update.update_id),
        address=f"{CHANNEL}:{user.id}",
        chat_id=chat_address(message.chat.id, thread),
        text=text,
        display_name=(user.first_name or None),
        kind=kind,
    )


class TelegramUnavailable(Exception):
    """Telegram could not tell Pam its own username, needed to read a group message."""


def _username(telegram: Any) -> str:
    try:
        return str(telegram.username())
    except Exception as exc:
        log.warning("could not ask Telegram for the bot's username: %s", type(exc).__name__)
        raise TelegramUnavailable from exc


def _well_typed(message: Any) -> bool:
    """Whether a parsed message has the types Telegram sends (de_json does not check)."""
    chat, user = message.chat, message.from_user
    if chat is None or type(chat.id) is not int or not isinstance(chat.type, str):
        return False
    if user is not None and (type(user.id) is not int or not isinstance(user.first_name, str)):
        return False
    if not all(isinstance(v, str | None) for v in (message.text, message.caption)):
        return False
    if not (message.message_thread_id is None or type(message.message_thread_id) is int):
        return False
    entities = (message.entities or ()) + (message.caption_entities or ())
    return all(type(e.offset) is int and type(e.length) is int for e in entities)


def update_type(payload: dict[str, Any]) -> str:
    """What kind of update the JSON is ("message", "callback_query", …), for the log."""
    kinds = [str(key) for key in payload if key != "update_id"]
    # Only letters, digits and "_": a key is the sender's text, and stays on one log line.
    return "".join(ch for ch in kinds[0][:40] if ch.isalnum() or ch == "_") if kinds else "-"


def log_unreadable(payload: dict[str, Any], problem: ValueError) -> None:
    """Say which update Pam could not read, and why (never its content)."""
    log.warning(
        "inbound unreadable channel=%s update=%s type=%s: %s",
        CHANNEL,
        payload["update_id"],
        update_type(payload),
        problem,
    )


class NotAnUpdate(ValueError):
    """The body is no Telegram update at all (no integer update_id): nothing Telegram sent."""


def parse_update(payload: Any) -> Any:
    """A python-telegram-bot `Update` from webhook JSON. NotAnUpdate if it is none at all;
    ValueError if it is one that python-telegram-bot cannot read or that has wrong types."""
    from telegram import Update

    if not isinstance(payload, dict) or type(payload.get("update_id")) is not int:
        raise NotAnUpdate("not a Telegram update")
    try:
        update = Update.de_json(payload, None)
    except Exception as exc:  # a structurally wrong update: say so, never a 500
        raise ValueError(f"malformed update: {type(exc).__name__}") from exc
    if update.message is not None and not _well_typed(update.message):
        raise ValueError("malformed update: a message field has the wrong type")
    if update.message is not None and any(
        _SURROGATE.search(v or "") for v in (update.message.text, update.message.caption)
    ):  # half an emoji: not UTF-16 encodable, and never sent by Telegram itself
        raise ValueError("malformed update: text with a lone surrogate")
    return update


@blueprint.post("/webhook")
def webhook() -> ResponseReturnValue:
    """Authenticate (secret token), persist, acknowledge."""
    started = time.monotonic()
    context = web()
    settings = context.settings
    secret = settings.telegram.webhook_secret
    if not settings.telegram.bot_token or not secret:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
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
        return jsonify(status="ignored"), 200
    new = accept(inbound, started)
    return jsonify(status="accepted" if new else "duplicate"), 200
