"""The HTTP plumbing of the fake outside services (LLM, Telegram, Twilio): a server on
127.0.0.1 in a thread; subclasses only say how to answer a request. An answer's body may be a
`Trickle`: sent a byte at a time, as a slow or hostile server would."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Trickle:
    """A 200 answer of `data` sent one byte every `every` seconds, each read well inside any
    per-read timeout; `head`: the status line and headers trickle too. `sent` counts the
    bytes that went out; `hung_up` is set when the client went away before the end, `done`
    when all of it was sent."""

    data: bytes
    every: float = 0.05
    head: bool = False
    content_type: str = "application/octet-stream"
    sent: int = 0
    hung_up: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def send(self, handler: BaseHTTPRequestHandler, closing: threading.Event) -> None:
        """Write the answer to `handler`'s client until it is all sent, the client hangs
        up, or the server closes."""
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {self.content_type}\r\n"
            f"Content-Length: {len(self.data)}\r\nConnection: close\r\n\r\n"
        ).encode()
        handler.close_connection = True
        try:
            if not self.head:
                handler.wfile.write(head)
                handler.wfile.flush()
            raw = head + self.data if self.head else self.data
            for index in range(len(raw)):
                if closing.wait(self.every):
                    return
                handler.wfile.write(raw[index : index + 1])
                handler.wfile.flush()
                self.sent += 1
            self.done.set()
        except (BrokenPipeError, ConnectionResetError):
            self.hung_up.set()


Answer = tuple[int, dict[str, str], bytes | Trickle]


class _Server(ThreadingHTTPServer):
    """The standard library's threading server, with room to accept what a worker's lanes
    send at once: its default listen backlog of 5 has the kernel drop connections past it."""

    request_queue_size = 256


class LocalServer:
    """Serves until closed; use as a context manager. Subclasses implement `respond`.

    `keep_alive`: answer in HTTP/1.1 and keep each client's connection open for its next
    request, with TCP_NODELAY, as OpenAI's and Telegram's servers do; off (HTTP/1.0, a
    connection a request) unless a subclass or instance turns it on before the server
    starts."""

    keep_alive = False

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            # On a kept connection, the headers and the body go out in two writes: with
            # Nagle's algorithm the body waits for the client's delayed ACK (40 ms on Linux).
            disable_nagle_algorithm = server.keep_alive

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = server.receive(self.path, dict(self.headers.items()), raw)
                if isinstance(body, Trickle):
                    body.send(self, server.closing)
                    return
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # A client that timed out has hung up: that is the point of a delay.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            do_GET = do_POST

        self.closing = threading.Event()  # set on close: trickling answers stop
        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def origin(self) -> str:
        """http://127.0.0.1:<port>"""
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def receive(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        """Status, headers and body for one request; a server that reads more of the request
        than its content type (a signature) overrides this instead of `respond`."""
        return self.respond(path, headers.get("Content-Type", ""), raw)

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        """Status, headers and body for one request."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
