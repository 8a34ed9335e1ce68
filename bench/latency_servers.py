"""The fake outside world of the latency benchmark, on 127.0.0.1: an OpenAI-compatible LLM that
answers at once (a reply echoing the learner's marker, a summary, a profile) in a process of
its own, and a Telegram Bot API that timestamps each sendMessage on arrival and wakes the
learner waiting for it.

    python -m bench.latency_servers   # the LLM alone: prints its URL, serves until stdin ends
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Self

import requests

from bench.fault_servers import MARKER, echo_answer
from loopback.harness import ROOT
from loopback.local_server import Answer
from loopback.openai_server import OpenAIServer, task_of
from loopback.telegram_server import TelegramServer


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

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if path == "/served":  # for LLMProcess: the counts, from outside the process
            with self.lock:
                return 200, {}, json.dumps(self.served).encode()
        return super().respond(path, content_type, raw)


class LLMProcess:
    """InstantLLM in a child process. A real LLM does not share the benchmark's interpreter:
    in-process, every summary and profile call Pam's memory jobs make would hold the GIL that
    the fake Telegram needs to timestamp a reply, and count against Pam's reply latency."""

    def __enter__(self) -> Self:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_servers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url:
            self.__exit__()
            raise RuntimeError("the fake LLM process did not start (see its output above)")
        return self

    @property
    def served(self) -> Counter[str]:
        """Calls answered so far, per task (reply, summary, profile)."""
        origin = self.base_url.removesuffix("/v1")
        return Counter(requests.get(f"{origin}/served", timeout=10).json())

    def __exit__(self, *exc: object) -> None:
        if self.process.stdin:
            self.process.stdin.close()  # the child's signal to stop
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


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


def serve_llm() -> None:
    """The child of LLMProcess: serve until the parent closes stdin."""
    with InstantLLM() as llm:
        print(llm.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve_llm()
