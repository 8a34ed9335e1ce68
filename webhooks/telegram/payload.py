"""Reading a Telegram Bot API update: the JSON checked and parsed with python-telegram-bot
(`parse_update`), then translated into a plain inbound message (`inbound_from_update`) — by
the webhook and by long polling alike. In groups only what addresses Pam is answered, and each
member is a learner of their own for that group (`learner_address`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from memory.messages import MEDIA, VOICE, Inbound, VoiceNote
from webhooks.telegram import CHANNEL
from webhooks.telegram.address import chat_address, learner_address
from webhooks.telegram.buttons import inbound_from_tap, well_typed_tap

log = logging.getLogger(__name__)

_SURROGATE = re.compile("[\ud800-\udfff]")

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


def voice_note(message: Any) -> VoiceNote | None:
    """The voice note, audio file or round video note in a message, as the worker fetches
    it: Telegram's file_id and what the update says of it (type, length, size)."""
    for source in VOICE_FIELDS:
        item = getattr(message, source, None)
        if item is None:
            continue
        # A video note's type is fixed (Telegram sends none): MPEG-4 video.
        content_type = "video/mp4" if source == "video_note" else item.mime_type
        return VoiceNote(
            ref=str(item.file_id),
            content_type=content_type if isinstance(content_type, str) else None,
            # As Telegram sent it: reading `duration` itself warns unless PTB_TIMEDELTA is set.
            seconds=_seconds(item.to_dict().get("duration")),
            size=item.file_size if type(item.file_size) is int else None,
            source=source,
        )
    return None


def _seconds(duration: Any) -> float | None:
    """A duration in seconds, given as a number or as python-telegram-bot's timedelta."""
    if isinstance(duration, timedelta):
        return duration.total_seconds()
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        return float(duration)
    return None


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
    group messages not addressed to Pam. Voice notes and media become a non-text kind; a tap
    on one of Pam's buttons, the command it says (webhooks/telegram/buttons.py)."""
    if update.callback_query is not None:
        return inbound_from_tap(update.callback_query)
    message = update.message
    if message is None:  # edited_message, channel_post, my_chat_member…
        return None
    user = message.from_user
    # Sent on behalf of a chat (a channel's post forwarded into its discussion group, an
    # anonymous admin): `from` is a stand-in, no member to answer.
    if user is None or user.is_bot or message.sender_chat is not None:
        return None
    # A private chat is the user's own (its id is theirs); any other is read by others.
    group = message.chat.type != "private" or message.chat.id != user.id
    if group and not _addressed_in_group(message, bot_id, username):
        return None
    voice = None if message.text else voice_note(message)
    if message.text:
        kind = "text"
    elif voice is not None:
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
        address=learner_address(user.id, message.chat.id, group),
        chat_id=chat_address(message.chat.id, thread),
        text=text,
        display_name=(user.first_name or None),
        kind=kind,
        voice=voice,
        # The language the user's Telegram app is set to: Pam's guess at their own.
        language_hint=user.language_code or None,
    )


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
    query = update.callback_query
    if query is not None and not well_typed_tap(query):
        raise ValueError("malformed update: a callback query field has the wrong type")
    if query is not None and _SURROGATE.search(query.data or ""):
        raise ValueError("malformed update: callback data with a lone surrogate")
    if update.message is not None and any(
        _SURROGATE.search(v or "") for v in (update.message.text, update.message.caption)
    ):  # half an emoji: not UTF-16 encodable, and never sent by Telegram itself
        raise ValueError("malformed update: text with a lone surrogate")
    return update
