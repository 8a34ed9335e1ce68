"""What the worker side counts for operators, in this process's own prometheus_client registry:
replies sent and failed by channel, turn latency, LLM calls, tokens and estimated dollars by
purpose and model, memory-job runs and failures, budget refusals. Workers run on machines of
their own, which no scrape reaches: memory/metric_snapshots.py copies these values into the
database, and the web app's /metrics adds up every process's copy (webhooks/metrics.py).

Labels are bounded sets named by the code or the operator's configuration (channels,
purposes, models, job kinds, limits): never a learner, never their words, so /forget has
nothing to erase here."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from memory.llm import (
    Accept,
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    LLMError,
    Purpose,
    Tool,
    Usage,
)
from memory.prices import audio_dollars, chat_dollars

# A label's value is cut to this: a model name comes from the server's answer.
MAX_LABEL_CHARS = 100

REGISTRY = CollectorRegistry()

REPLIES_SENT = Counter(
    "pam_replies_sent",
    "Replies delivered to the learner's channel (a spoken reply's voice message counts too).",
    ["channel"],
    registry=REGISTRY,
)
DELIVERIES_FAILED = Counter(
    "pam_deliveries_failed",
    "Replies that could not be delivered, for good (refused by the platform, or out of tries).",
    ["channel"],
    registry=REGISTRY,
)
TURN_SECONDS = Histogram(
    "pam_turn_seconds",
    "Time from taking a message from the inbox to its reply stored and queued to send.",
    ["channel"],
    buckets=(0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 60.0),
    registry=REGISTRY,
)
TURNS_IN_FLIGHT = Gauge(
    "pam_turns_in_flight",
    "Inbox lanes of this process inside a turn right now (the model's wait included): its "
    "turns in flight. The web's /metrics adds up counters only, so across workers read "
    "the rate of pam_turn_lane_seconds_total instead.",
    registry=REGISTRY,
)
TURN_LANE_SECONDS = Counter(
    "pam_turn_lane_seconds",
    "Seconds inbox lanes spent inside turns, added up: its rate is the mean number of turns "
    "in flight, across every worker.",
    registry=REGISTRY,
)
LLM_CALLS = Counter(
    "pam_llm_calls",
    "Billed LLM calls (unusable answers included: they are billed too).",
    ["purpose", "model"],
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "pam_llm_tokens",
    "Tokens of billed LLM calls; audio calls count the tokens their seconds or characters "
    "are converted to for the budgets.",
    ["purpose", "model", "direction"],
    registry=REGISTRY,
)
LLM_DOLLARS = Counter(
    "pam_llm_cost_dollars",
    "Estimated list price of billed LLM calls, USD (memory/prices.py; input tokens at the "
    "uncached rate; models without a listed price add nothing).",
    ["purpose", "model"],
    registry=REGISTRY,
)
MEMORY_JOBS = Counter(
    "pam_memory_job_runs",
    "Memory job runs (summary folds, profile updates, review grading) that ended, by outcome.",
    ["kind", "outcome"],
    registry=REGISTRY,
)
BUDGET_REFUSALS = Counter(
    "pam_budget_refusals",
    "Turns a limit stopped before any LLM call: rate, learner_budget or service_budget.",
    ["limit"],
    registry=REGISTRY,
)
CHECKINS_SENT = Counter(
    "pam_checkins_sent",
    "Check-ins (Pam writing first) delivered to the learner's channel.",
    registry=REGISTRY,
)
CHECKINS_SKIPPED = Counter(
    "pam_checkins_skipped",
    "Check-ins due that did not go, by reason (quiet_hours, recent_chat, no_template, "
    "learner_budget, nothing_to_say, telegram_blocked, late, ...).",
    ["reason"],
    registry=REGISTRY,
)
CHECKINS_ANSWERED = Counter(
    "pam_checkins_answered",
    "Check-ins the learner answered (wrote again after it).",
    registry=REGISTRY,
)


def _label(value: str) -> str:
    return value[:MAX_LABEL_CHARS] or "unknown"


@contextlib.contextmanager
def turn_in_flight() -> Iterator[None]:
    """Count a lane busy with a turn while the block runs (`TURNS_IN_FLIGHT`), and its
    seconds (`TURN_LANE_SECONDS`)."""
    started = time.monotonic()
    TURNS_IN_FLIGHT.inc()
    try:
        yield
    finally:
        TURNS_IN_FLIGHT.dec()
        TURN_LANE_SECONDS.inc(time.monotonic() - started)


def count_calls(purpose: str, calls: Iterable[Usage]) -> None:
    """Count billed chat calls made for `purpose`: calls, tokens and estimated dollars."""
    for call in calls:
        model = _label(call.model)
        LLM_CALLS.labels(purpose, model).inc()
        LLM_TOKENS.labels(purpose, model, "input").inc(max(0, call.input_tokens))
        LLM_TOKENS.labels(purpose, model, "output").inc(max(0, call.output_tokens))
        dollars = chat_dollars(call.model, call.input_tokens, call.output_tokens)
        if dollars is not None:
            LLM_DOLLARS.labels(purpose, model).inc(max(0.0, dollars))


def count_audio(purpose: str, model: str, tokens: int, *, seconds: float, chars: int) -> None:
    """Count one audio call: its budget tokens, and its estimated dollars."""
    label = _label(model)
    LLM_CALLS.labels(purpose, label).inc()
    LLM_TOKENS.labels(purpose, label, "input").inc(max(0, tokens))
    dollars = audio_dollars(model, seconds=seconds, chars=chars)
    if dollars is not None:
        LLM_DOLLARS.labels(purpose, label).inc(max(0.0, dollars))


def count_job(kind: str, failed: bool) -> None:
    """Count a memory job run that ended, failed or not."""
    MEMORY_JOBS.labels(_label(kind), "failed" if failed else "done").inc()


class MeteredChatModel:
    """A chat model that counts every billed call it makes, answered or not."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

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
        """The wrapped model's answer; its billed calls counted on the way."""
        try:
            completion = self.model.complete(
                messages,
                model=model,
                max_tokens=max_tokens,
                purpose=purpose,
                schema=schema,
                accept=accept,
                tools=tools,
            )
        except LLMError as exc:
            count_calls(purpose, exc.billed)
            raise
        count_calls(purpose, completion.calls)
        return completion

    def __getattr__(self, name: str) -> Any:
        # Anything else a caller asks of the model (its quirks, its client) is the model's.
        return getattr(self.model, name)
