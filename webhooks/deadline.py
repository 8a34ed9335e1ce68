"""A media download's overall deadline (PAM_MEDIA_DEADLINE). A per-read timeout alone lets a
server that trickles a byte every few seconds hold a lane for as long as it likes; within
`deadline(seconds)` every socket operation of an httpx client built on `DeadlineTransport`
waits at most for what is left (the response's headers included, which no reading loop of
ours sees), and past the deadline the next one fails with a timeout. Reading loops call
`check()` between chunks as well, so the bound holds even over a transport that is not ours
(a proxy httpx mounts from the environment).

The deadline lives in a context variable: Telegram's client is shared by threads, and each of
python-telegram-bot's coroutines runs in a task that copies the context of the thread that
started it (as `download_cap` does)."""

from __future__ import annotations

import functools
import ssl
import time
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpcore
import httpx

Clock = Callable[[], float]


class DeadlinePassed(httpcore.ReadTimeout):
    """The download's deadline passed; httpx raises it as its ReadTimeout (a
    TimeoutException), with this message."""


class Deadline:
    """When a download must end, by `clock` (monotonic seconds)."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.ends = clock() + seconds

    def remaining(self) -> float:
        return self.ends - self.clock()

    def passed(self) -> bool:
        return self.remaining() <= 0

    def bound(self, timeout: float | None) -> float:
        """`timeout` (None: none) shortened to what is left; DeadlinePassed when nothing is."""
        left = self.remaining()
        if left <= 0:
            raise DeadlinePassed(f"the download passed its {self.seconds:g} s deadline")
        return left if timeout is None else min(timeout, left)


_deadline: ContextVar[Deadline | None] = ContextVar("media_deadline", default=None)


@contextmanager
def deadline(seconds: float, clock: Clock = time.monotonic) -> Iterator[Deadline]:
    """Within the block, downloads on this thread (through a `DeadlineTransport`) end within
    `seconds` of its start, or fail with a timeout."""
    current = Deadline(seconds, clock)
    token = _deadline.set(current)
    try:
        yield current
    finally:
        _deadline.reset(token)


def check() -> None:
    """Raise httpx's ReadTimeout if this thread's download deadline has passed (a reading
    loop's check between chunks)."""
    current = _deadline.get()
    if current is not None and current.passed():
        raise httpx.ReadTimeout(f"the download passed its {current.seconds:g} s deadline")


def _bound(timeout: float | None) -> float | None:
    current = _deadline.get()
    return timeout if current is None else current.bound(timeout)


class _Stream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most until the deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bound(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bound(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, _bound(timeout)))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's own sockets, each connection and its operations bounded by the deadline."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(
            host, port, _bound(timeout), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._backend.connect_unix_socket(path, _bound(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once (loading the CA bundle costs ~25 ms of CPU; a
    Twilio fetch builds a transport each time). Contexts are safe to share between threads."""
    return httpx.create_ssl_context()


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport (its defaults: TLS from the environment, httpx's pool limits)
    over sockets that keep the deadline. Outside a `deadline` block it behaves as httpx's."""

    def __init__(self) -> None:
        context = _ssl_context()
        super().__init__(verify=context)
        # httpx takes no network backend of its own; its pool (an httpcore ConnectionPool,
        # as HTTPTransport builds it without a proxy) does. uv.lock pins httpx, and the
        # trickling-server tests fail should this stop taking effect.
        self._pool = httpcore.ConnectionPool(
            ssl_context=context,
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_Backend(),
        )
