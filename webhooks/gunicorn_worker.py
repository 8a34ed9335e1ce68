"""The web process's gunicorn worker: gunicorn's threaded worker (gthread), except that a
request is read whole — head and body — by the worker's event loop before a thread serves it.

gthread hands a connection to one of its few threads as soon as the first bytes arrive, and
that thread then blocks reading the rest of the request, with no deadline: ten clients that
sent half a request line held every thread of `--workers 2 --threads 4`, and /healthz went
unanswered for minutes. Here a slow or idle client costs a socket in the event loop, never a
thread, and a request not read within REQUEST_SECONDS of its first chance is closed: what a
buffering proxy in front would do, in the one web command every platform runs
(webhooks/gunicorn_config.py), whatever proxy the platform has or has not.

It builds on gthread's internals (`TConn`, `enqueue_req`, the poller and its pending
connections), so pyproject.toml holds gunicorn to one major version, and
tests/system/test_slow_clients.py starts the shipped command against slow clients."""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

# Seconds a client has to send a whole request (from when the connection was accepted, or
# when it became readable again after an answer). Twilio itself gives up after 15 s.
REQUEST_SECONDS = 20.0
# A request head that has not ended by now is not one: gunicorn's own limits (a 4094-byte
# request line, 100 header fields) are far below.
MAX_HEAD_BYTES = 64 * 1024
# Bodies up to the app's limit (webhooks/app.py MAX_BODY_BYTES) are read before a thread is
# given; a longer one goes to a thread at once, for the app to refuse with a 413.
MAX_BODY_BYTES = 256 * 1024
READ_BYTES = 64 * 1024
# After a last answer the connection lingers this long, at most, for the client to close it
# first (RFC 9112 section 9.6), in the event loop: gunicorn's own lingering close blocks the
# loop for up to 2 s per client that keeps its end open.
LINGER_SECONDS = 2.0
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Connection: close\r\nContent-Length: 0\r\n\r\n"
)
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")


class HeadTooLarge(ValueError):
    """No end of the request head within MAX_HEAD_BYTES."""


def request_end(data: bytes | bytearray) -> int | None:
    """How many bytes of `data` make up its first request, head and body, if it is all
    there; None while more is to come. A request whose framing gunicorn will refuse anyway
    (a malformed length or chunk), or whose body is longer than MAX_BODY_BYTES, ends with
    what is there: gunicorn or the app answers it with a 4xx without waiting for more."""
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        if len(data) > MAX_HEAD_BYTES:
            raise HeadTooLarge(len(data))
        return None
    body = head_end + 4
    lengths, chunked = _framing(bytes(data[:head_end]))
    if chunked:
        return _chunked_end(data, body)
    if not lengths:
        return body
    (length, *others) = lengths
    if others or not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return body
    end = body + int(length)
    return end if len(data) >= end else None


def expects_continue(data: bytes | bytearray) -> bool:
    """Whether the request head in `data` is whole and asks for a 100 Continue before its
    client sends the body (RFC 9110 section 10.1.1; HTTP/1.1 only)."""
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0 or not bytes(data[: data.find(b"\r\n")]).endswith(b" HTTP/1.1"):
        return False
    return any(
        name.strip().lower() == b"expect" and value.strip().lower() == b"100-continue"
        for name, _, value in (
            line.partition(b":") for line in bytes(data[:head_end]).split(b"\r\n")[1:]
        )
    )


def _framing(head: bytes) -> tuple[set[bytes], bool]:
    """The Content-Length values of a request `head`, and whether its body is chunked."""
    lengths, chunked = set(), False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            lengths.add(value.strip())
        elif name == b"transfer-encoding":
            chunked = chunked or b"chunked" in value.lower()
    return lengths, chunked


def _chunked_end(data: bytes | bytearray, body: int) -> int | None:
    """Where a chunked body starting at `body` ends (its last chunk and trailers), if it is
    all there; past MAX_BODY_BYTES, or malformed, wherever the data ends."""
    at = body
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            break
        size = _CHUNK_SIZE.fullmatch(bytes(data[at:line_end]).split(b";", 1)[0].strip())
        if size is None:
            return len(data)  # malformed: gunicorn refuses it
        if int(size.group(0), 16) == 0:
            trailers_end = data.find(b"\r\n\r\n", line_end)
            if trailers_end >= 0:
                return trailers_end + 4
            break
        at = line_end + 2 + int(size.group(0), 16) + 2
        if at > len(data):
            break
    return None if len(data) - body <= MAX_BODY_BYTES else len(data)


class BufferingWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no type hints
    """gthread, with each request read whole in the event loop before a thread serves it,
    and each connection closed after its last answer without holding the loop up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lingering: deque[tuple[float, Any]] = deque()

    def enqueue_req(self, conn: Any) -> None:
        """Give `conn` to a thread once its next request is read; until then, read it here."""
        if getattr(conn, "pam_request", None) is not None or self.cfg.is_ssl:
            super().enqueue_req(conn)
            return
        received = bytearray()
        if conn.parser is not None:  # bytes a client sent behind its last request
            received += conn.parser.unreader.take_buffered()
        conn.pam_received = received
        conn.pam_continued = False
        conn.sock.setblocking(False)
        conn.timeout = time.monotonic() + REQUEST_SECONDS
        # gthread's pending connections: its loop closes them when `timeout` passes.
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._readable, conn))
        if received:
            self._check(conn)

    def _readable(self, conn: Any, client: Any) -> None:
        """Read what `conn`'s client sent; serve the request once it is whole."""
        try:
            data = conn.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._unwatch(conn)
            self.nr_conns -= 1
            conn.close()
            return
        conn.pam_received += data
        self._check(conn)

    def _check(self, conn: Any) -> None:
        """Hand `conn` to a thread if its request is whole (or refuse a head too large)."""
        try:
            end = request_end(conn.pam_received)
        except HeadTooLarge:
            self._unwatch(conn)
            self.nr_conns -= 1
            with contextlib.suppress(OSError):
                conn.sock.send(HEAD_TOO_LARGE)
            conn.close()
            return
        if end is None:
            if not conn.pam_continued and expects_continue(conn.pam_received):
                # The client waits for this before it sends the body; gunicorn sends one more
                # when it serves the request, which clients take as any other 1xx.
                conn.pam_continued = True
                with contextlib.suppress(OSError):
                    conn.sock.send(CONTINUE)
            return
        self._unwatch(conn)
        conn.pam_request = bytes(conn.pam_received)
        conn.pam_received = bytearray()
        super().enqueue_req(conn)

    def _unwatch(self, conn: Any) -> None:
        self.poller.unregister(conn.sock)
        self.pending_conns.remove(conn)

    def handle(self, conn: Any) -> Any:
        """Serve the request read whole in the event loop (in a thread of the pool)."""
        request, conn.pam_request = getattr(conn, "pam_request", None), None
        if request is not None:
            conn.data_ready = True  # no wait for data: it is all here
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(request)
        return super().handle(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """After a thread served `conn`: gthread's, except that a connection to close lingers
        in the event loop instead of blocking it."""
        if fs.cancelled() or fs.exception() is not None or fs.result():
            super().finish_request(conn, fs)
            return
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.setblocking(False)
        except OSError:
            self.nr_conns -= 1
            conn.close()
            return
        self._lingering.append((time.monotonic() + LINGER_SECONDS, conn))
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._drain, conn))

    def _drain(self, conn: Any, client: Any) -> None:
        """Read what a closing connection's client still sends, until it closes its end."""
        try:
            if conn.sock.recv(READ_BYTES):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._close_lingering(conn)

    def _close_lingering(self, conn: Any) -> None:
        self.poller.unregister(conn.sock)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """gthread's: close connections whose request did not come in time; and close the
        lingering ones whose time is up."""
        super().murder_pending()
        now = time.monotonic()
        while self._lingering and (self._lingering[0][0] <= now or not self.alive):
            _, conn = self._lingering.popleft()
            if conn.sock.fileno() >= 0:
                self._close_lingering(conn)
