"""The thin adapter around python-telegram-bot's `Bot`: each of Pam's threads runs its
coroutines on an event loop of its own, over a synchronous httpx transport, so the rest of
Pam stays synchronous. Sends replies (HTML-formatted corrections, plain text when Telegram
rejects the formatting), "typing…", and the webhook and polling calls, mapping Telegram's
errors onto Pam's transient/permanent send errors."""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
import threading
import warnings
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any, TypeVar

import httpx
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

from bot.channels import PermanentSendError, TransientSendError
from memory.messages import Sent

log = logging.getLogger(__name__)

T = TypeVar("T")
# Telegram holds a long poll open for `timeout` seconds; the read may take this much longer.
POLL_READ_MARGIN_SECONDS = 10
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


TOPIC_SEPARATOR = ":"


def chat_address(chat_id: int | str, thread_id: int | None = None) -> str:
    """Where replies go, as one string: the chat, and the forum topic in it if any
    ("-1001234567890:42"). Carrying the topic here keeps the learner (the user) and the
    inbox's deduplication (the update id) as they are, with no column of its own."""
    return f"{chat_id}{TOPIC_SEPARATOR}{thread_id}" if thread_id is not None else str(chat_id)


def destination(address: str) -> tuple[str, int | None]:
    """The chat id and forum topic (or None) in a `chat_address`."""
    chat, _, thread = address.partition(TOPIC_SEPARATOR)
    return chat, int(thread) if thread.isdigit() else None


def _seconds(value: int | float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class SyncHTTPXRequest(BaseRequest):
    """python-telegram-bot's transport (its documented extension point) over httpx's
    synchronous client. Pam calls the Bot from plain threads, each running the coroutine on an
    event loop of its own (`TelegramClient._run`), so a request blocks only the thread that
    waits for its answer anyway; in exchange a call skips PTB's asynchronous stack (asyncio
    streams, anyio, httpcore's async pool) and a hop to a loop thread: about half a
    millisecond a send, a twentieth of a reply's whole latency in the latency benchmark.
    Errors are PTB's, as its own HTTPXRequest raises them."""

    def __init__(self, timeout: float, read_timeout: float) -> None:
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, read=read_timeout, pool=1.0),
            headers={"User-Agent": self.USER_AGENT},
        )

    @property
    def read_timeout(self) -> float | None:
        return self._client.timeout.read

    async def initialize(self) -> None:
        pass  # the client is ready when built

    async def shutdown(self) -> None:
        self._client.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        defaults = self._client.timeout
        timeout = httpx.Timeout(
            connect=_given(connect_timeout, defaults.connect),
            read=_given(read_timeout, defaults.read),
            write=_given(write_timeout, defaults.write),
            pool=_given(pool_timeout, defaults.pool),
        )
        try:
            response = self._client.request(
                method,
                url,
                data=request_data.json_parameters if request_data else None,
                files=request_data.multipart_data if request_data else None,
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:
            raise TimedOut from exc
        except httpx.HTTPError as exc:
            raise NetworkError(f"httpx.{type(exc).__name__}: {exc}") from exc
        return response.status_code, response.content


def _given(value: Any, default: float | None) -> float | None:
    """A timeout a Bot method passed, or the transport's own when it passed none."""
    return default if isinstance(value, type(BaseRequest.DEFAULT_NONE)) else value


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

        self.bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else None
        self.timeout = timeout
        self._requests = (
            SyncHTTPXRequest(timeout, read_timeout=timeout),
            SyncHTTPXRequest(timeout, read_timeout=timeout + 35),  # long polling waits longer
        )
        self.bot = Bot(
            token,
            base_url=base_url or "https://api.telegram.org/bot",
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )
        self._closed = False
        self._username: str | None = None
        self._local = threading.local()  # each thread's event loop
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one of the Bot's coroutines to its end on this thread's event loop (made on
        first use; a thread calls again and again, a loop costs once)."""
        loop = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = asyncio.new_event_loop()
            with self._lock:
                self._loops.append(loop)
        return loop.run_until_complete(coroutine)

    # -- delivery (the Sender protocol) ----------------------------------------------------

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send one message (at most max_chars): formatted, or plain if Telegram refuses the
        formatting. Raises TransientSendError or PermanentSendError."""
        from telegram.constants import ParseMode
        from telegram.error import BadRequest, ChatMigrated

        chat, thread = destination(chat_id)
        try:
            try:
                message = self._run(
                    self.bot.send_message(
                        chat,
                        format_html(text),
                        parse_mode=ParseMode.HTML,
                        message_thread_id=thread,
                    )
                )
            except BadRequest as exc:
                if "parse" not in str(exc).lower() and "entit" not in str(exc).lower():
                    raise
                log.info("telegram refused the formatting; sending plain text")
                message = self._run(self.bot.send_message(chat, text, message_thread_id=thread))
        except ChatMigrated as exc:  # a group became a supergroup: its id changed
            # Only a basic group migrates, and a basic group has no topics.
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
        """Show "typing…" in the chat (in its forum topic, if any) for a few seconds."""
        from telegram.constants import ChatAction

        chat, thread = destination(chat_id)
        self._run(self.bot.send_chat_action(chat, ChatAction.TYPING, message_thread_id=thread))

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

    def get_updates(self, offset: int | None, timeout: int = 25) -> list[Any]:
        """Long-poll for updates after `offset`, as the JSON Telegram sent. Each is then read
        on its own (`webhooks.telegram.route.parse_update`, as the webhook reads it):
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

    def close(self) -> None:
        """Close the HTTP clients and the threads' event loops (once; later calls do
        nothing). Call it when no other thread uses the client any more."""
        if self._closed:
            return
        self._closed = True
        for request in self._requests:
            try:
                self._run(request.shutdown())
            except Exception as exc:  # closing quietly matters less than shutting down
                log.debug("telegram shutdown: %s", exc)
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running():
                loop.close()
