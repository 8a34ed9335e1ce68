"""Telegram replies: HTML-formatted corrections (plain text when Telegram rejects the
formatting), buttons under a reply as an inline keyboard, /progress charts as photos, spoken
replies as voice messages, "typing…", and Telegram's errors mapped onto Pam's
transient/permanent send errors."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from bot.channels import Button, PermanentSendError, RecipientBlocked, TransientSendError
from memory.messages import Sent
from webhooks.telegram.address import destination
from webhooks.telegram.buttons import keyboard
from webhooks.telegram.transport import SyncBot

if TYPE_CHECKING:
    from telegram import InlineKeyboardMarkup, Message

log = logging.getLogger(__name__)

MAX_CAPTION_CHARS = 1024  # Telegram's limit for a photo's caption

CORRECTION = re.compile(r"^✏️ (?P<original>.+?) → (?P<corrected>.+?)(?: — (?P<why>.+))?$")


def format_html(text: str) -> str:
    """`text` as Telegram HTML: everything escaped; in correction lines the original struck
    through and the correction in bold. Formatting never spans lines, so a reply split at
    line boundaries never splits inside a tag."""
    lines = []
    for line in text.split("\n"):
        match = CORRECTION.match(line)
        if match is None:
            lines.append(html.escape(line, quote=False))
            continue
        why = f" — <i>{html.escape(match['why'], quote=False)}</i>" if match["why"] else ""
        lines.append(
            f"✏️ <s>{html.escape(match['original'], quote=False)}</s> → "
            f"<b>{html.escape(match['corrected'], quote=False)}</b>{why}"
        )
    return "\n".join(lines)


def _seconds(value: int | float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class TelegramSender(SyncBot):
    """Delivers Telegram replies (the worker's `Sender`, `ButtonSender`, `ChartSender` and
    `VoiceSender`)."""

    max_chars = 4096
    voice_by_link = False  # sendVoice uploads the audio

    @staticmethod
    def length(text: str) -> int:
        """Characters, as the platform counts them."""
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send one message (at most max_chars): formatted, or plain if Telegram refuses the
        formatting. Raises TransientSendError or PermanentSendError."""
        return self._deliver(chat_id, lambda chat, thread: self._text(chat, thread, text))

    def send_buttons(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, idempotency_key: str
    ) -> Sent:
        """Send one message with `buttons` under it, an inline keyboard whose callback data is
        each button's command (a button whose command does not fit is left out). Raises
        TransientSendError or PermanentSendError."""
        markup = keyboard(buttons)
        return self._deliver(chat_id, lambda chat, thread: self._text(chat, thread, text, markup))

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """Send a /progress chart as a photo, uploaded (multipart: Telegram needs no public
        link), with `caption`. Raises TransientSendError or PermanentSendError."""
        caption = caption[:MAX_CAPTION_CHARS]

        def photo(chat: str, thread: int | None) -> Message:
            return self._run(
                self.bot.send_photo(chat, photo=png, caption=caption, message_thread_id=thread)
            )

        return self._deliver(chat_id, photo)

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        """Send a spoken reply: the OGG/Opus `audio` uploaded as a voice message (multipart:
        Telegram needs no public link). Raises TransientSendError or PermanentSendError."""

        def voice(chat: str, thread: int | None) -> Message:
            return self._run(
                self.bot.send_voice(
                    chat, voice=audio, filename="reply.ogg", message_thread_id=thread
                )
            )

        return self._deliver(chat_id, voice)

    def _text(
        self,
        chat: str,
        thread: int | None,
        text: str,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message:
        """One text message (with `markup` under it, if any): formatted, or plain if Telegram
        refuses the formatting."""
        from telegram.constants import ParseMode
        from telegram.error import BadRequest

        try:
            return self._run(
                self.bot.send_message(
                    chat,
                    format_html(text),
                    parse_mode=ParseMode.HTML,
                    message_thread_id=thread,
                    reply_markup=markup,
                )
            )
        except BadRequest as exc:
            if "parse" not in str(exc).lower() and "entit" not in str(exc).lower():
                raise
            log.info("telegram refused the formatting; sending plain text")
            return self._run(
                self.bot.send_message(chat, text, message_thread_id=thread, reply_markup=markup)
            )

    def _deliver(self, chat_id: str, request: Callable[[str, int | None], Message]) -> Sent:
        """Make `request` to the chat (and forum topic) `chat_id` names, following a group's
        migration, with Telegram's errors mapped onto Pam's."""
        from telegram.error import ChatMigrated

        chat, thread = destination(chat_id)
        try:
            message = request(chat, thread)
        except ChatMigrated as exc:  # a group became a supergroup: its id changed
            # Only a basic group migrates, and a basic group has no topics.
            log.info("telegram group migrated; delivering to its new id")
            return self._deliver(str(exc.new_chat_id), request)
        except Exception as exc:
            raise self._send_error(exc) from exc
        return Sent(platform_id=str(message.message_id))

    @staticmethod
    def _send_error(exc: Exception) -> Exception:
        from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

        if isinstance(exc, RetryAfter):
            return TransientSendError("telegram rate limit", _seconds(exc.retry_after))
        if isinstance(exc, Forbidden):  # blocked by the learner, or removed from the group
            # "Forbidden: bot was blocked by the user", "Forbidden: user is deactivated"
            if any(word in str(exc).lower() for word in ("blocked", "deactivated")):
                return RecipientBlocked(f"telegram forbids it: {exc}")
            return PermanentSendError(f"telegram forbids it: {exc}")
        if isinstance(exc, BadRequest):
            return PermanentSendError(f"telegram refused the message: {exc}")
        if isinstance(exc, TimedOut | NetworkError | TimeoutError):
            return TransientSendError(f"telegram unreachable: {type(exc).__name__}")
        return TransientSendError(f"telegram error: {type(exc).__name__}: {exc}")

    def typing(self, chat_id: str) -> None:
        """Show "typing…" in the chat (in its forum topic, if any) for a few seconds."""
        from telegram.constants import ChatAction

        chat, thread = destination(chat_id)
        self._run(self.bot.send_chat_action(chat, ChatAction.TYPING, message_thread_id=thread))
