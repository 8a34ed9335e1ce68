"""Fakes at Pam's own interfaces: a scripted chat model, a recall searcher over given
snippets and a manual job executor (the manual clock is memory.clock.ManualClock)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.llm import (
    Accept,
    ChatMessage,
    Completion,
    JsonSchema,
    LLMError,
    Outage,
    Purpose,
    Tool,
    ToolCall,
    Unusable,
)
from memory.recall.search import Snippet

# A queued answer: its text, an exception to raise, a function of the messages, or a whole
# Completion (one with tool calls, say).
Answer = str | Exception | Callable[[Sequence[ChatMessage]], str] | Completion


def reply_json(
    reply: str, corrections: list[dict[str, str]] | None = None, **fields: object
) -> str:
    """A well-formed tutor answer; `fields`: more of it (a review report, say)."""
    answer = {"reply": reply, "corrections": corrections or [], **fields}
    return json.dumps(answer, ensure_ascii=False)


# The fake's own replies: the first, unless Pam said it last — a reply that repeats Pam's
# previous one is no reply (bot.corrections.answer_problem), so a default never does.
DEFAULT_REPLIES = ("¡Qué bien! ¿Y qué más hiciste?", "¡Genial! Cuéntame, ¿cómo te fue el día?")


def default_reply(messages: Sequence[ChatMessage]) -> str:
    """The default tutor answer: DEFAULT_REPLIES' first, or its second after the first."""
    said = next(
        (m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), ""
    )
    first, second = DEFAULT_REPLIES
    return reply_json(second if said.startswith(first) else first)


ENDINGS = ("¡Genial! ¿Y qué más hiciste hoy?", "¿Y luego qué pasó después? Cuéntame.")


def fresh_ending(messages: Sequence[ChatMessage]) -> str:
    """An ending for a fake reply that Pam's previous reply in `messages` does not have: a
    fake that answers alike every turn would repeat itself, and a repeat is no reply."""
    said = next(
        (m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), ""
    )
    return ENDINGS[1] if said.endswith(ENDINGS[0]) else ENDINGS[0]


@dataclass
class Call:
    """One recorded call to the fake model."""

    purpose: Purpose
    model: str
    max_tokens: int
    messages: list[ChatMessage]
    schema: JsonSchema | None = None
    tools: list[Tool] | None = None

    @property
    def text(self) -> str:
        """Every message's content, joined: for "is X anywhere in this prompt" checks."""
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class FakeChatModel:
    """A ChatModel with queued answers per purpose and sensible defaults when a queue is empty.
    Every call is recorded; a queued Exception is raised; a callable gets the messages."""

    calls: list[Call] = field(default_factory=list)
    queues: dict[str, deque[Answer]] = field(default_factory=dict)
    defaults: dict[str, Answer] = field(
        default_factory=lambda: {
            "reply": default_reply,
            "summary": "The learner chatted about their week.",
            "profile": '{"no_change": true}',
            "checkin": json.dumps({"message": "¡Hola! ¿Qué tal tu semana?", "topic": "week"}),
        }
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    def queue(self, purpose: Purpose, *answers: Answer) -> None:
        """Answer the next `purpose` calls with `answers`, in order."""
        with self.lock:
            self.queues.setdefault(purpose, deque()).extend(answers)

    def of(self, purpose: Purpose) -> list[Call]:
        """The recorded calls for `purpose`."""
        with self.lock:
            return [c for c in self.calls if c.purpose == purpose]

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
        accept: Accept | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> Completion:
        """Answer with the next queued answer for `purpose`, or its default. An answer
        `accept` rejects raises Unusable at once, billed (the fake never asks again). A
        queued Completion with tool calls is returned as it is when tools were offered;
        without tools, like the real client: Unusable when it holds nothing but the calls."""
        with self.lock:
            offered = list(tools) if tools is not None else None
            self.calls.append(Call(purpose, model, max_tokens, list(messages), schema, offered))
            pending = self.queues.get(purpose)
            answer = pending.popleft() if pending else self.defaults[purpose]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, Completion):
            if answer.tool_calls and tools:
                return answer
            if answer.tool_calls and not answer.text:
                raise Unusable("the model called a tool it was not offered", answer.calls)
            answer = answer.text
        text = answer(messages) if callable(answer) else answer
        input_tokens = sum(len(m["content"]) // 4 for m in messages)
        completion = Completion(text, model, input_tokens, max(1, len(text) // 4))
        rejected = accept(text) if accept is not None else None
        if rejected is not None:
            raise Unusable(f"the answer was rejected: {rejected}", completion.calls)
        return completion


def tool_calls(*calls: tuple[str, str], text: str = "") -> Completion:
    """A completion that calls tools: (name, arguments as JSON text) each, ids call_1, …"""
    made = tuple(ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(calls, 1))
    return Completion(text, "fake-model", 50, 10, tool_calls=made)


def recall_call(query: str, *, text: str = "") -> Completion:
    """A completion calling the recall tool with `query`."""
    return tool_calls(("recall", json.dumps({"query": query})), text=text)


@dataclass
class FakeSearcher:
    """A recall Searcher over given snippets per learner: a snippet matches when it shares a
    word (case-insensitive) with the query. Every search is recorded."""

    snippets: dict[int, list[Snippet]] = field(default_factory=dict)
    searches: list[tuple[int, str, int]] = field(default_factory=list)

    def add(self, learner_id: int, text: str, said_at: datetime, role: str = "learner") -> Snippet:
        snippet = Snippet("message", role, text, said_at, 1.0)
        self.snippets.setdefault(learner_id, []).append(snippet)
        return snippet

    def search(self, learner_id: int, query: str, *, limit: int = 3) -> list[Snippet]:
        self.searches.append((learner_id, query, limit))
        words = {w.strip(".,!?¿¡").casefold() for w in query.split()} - {""}
        found = [
            s
            for s in self.snippets.get(learner_id, [])
            if words & {w.strip(".,!?¿¡").casefold() for w in s.text.split()}
        ]
        return found[:limit]


def failing(message: str = "LLM is down") -> LLMError:
    """An outage to queue: the provider unreachable, after the client's own retries."""
    return Outage(message)


class Gate:
    """A model answer that reports it was called, then blocks until released (bounded: a
    test that never releases it fails instead of hanging)."""

    def __init__(self, answer: str, wait: float = 20.0) -> None:
        self.answer = answer
        self.wait = wait
        self.called = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        self.called.set()
        if not self.release.wait(self.wait):
            raise AssertionError("the test never released the model")
        return self.answer


class ManualExecutor:
    """A job executor that holds submitted work until the test runs it: for interleavings."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, work: Callable[[], None]) -> None:
        self.pending.append(work)

    def run_all(self) -> int:
        """Run everything queued, including work queued while running. How many ran."""
        ran = 0
        while self.pending:
            self.pending.pop(0)()
            ran += 1
        return ran
