"""Pam's Telegram edge: the sender, voice notes' downloads, and the Bot API's other calls —
the bot's own username, registering and removing the webhook (with the command menu), and long
polling."""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any

from bot.i18n import LOCALES
from bot.phrases import menu
from webhooks.telegram.address import in_group
from webhooks.telegram.media import DEFAULT_MEDIA_DEADLINE, VoiceDownloads
from webhooks.telegram.sender import TelegramSender
from webhooks.telegram.status import WebhookState

log = logging.getLogger(__name__)

# A bot's username, and what a deep link's start parameter may hold (Bot API: deep linking).
_USERNAME = re.compile(r"[A-Za-z0-9_]{5,32}")
_START = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Telegram holds a long poll open for `timeout` seconds; the read may take this much longer.
POLL_READ_MARGIN_SECONDS = 10
UPDATE_TYPES = ["message", "edited_message", "channel_post", "my_chat_member", "callback_query"]
# The command menu: English for every app language without a catalog, and each locale's own.
COMMANDS = menu("en")


class WebhookIsSet(Exception):
    """Polling was refused because a webhook is set for the bot (Telegram's 409)."""


class TelegramClient(TelegramSender, VoiceDownloads):
    """The sender (a `VoiceSender` too), the voice notes' downloads (`VoiceFetcher`), plus
    what the web app (the bot's identity), `pam telegram` (the webhook) and polling ask of
    the Bot API."""

    def __init__(
        self,
        token: str,
        base_url: str | None = None,
        timeout: float = 15.0,
        *,
        local_files: Path | None = None,
        media_deadline: float = DEFAULT_MEDIA_DEADLINE,
    ) -> None:
        if local_files is not None and base_url is None:
            # Telegram's own Bot API never names a file on this disk; only the operator's own
            # server (TELEGRAM_API_URL) in --local mode does.
            raise ValueError("TELEGRAM_LOCAL_FILES_DIR is for a server set in TELEGRAM_API_URL")
        super().__init__(token, base_url, timeout)
        self.local_files = Path(os.path.realpath(local_files)) if local_files else None
        self.media_deadline = media_deadline
        self._username: str | None = None

    def username(self) -> str:
        """The bot's @username (without @), asked of Telegram once."""
        if self._username is None:
            me = self._run(self.bot.get_me())
            self._username = str(me.username or "")
        return self._username

    def in_group(self, chat_id: str) -> bool:
        """Whether replies to `chat_id` go to a group (or a channel): others read them."""
        return in_group(chat_id)

    def private_chat_link(self, start: str) -> str | None:
        """The deep link into the private chat with the bot that sends `/start <start>`
        (https://t.me/PamBot?start=profile), None while Telegram cannot say the bot's name."""
        try:
            name = self.username()
        except Exception as exc:  # the note is sent without the link
            log.warning("could not ask Telegram for the bot's username: %s", type(exc).__name__)
            return None
        if not _USERNAME.fullmatch(name) or not _START.fullmatch(start):
            return None
        return f"https://t.me/{name}?start={start}"

    def answer_tap(self, query_id: str) -> None:
        """Answer a tap's callback query (answerCallbackQuery), so the learner's button stops
        spinning; a failure is only logged (Telegram stops the spinner on its own)."""
        try:
            self._run(self.bot.answer_callback_query(query_id))
        except Exception as exc:
            log.info("telegram did not take the answer to a tap: %s", type(exc).__name__)

    def set_webhook(self, url: str, secret: str) -> None:
        """Register the webhook with the secret token, the update types Pam handles, and the
        command menu: English by default, and in each of Pam's locales for the learners whose
        app is set to it (setMyCommands' language_code)."""
        from telegram import BotCommand

        self._run(self.bot.set_webhook(url, secret_token=secret, allowed_updates=UPDATE_TYPES))
        self._run(self.bot.set_my_commands([BotCommand(n, d) for n, d in COMMANDS]))
        for locale in LOCALES:
            if locale != "en":
                commands = [BotCommand(n, d) for n, d in menu(locale)]
                self._run(self.bot.set_my_commands(commands, language_code=locale))

    def webhook_state(self) -> WebhookState:
        """What Telegram says of the bot's webhook (getWebhookInfo)."""
        info = self._run(self.bot.get_webhook_info())
        return WebhookState(
            url=str(info.url or ""),
            pending=int(info.pending_update_count or 0),
            last_error_at=info.last_error_date,
            last_error=info.last_error_message,
        )

    def delete_webhook(self) -> None:
        """Remove the webhook, so long polling can be used."""
        self._run(self.bot.delete_webhook())

    def get_updates(self, offset: int | None, timeout: int = 25) -> list[Any]:
        """Long-poll for updates after `offset`, as the JSON Telegram sent. Each is then read
        on its own (`webhooks.telegram.payload.parse_update`, as the webhook reads it):
        python-telegram-bot's `get_updates` reads a whole batch or fails, so one update it
        cannot read would stall polling for good. Raises WebhookIsSet on Telegram's 409."""
        from telegram.error import Conflict
        from telegram.warnings import PTBUserWarning

        kwargs: dict[str, Any] = {"timeout": timeout, "allowed_updates": list(UPDATE_TYPES)}
        if offset is not None:
            kwargs["offset"] = offset
        request = self.bot.do_api_request(
            "getUpdates", api_kwargs=kwargs, read_timeout=timeout + POLL_READ_MARGIN_SECONDS
        )
        try:
            with warnings.catch_warnings():
                # It points at `get_updates`, which is what cannot be used here.
                warnings.filterwarnings("ignore", "Please use 'Bot.getUpdates'", PTBUserWarning)
                result = self._run(request)
        except Conflict as exc:
            raise WebhookIsSet(str(exc)) from exc
        return list(result) if isinstance(result, list) else []
