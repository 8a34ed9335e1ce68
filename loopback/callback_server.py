"""An operator's endpoint for the HTTP API channel's replies (PAM_API_CALLBACK_URL) on
127.0.0.1: it records every request and answers with scripted statuses, 200 once they run
out; `stall` holds each answer back, as a receiver that hangs does."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from loopback.local_server import Answer, LocalServer

STALL_LIMIT = 20.0  # seconds a stalled answer waits at most, so that a failed test ends


@dataclass(frozen=True)
class Received:
    """One request as the endpoint saw it; header names lower-cased, as HTTP allows."""

    path: str
    headers: dict[str, str]
    body: bytes


class CallbackServer(LocalServer):
    """Records requests in `received`; answers from `answers` (status, headers); while
    `stall` is set to an unset Event, answers only once it is set."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: deque[tuple[int, dict[str, str]]] = deque()
        self.stall: threading.Event | None = None
        super().__init__()

    @property
    def url(self) -> str:
        """The value for PAM_API_CALLBACK_URL."""
        return f"{self.origin}/pam/replies"

    def receive(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        self.received.append(Received(path, {k.lower(): v for k, v in headers.items()}, raw))
        if self.stall is not None:
            self.stall.wait(STALL_LIMIT)
        status, answer_headers = self.answers.popleft() if self.answers else (200, {})
        return status, answer_headers, b"{}"

    def close(self) -> None:
        if self.stall is not None:
            self.stall.set()  # a stalled answer would hold up the shutdown
        super().close()
