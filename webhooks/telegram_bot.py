"""The thin adapter around python-telegram-bot's `Bot`: its coroutines run on a private event
loop thread, so the rest of Pam stays synchronous. Sends replies (HTML-formatted corrections,
plain text when Telegram rejects the formatting), "typing…", and the webhook and polling
calls, mapping Telegram's errors onto Pam's transient/permanent send errors."""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
import threading
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from bot.channels import PermanentSendError, Sent, TransientSendError

log = logging.getLogger(__name__)

T = TypeVar("T")
UPDATE_TYPES = ["message", "edited_message", "channel_post", "my_chat_member"]
COMMANDS = [
    ("start", "Say hello and see your settings"),
    ("help", "What Pam understands"),
    ("language", "What you practise: /language Spanish English"),
    ("level", "Your level: /level A2"),
    ("profile", "What Pam knows about you"),
    ("forget", "Erase everything Pam knows about you"),
]
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


class WebhookIsSet(Exception):
    """Polling was refused because a webhook is set for the bot (Telegram's 409)."""


class TelegramClient:
    """Pam's Telegram edge. `base_url` (TELEGRAM_API_URL) points at a local Bot API server or
    a test server; it is the part before the token, e.g. http://127.0.0.1:8081/bot."""

    max_chars = 4096

    @staticmethod
    def length(text: str) -> int:
        """Characters, as the platform counts them."""
        return len(text)

    def __init__(self, token: str, base_url: str | None = None, timeout: float = 15.0) -> None:
        # Opt in to python-telegram-bot's timedelta durations now, instead of its
        # deprecation warnings; Pam reads them through _seconds either way.
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        from telegram import Bot
        from telegram.request import HTTPXRequest

        self.bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else None
        self.timeout = timeout
        self._requests = (
            HTTPXRequest(connect_timeout=timeout, read_timeout=timeout),
            HTTPXRequest(connect_timeout=timeout, read_timeout=timeout + 35),
        )
        self.bot = Bot(
            token,
            base_url=base_url or "https://api.telegram.org/bot",
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )
        self._closed = False
        self._username: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="pam-telegram", daemon=True
        )
        self._thread.start()

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout or self.timeout + 5)

    # -- delivery (the Sender protocol) ----------------------------------------------------

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send one message (at most max_chars): formatted, or plain if Telegram refuses the
        formatting. Raises TransientSendError or PermanentSendError."""
        from telegram.constants import ParseMode
        from telegram.error import BadRequest, ChatMigrated

        try:
            try:
                message = self._run(
                    self.bot.send_message(chat_id, format_html(text), parse_mode=ParseMode.HTML)
                )
            except BadRequest as exc:
                if "parse" not in str(exc).lower() and "entit" not in str(exc).lower():
                    raise
                log.info("telegram refused the formatting; sending plain text")
                message = self._run(self.bot.send_message(chat_id, text))
        except ChatMigrated as exc:  # a group became a supergroup: its id changed
            log.info("telegram group migrated; delivering to its new id")
            return self.send(str(exc.new_chat_id), text, idempotency_key=idempotency_key)
        except Exception as exc:
            raise self._send_error(exc) from exc
        return Sent(platform_id=str(message.message_id))

    @staticmethod
    def _send_error(exc: Exception) -> Exception:
        from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

        if isinstance(exc, RetryAfter):
            return TransientSendError("telegram rate limit", _seconds(exc.retry_after))
        if isinstance(exc, Forbidden):  # blocked by the learner, or removed from the group
            return PermanentSendError(f"telegram forbids it: {exc}")
        if isinstance(exc, BadRequest):
            return PermanentSendError(f"telegram refused the message: {exc}")
        if isinstance(exc, TimedOut | NetworkError | TimeoutError):
            return TransientSendError(f"telegram unreachable: {type(exc).__name__}")
        return TransientSendError(f"telegram error: {type(exc).__name__}: {exc}")

    def typing(self, chat_id: str) -> None:
        """Show "typing…" in the chat for a few seconds."""
        from telegram.constants import ChatAction

        self._run(self.bot.send_chat_action(chat_id, ChatAction.TYPING))

    # -- identity, webhook, polling --------------------------------------------------------

    def username(self) -> str:
        """The bot's @username (without @), asked of Telegram once."""
        if self._username is None:
            me = self._run(self.bot.get_me())
            self._username = str(me.username or "")
        return self._username

    def set_webhook(self, url: str, secret: str) -> None:
        """Register the webhook with the secret token, the update types Pam handles, and the
        command menu."""
        from telegram import BotCommand

        self._run(self.bot.set_webhook(url, secret_token=secret, allowed_updates=UPDATE_TYPES))
        self._run(self.bot.set_my_commands([BotCommand(n, d) for n, d in COMMANDS]))

    def delete_webhook(self) -> None:
        """Remove the webhook, so long polling can be used."""
        self._run(self.bot.delete_webhook())

    def get_updates(self, offset: int | None, timeout: int = 25) -> Sequence[Any]:
        """Long-poll for updates after `offset`. Raises WebhookIsSet on Telegram's 409."""
        from telegram.error import Conflict

        try:
            return self._run(
                self.bot.get_updates(offset=offset, timeout=timeout, allowed_updates=UPDATE_TYPES),
                timeout=timeout + self.timeout + 40,
            )
        except Conflict as exc:
            raise WebhookIsSet(str(exc)) from exc

    def close(self) -> None:
        """Close the HTTP clients and stop the loop thread (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True

        async def shut() -> None:
            # Bot.shutdown() skips a Bot that was never initialize()d: close the clients.
            await asyncio.gather(*(request.shutdown() for request in self._requests))

        try:
            self._run(shut())
        except Exception as exc:  # closing quietly matters less than shutting down
            log.debug("telegram shutdown: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
