"""The fake outside world of the fault-injection run, on 127.0.0.1: an OpenAI-compatible LLM
that fails a share of its calls (500, 429 with Retry-After, timeouts, malformed JSON), a
Telegram Bot API that answers some sends with 429, and a Twilio REST API. Each records what
Pam delivered, with arrival times, so the run can count answers per message."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from loopback.local_server import Answer
from loopback.openai_server import OpenAIServer, default_answer, task_of
from loopback.telegram_server import TelegramServer
from loopback.twilio_server import TwilioServer, text_of

MARKER = re.compile(r"\bL\d+-M\d+\b")
LLM_FAULTS = ("500", "429", "timeout", "malformed")
CORRECTION = {
    "original": "yo es",
    "corrected": "yo soy",
    "explanation": "'ser' in first person is 'soy'",
    "category": "conjugation",
}


# Two ways to answer, by the message's number: a learner's next message gets the other one.
# Like a real model, the fake never says its previous reply again (Pam takes a repeat of it
# for no reply), and corrects "yo es" only where the learner wrote it (Pam keeps no
# correction of words the message lacks).
REPLIES = (
    "¡Qué bien! Te leo ({marker}). ¿Y luego qué hiciste?",
    "Ah, ya veo ({marker}): cuéntame más, ¿con quién estabas y cómo te fue el resto del día?",
)


def reply_answer(marker: str, wrote: str = "yo es", previous: str | None = None) -> str:
    """The fake tutor's answer to the learner's message `wrote`, which carries `marker`: it
    echoes the marker. In the other words than Pam's `previous` reply where it is given (a
    message that got an apology instead leaves two answers in a row to one learner), else by
    the message's number."""
    found = re.search(r"-M(\d+)$", marker)
    which = int(found.group(1)) % 2 if found else 0
    if previous is not None:
        which = int(REPLIES[0].split("(", 1)[0] in previous)
    corrections = [CORRECTION] if CORRECTION["original"] in wrote.lower() else []
    return json.dumps(
        {"reply": REPLIES[which].format(marker=marker), "corrections": corrections},
        ensure_ascii=False,
    )


def _between(text: str, start: str, end: str) -> str:
    head, _, rest = text.partition(start)
    return rest.partition(end)[0] if rest or head != text else ""


def summary_answer(body: dict[str, Any]) -> str:
    """A summary that lists the marker of every learner message ever folded into it: the
    previous summary's markers, then those of the learner lines being folded now. A message
    folded twice would show twice; one skipped would be missing."""
    user = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
    previous = MARKER.findall(_between(user, "<previous_summary>", "</previous_summary>"))
    conversation = _between(user, "<conversation>", "</conversation>")
    folded = [
        marker
        for line in conversation.splitlines()
        if line.startswith("Learner:")
        for marker in MARKER.findall(line)
    ]
    return "Folded: " + " ".join(previous + folded)


def echo_answer(task: str, body: dict[str, Any], count: int) -> str:
    """The fake LLM's answer at once: replies echo the marker of the learner's last message,
    summaries list what they folded, profiles are the test server's default."""
    if task == "reply":
        messages = body.get("messages", [])
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        said = next(
            (m["content"] for m in reversed(messages) if m["role"] == "assistant" and m["content"]),
            "",
        )
        match = MARKER.search(last)
        return reply_answer(match.group(0) if match else "no-marker", last, said)
    if task == "summary":
        return summary_answer(body)
    return default_answer(task, body, count)


class FaultyLLM(OpenAIServer):
    """Answers replies by echoing the learner's marker after 20–60 ms of "thinking"; fails
    `rate` of all calls with one of LLM_FAULTS, chosen at random."""

    def __init__(self, rate: float, timeout_seconds: float, seed: int) -> None:
        super().__init__(answer=self._answer)
        self.rate = rate
        self.stall_seconds = timeout_seconds + 1.0
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.served: Counter[str] = Counter()

    def _answer(self, task: str, body: dict[str, Any], count: int) -> str:
        if task == "reply":
            time.sleep(random.uniform(0.02, 0.06))
        return echo_answer(task, body, count)

    def complete(self, path: str, body: dict[str, Any]) -> Answer:
        with self.lock:
            fault = self.rng.choice(LLM_FAULTS) if self.rng.random() < self.rate else None
            if fault:
                self.injected[fault] += 1
        error = json.dumps({"error": {"message": "injected fault", "type": "server_error"}})
        if fault == "500":
            return 500, {}, error.encode()
        if fault == "429":
            return 429, {"Retry-After": "1"}, error.encode()
        if fault == "timeout":
            time.sleep(self.stall_seconds)  # the client has given up by now
            return 504, {}, error.encode()
        if fault == "malformed":
            return 200, {}, b'{"id": "chatcmpl-broken", "choices": [{"message": {"conte'
        status, headers, raw = super().complete(path, body)
        with self.lock:
            self.served[task_of(body)] += 1
            self.requests.clear()  # a long run keeps counts, not every prompt
        return status, headers, raw


@dataclass(frozen=True)
class Delivered:
    """One reply a channel server accepted: to whom, what, when (time.time())."""

    chat: str
    text: str
    at: float


class Throttle:
    """Decides, call by call, whether to answer "too many requests" (`rate` of the calls)."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.throttled = 0
        self.guard = threading.Lock()

    def __call__(self) -> bool:
        with self.guard:
            throttle = self.rng.random() < self.rate
            self.throttled += throttle
            return throttle


class Recording:
    """What the fake platforms share: a Throttle, and the replies they accepted."""

    def __init__(self, rate: float, seed: int) -> None:
        super().__init__()
        self.throttle = Throttle(rate, seed)
        self.delivered: list[Delivered] = []

    @property
    def throttled(self) -> int:
        return self.throttle.throttled


class FaultyTelegram(Recording, TelegramServer):
    """The Bot API, answering `rate` of sendMessage calls with 429 retry_after=1."""

    def handle(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.endswith("/sendMessage") and self.throttle():
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests: retry after 1",
                "parameters": {"retry_after": 1},
            }
        status, body = super().handle(path, params)
        with self.lock:
            self.calls.clear()  # keep memory flat over a long run; `delivered` has what counts
            if path.endswith("/sendMessage") and status == 200:
                self.delivered.append(
                    Delivered(str(params["chat_id"]), params["text"], time.time())
                )
        return status, body


class RecordingTwilio(Recording, TwilioServer):
    """Twilio's Messages API, answering `rate` of sends with 429 (error 20429)."""

    def handle(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if self.throttle():
            return 429, {"code": 20429, "message": "Too Many Requests", "status": 429}
        status, body = super().handle(path, form)
        if status == 201:
            with self.lock:
                self.delivered.append(
                    # The text the learner reads: a reply with buttons goes as a quick reply.
                    Delivered(form.get("To", ""), text_of(form) or "", time.time())
                )
        return status, body


def snapshot(server: FaultyTelegram | RecordingTwilio) -> list[Delivered]:
    with server.lock:
        return list(server.delivered)
