"""The fake outside world of the latency benchmark, on 127.0.0.1: an OpenAI-compatible LLM that
answers at once (a reply echoing the learner's marker, a summary, a profile), or after a
realistic delay (`DelayedLLM`), in a process of its own, and a Telegram Bot API that
timestamps each sendMessage on arrival and wakes the learner waiting for it.

    python -m bench.latency_servers                 # the LLM alone: prints its URL, serves
    python -m bench.latency_servers 1.5 5.0 7       # delayed: p50, p95 seconds, seed
    python -m bench.latency_servers stamped         # stamps each reply call's times
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Self

import requests

from bench.fault_servers import MARKER, echo_answer
from bench.latency_report import lognormal_sigma
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

    def stats(self) -> dict[str, Any]:
        """What `/stats` reports (under the lock): the calls answered per task."""
        return {"served": dict(self.served)}

    def flight(self) -> dict[str, Any]:
        """What `/flight` reports (under the lock): the calls in flight, for a sampler."""
        return {}

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if path in ("/stats", "/flight"):  # for LLMProcess, from outside the process
            # A copy under the lock, its JSON outside: a call finishing never waits for it
            # (a long run's /stats holds a wait per message, 60,000 after half an hour).
            with self.lock:
                found = self.stats() if path == "/stats" else self.flight()
            return 200, {}, json.dumps(found).encode()
        return super().respond(path, content_type, raw)


class DelayedLLM(InstantLLM):
    """An LLM with a real model's latency: every call waits a lognormal time (median `p50`,
    95th percentile `p95` seconds, from a seeded generator) before it is answered, calls
    served side by side on the server's threads. Per marker it keeps the seconds its reply
    calls waited (a reply's own model time), and it counts the calls in flight: now, at
    most, and in-flight seconds added up (their rate over a window is the mean), all calls
    (memory jobs' summaries and profiles too) and the reply calls alone (a turn's). Its
    connections stay open between calls, as OpenAI's API and the local servers Pam is
    pointed at keep theirs: a model that answers in seconds is a real one's stand-in."""

    keep_alive = True

    def __init__(self, p50: float, p95: float, seed: int) -> None:
        super().__init__()
        self.mu, self.sigma = math.log(p50), lognormal_sigma(p50, p95)
        self.rng = random.Random(seed)
        self.waited: defaultdict[str, float] = defaultdict(float)
        self.all_calls, self.replies = InFlight(), InFlight()

    def complete(self, path: str, body: dict[str, Any]) -> Answer:
        markers = _reply_markers(body)
        counts = [self.all_calls, self.replies] if markers else [self.all_calls]
        with self.lock:
            delay = self.rng.lognormvariate(self.mu, self.sigma)
            for count in counts:
                count.step(+1)
        started = time.monotonic()
        try:
            time.sleep(delay)
        finally:
            # The time it really waited: a thread of a busy process wakes late, and that is
            # the model's time too, not Pam's.
            waited = time.monotonic() - started
            with self.lock:
                for count in counts:
                    count.step(-1)
                for marker in markers:
                    self.waited[marker] += waited
        return super().complete(path, body)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "waited": dict(self.waited), **self.flight()}

    def flight(self) -> dict[str, Any]:
        return {**self.all_calls.figures(), **self.replies.figures("replies_")}


class InFlight:
    """Calls in flight: now, at most, and in-flight seconds added up (the integral over time:
    its rate over a window is the mean in flight)."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.busy_seconds = 0.0
        self.changed = time.monotonic()

    def step(self, by: int) -> None:
        at = time.monotonic()
        self.busy_seconds += self.now * (at - self.changed)
        self.changed = at
        self.now += by
        self.most = max(self.most, self.now)

    def figures(self, prefix: str = "") -> dict[str, Any]:
        self.step(0)
        return {
            f"{prefix}in_flight": self.now,
            f"most_{prefix}in_flight": self.most,
            f"{prefix}busy_seconds": self.busy_seconds,
        }


class StampedLLM(InstantLLM):
    """An InstantLLM that stamps each reply call (time.time(), the clock every process on
    the machine shares) as its request arrived and as it was answered, keyed by the marker of
    the learner's message: where a message's time went before, in and after the model call
    (bench/latency_trace.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: dict[str, tuple[float, float]] = {}

    def complete(self, path: str, body: dict[str, Any]) -> Answer:
        arrived = time.time()
        answer = super().complete(path, body)
        answered = time.time()
        with self.lock:
            for marker in _reply_markers(body):
                self.stamps.setdefault(marker, (arrived, answered))
        return answer

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "stamps": dict(self.stamps)}


def _reply_markers(body: dict[str, Any]) -> set[str]:
    """The markers of a reply call's learner message (none for summaries and profiles)."""
    return set(MARKER.findall(_last_user_text(body))) if task_of(body) == "reply" else set()


def _last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (as `echo_answer` reads the marker)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


class LLMProcess:
    """InstantLLM in a child process; with `p50` and `p95` a DelayedLLM, with `stamped` a
    StampedLLM. A real LLM does not share the benchmark's interpreter: in-process, every
    summary and profile call Pam's memory jobs make would hold the GIL that the fake Telegram
    needs to timestamp a reply, and count against Pam's reply latency."""

    def __init__(
        self,
        p50: float | None = None,
        p95: float | None = None,
        seed: int = 7,
        *,
        stamped: bool = False,
    ) -> None:
        # serve_llm's arguments: which fake model the child serves.
        self.kind = [] if p50 is None or p95 is None else [str(p50), str(p95), str(seed)]
        if stamped:
            self.kind = ["stamped"]

    def __enter__(self) -> Self:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_servers", *self.kind],
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
        return Counter(self.stats()["served"])

    def stats(self) -> dict[str, Any]:
        """The child's `/stats`: calls served, and for a DelayedLLM the waits and in-flight
        counts."""
        return self._get("/stats")

    def in_flight(self) -> tuple[int, int]:
        """A DelayedLLM's calls in flight now, all and reply calls alone (its `/flight`: small,
        however long the run)."""
        found = self._get("/flight")
        return int(found.get("in_flight", 0)), int(found.get("replies_in_flight", 0))

    def _get(self, path: str) -> dict[str, Any]:
        origin = self.base_url.removesuffix("/v1")
        found: dict[str, Any] = requests.get(f"{origin}{path}", timeout=10).json()
        return found

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
    echoes) and setting the event a learner waits on. `keep_alive`: connections stay open
    between calls, as api.telegram.org keeps them (the realistic benchmark); the
    zero-latency table keeps the connection a call its ratios were first measured with."""

    def __init__(self, delay: float = 0.0, keep_alive: bool = False) -> None:
        self.keep_alive = keep_alive
        super().__init__()
        # Seconds each call takes to answer after its arrival is stamped: a sender waits
        # as on a real network, while the measured latency stays Pam's own.
        self.delay = delay
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
        self._note(path, params, status, arrived)
        if self.delay:
            time.sleep(self.delay)
        return status, body

    def _note(self, path: str, params: dict[str, Any], status: int, arrived: float) -> None:
        """Count a call; for a reply sent, stamp its markers' arrival and wake their learners."""
        with self.lock:
            self.calls.clear()  # keep memory flat; `arrivals` has what counts
            if path.endswith("/sendChatAction"):
                self.typing += 1
            if not (path.endswith("/sendMessage") and status == 200):
                return
            markers = set(MARKER.findall(str(params.get("text", ""))))
            if not markers:
                self.unmarked += 1
            for marker in markers:
                self.arrivals[marker].append(arrived)
                self.waiting.setdefault(marker, threading.Event()).set()

    def answered(self, markers: list[str]) -> int:
        """How many of `markers` have had a reply."""
        with self.lock:
            return sum(1 for marker in markers if self.arrivals.get(marker))


def serve_llm(argv: list[str]) -> None:
    """The child of LLMProcess: serve until the parent closes stdin; with `argv` (p50, p95,
    seed) a DelayedLLM, with "stamped" a StampedLLM."""
    llm: InstantLLM = InstantLLM()
    if argv == ["stamped"]:
        llm = StampedLLM()
    elif argv:
        llm = DelayedLLM(float(argv[0]), float(argv[1]), int(argv[2]))
    with llm:
        print(llm.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve_llm(sys.argv[1:])
