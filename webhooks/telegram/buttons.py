"""Pam's buttons on Telegram, both ways: the inline keyboard under a reply (`keyboard`), each
button's callback data the command a tap says; and a tap coming back (a callback query), read
into an inbound message from the user who tapped (`inbound_from_tap`). The data is never
trusted: it is only text that user could have typed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.channels import Button
from memory.messages import Inbound
from webhooks.telegram import CHANNEL
from webhooks.telegram.address import chat_address, learner_address

if TYPE_CHECKING:
    from telegram import InlineKeyboardMarkup

log = logging.getLogger(__name__)

# The Bot API's bound on a button's callback_data, in bytes (UTF-8).
MAX_CALLBACK_BYTES = 64
# Up to this many buttons sit in one row; more go in rows of two, readable on a phone.
ONE_ROW = 3
ROW = 2
# A tap's platform id: the callback query's id, kept apart from update ids (a redelivered
# update carries the same query id, so the inbox recognises it).
TAP_PREFIX = "tap:"


def fits(button: Button) -> bool:
    """Whether `button` can be shown: its command fits in callback_data, and it has a label."""
    command = button.command.encode()
    return bool(button.label.strip()) and 0 < len(command) <= MAX_CALLBACK_BYTES


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    """The inline keyboard of `buttons`: one row of up to three, or rows of two. A button
    whose command is longer than callback_data takes is left out (the learner can still type
    it); None when no button is left."""
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup

    shown = [b for b in buttons if fits(b)]
    for button in buttons:
        if not fits(button):
            log.warning("a button was left out: its command is over %d bytes", MAX_CALLBACK_BYTES)
    if not shown:
        return None
    size = ONE_ROW if len(shown) <= ONE_ROW else ROW
    rows = [shown[start : start + size] for start in range(0, len(shown), size)]
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.command) for b in row] for row in rows]
    )


def well_typed_tap(query: Any) -> bool:
    """Whether a parsed callback query has the types Telegram sends (de_json does not check)."""
    user, message = query.from_user, query.message
    if user is None or type(user.id) is not int or not isinstance(query.id, str):
        return False
    if not (query.data is None or isinstance(query.data, str)):
        return False
    if message is None:
        return True
    chat = message.chat
    return chat is not None and type(chat.id) is int and isinstance(chat.type, str)


def inbound_from_tap(query: Any) -> Inbound | None:
    """The inbound message a tap on one of Pam's buttons says: from the user who tapped, in
    the chat (and forum topic) of the message the button was under, its text the button's
    command. None for what is no tap on a button of Pam's message: a game's callback (no
    data), a button under an inline-mode message (no chat), a bot."""
    user, message, data = query.from_user, query.message, query.data
    if not data or message is None or user.is_bot:
        return None
    chat = message.chat
    # As for a message: a private chat is the user's own (its id is theirs).
    group = chat.type != "private" or chat.id != user.id
    # An old message comes as an InaccessibleMessage, which says nothing of a topic.
    topic = getattr(message, "is_topic_message", False)
    thread = message.message_thread_id if topic else None
    return Inbound(
        channel=CHANNEL,
        platform_id=f"{TAP_PREFIX}{query.id}"[:100],
        address=learner_address(user.id, chat.id, group),
        chat_id=chat_address(chat.id, thread),
        text=data,
        display_name=(user.first_name or None),
    )


def tap_answered(query_id: str) -> dict[str, str]:
    """The webhook's answer to a tap: Telegram runs it as answerCallbackQuery (the Bot API's
    "making requests when getting updates"), so the learner's button stops spinning without
    the web request waiting on a call of its own to Telegram."""
    return {"method": "answerCallbackQuery", "callback_query_id": query_id}
