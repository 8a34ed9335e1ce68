"""The HTTP plumbing of the fake outside services (LLM, Telegram, Twilio): a server on
127.0.0.1 in a thread; subclasses only say how to answer a request."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Answer = tuple[int, dict[str, str], bytes]


class LocalServer:
    """Serves until closed; use as a context manager. Subclasses implement `respond`."""

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = server.receive(self.path, dict(self.headers.items()), raw)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # A client that timed out has hung up: that is the point of a delay.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
        self.httpd.shutdown()
        self.httpd.server_close()
