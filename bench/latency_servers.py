"""The fake outside world of the latency benchmark, on 127.0.0.1: an OpenAI-compatible LLM that
answers at once (a reply echoing the learner's marker, a summary, a profile) and a Telegram
Bot API that timestamps each sendMessage on arrival and wakes the learner waiting for it."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from typing import Any

from bench.fault_servers import MARKER, echo_answer
from tests.local_server import Answer
from tests.openai_server import OpenAIServer, task_of
from tests.telegram_server import TelegramServer


class InstantLLM(OpenAIServer):
    """A zero-latency LLM: every task is answered as soon as the request is read."""

    def __init__(self) -> None:
        super().__init__(answer=echo_answer)
        self.served: Counter[str] = Counter()

    def complete(self, path: str, body: dict[str, Any]) -> Answer:
        answer = super().complete(path, body)
        with self.lock:
            self.served[task_of(body)] += 1
            self.requests.clear()  # a long run keeps counts, not every prompt
        return answer


class StopwatchTelegram(TelegramServer):
    """The Bot API, noting when each reply arrives (time.time(), keyed by the marker it
    echoes) and setting the event a learner waits on."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: dict[str, list[float]] = defaultdict(list)
        self.waiting: dict[str, threading.Event] = {}
        self.unmarked = 0  # replies without a marker: apologies, command answers
        self.typing = 0

    def expect(self, marker: str) -> threading.Event:
        """An event set when the reply carrying `marker` arrives."""
        with self.lock:
            return self.waiting.setdefault(marker, threading.Event())

    def handle(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        arrived = time.time()
        status, body = super().handle(path, params)
        with self.lock:
            self.calls.clear()  # keep memory flat; `arrivals` has what counts
            if path.endswith("/sendChatAction"):
                self.typing += 1
            if not (path.endswith("/sendMessage") and status == 200):
                return status, body
            markers = set(MARKER.findall(str(params.get("text", ""))))
            if not markers:
                self.unmarked += 1
            for marker in markers:
                self.arrivals[marker].append(arrived)
                self.waiting.setdefault(marker, threading.Event()).set()
        return status, body

    def answered(self, markers: list[str]) -> int:
        """How many of `markers` have had a reply."""
        with self.lock:
            return sum(1 for marker in markers if self.arrivals.get(marker))
