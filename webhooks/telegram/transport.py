"""How Pam's synchronous threads call python-telegram-bot's asynchronous `Bot`: each thread
runs the Bot's coroutines on an event loop of its own, over a synchronous httpx transport, so
the rest of Pam stays synchronous. File downloads (a voice note's audio) are streamed, and
stopped at the cap the caller set (`download_cap`) and at its deadline (`webhooks.deadline`)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import httpx
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.request import BaseRequest, RequestData

from webhooks import deadline

log = logging.getLogger(__name__)

T = TypeVar("T")

# The most bytes a file download on this thread may bring (None: no cap). A context variable,
# not an attribute: threads share one transport, and each Bot coroutine runs in a task that
# copies the context of the thread that started it (`SyncBot._run`).
_download_cap: ContextVar[int | None] = ContextVar("telegram_download_cap", default=None)


class DownloadTooLarge(TelegramError):
    """A file download passed the cap of `download_cap`, and was stopped there."""


class DownloadFailed(TelegramError):
    """The file server answered a download with an error `status` (PTB would read any 4xx
    other than 400, 401, 403 and 404 as a network error, and so would a retry)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"file download answered {status}")
        self.status = status


@contextmanager
def download_cap(max_bytes: int) -> Iterator[None]:
    """Within the block, a file download on this thread stops past `max_bytes` bytes
    (DownloadTooLarge)."""
    token = _download_cap.set(max_bytes)
    try:
        yield
    finally:
        _download_cap.reset(token)


# Every lane of a worker may call the Bot API at once (a send, a "typing…"): httpx's default
# of 100 connections, with the client's 1 s pool timeout, would turn a burst at 128 lanes into
# timed-out sends. The cap stays, above PAM_WORKER_THREADS' limit, against a runaway.
LIMITS = httpx.Limits(max_connections=600, max_keepalive_connections=100)


class SyncHTTPXRequest(BaseRequest):
    """python-telegram-bot's transport (its documented extension point) over httpx's
    synchronous client. Pam calls the Bot from plain threads, each running the coroutine on an
    event loop of its own (`SyncBot._run`), so a request blocks only the thread that
    waits for its answer anyway; in exchange a call skips PTB's asynchronous stack (asyncio
    streams, anyio, httpcore's async pool) and a hop to a loop thread: about half a
    millisecond a send, a twentieth of a reply's whole latency in the latency benchmark.
    Errors are PTB's, as its own HTTPXRequest raises them."""

    def __init__(self, timeout: float, read_timeout: float) -> None:
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, read=read_timeout, pool=1.0),
            limits=LIMITS,
            headers={"User-Agent": self.USER_AGENT},
            transport=deadline.DeadlineTransport(),  # a voice note's download has a deadline
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
            if method == "GET":  # PTB's `retrieve`: only file downloads are GETs
                return self._download(url, timeout)
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

    def _download(self, url: str, timeout: httpx.Timeout) -> tuple[int, bytes]:
        """A file's bytes, streamed so that a download past this thread's cap stops there
        (DownloadTooLarge) instead of being read into memory whole."""
        cap = _download_cap.get()
        with self._client.stream("GET", url, timeout=timeout) as response:
            if response.status_code >= 300:
                raise DownloadFailed(response.status_code)
            length = response.headers.get("Content-Length", "")
            if cap is not None and length.isdigit() and int(length) > cap:
                raise DownloadTooLarge(f"the file is {length} bytes, over the cap")
            data = bytearray()
            for chunk in response.iter_bytes():
                deadline.check()
                data += chunk
                if cap is not None and len(data) > cap:
                    raise DownloadTooLarge("the file is over the cap")
        return response.status_code, bytes(data)


def file_url(base_url: str) -> str:
    """Where the Bot API server at `base_url` serves files: its last path segment under
    /file/ (https://api.telegram.org/bot → https://api.telegram.org/file/bot), as the Bot
    API serves them, a local server included."""
    head, _, last = base_url.rstrip("/").rpartition("/")
    return f"{head}/file/{last}"


def _given(value: Any, default: float | None) -> float | None:
    """A timeout a Bot method passed, or the transport's own when it passed none."""
    return default if isinstance(value, type(BaseRequest.DEFAULT_NONE)) else value


class SyncBot:
    """python-telegram-bot's `Bot`, called from plain threads. `base_url` (TELEGRAM_API_URL)
    points at a local Bot API server or a test server; it is the part before the token, e.g.
    http://127.0.0.1:8081/bot. Files are downloaded from the same server (`file_url`)."""

    def __init__(self, token: str, base_url: str | None = None, timeout: float = 15.0) -> None:
        # Opt in to python-telegram-bot's timedelta durations now, instead of its
        # deprecation warnings; the sender reads either kind (`sender._seconds`).
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        from telegram import Bot

        self.bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else None
        self.timeout = timeout
        self._requests = (
            SyncHTTPXRequest(timeout, read_timeout=timeout),
            SyncHTTPXRequest(timeout, read_timeout=timeout + 35),  # long polling waits longer
        )
        base_url = base_url or "https://api.telegram.org/bot"
        self.bot = Bot(
            token,
            base_url=base_url,
            base_file_url=file_url(base_url),
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )
        self._closed = False
        self._local = threading.local()  # each thread's event loop
        self._loops: list[asyncio.AbstractEventLoop] = []  # every open one
        self._running: set[asyncio.AbstractEventLoop] = set()  # those a call is using
        self._lock = threading.Lock()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one of the Bot's coroutines to its end on this thread's event loop (made on
        first use; a thread calls again and again, a loop costs once)."""
        loop = self._take_loop()
        try:
            return loop.run_until_complete(coroutine)
        finally:
            self._give_back(loop)

    def _take_loop(self) -> asyncio.AbstractEventLoop:
        """This thread's open event loop, marked in use so that `close` leaves it alone."""
        with self._lock:
            loop = getattr(self._local, "loop", None)
            if loop is None or loop.is_closed():
                loop = self._local.loop = asyncio.new_event_loop()
                self._loops.append(loop)
            self._running.add(loop)
            return loop

    def _give_back(self, loop: asyncio.AbstractEventLoop) -> None:
        """End a call's use of `loop`; once the client is closed, close it too (`close`
        leaves the loops that calls are using to them)."""
        with self._lock:
            self._running.discard(loop)
            if not self._closed:
                return
            # close() left it open and listed, as it was in use: only this call closes it.
            self._loops.remove(loop)
            self._local.loop = None
            loop.close()

    def close(self) -> None:
        """Close the HTTP clients and the threads' event loops (once; later calls do
        nothing). Call it when no other thread uses the client any more; a thread whose call
        is still running closes its own loop when that call returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for request in self._requests:
            try:
                self._run(request.shutdown())
            except Exception as exc:  # closing quietly matters less than shutting down
                log.debug("telegram shutdown: %s", exc)
        with self._lock:  # a loop is closed here or by its call's _give_back, never both
            idle = [loop for loop in self._loops if loop not in self._running]
            self._loops = [loop for loop in self._loops if loop in self._running]
            for loop in idle:
                loop.close()
