"""The fault run's verdict: answers per message, order per learner, the memory invariant,
the report table, and the timeline plot."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.fault_servers import MARKER, FaultyTelegram, RecordingTwilio, snapshot
from bench.fault_traffic import Learner, Message, Platforms, progress
from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store

KILL_GAP = 1.0  # seconds: a send this close before a worker's SIGKILL may not be recorded
# The run notes each kill's time rounded to 10 ms (after the process is gone): a send in the
# last moment before the kill may be stamped up to that much after the noted time.
KILL_TIME_ROUNDING = 0.01
FAILURE_COLUMNS = (
    "never_answered",
    "answered_twice",
    "out_of_order",
    "memory_violations",
    "not_accepted",
    "apologies",
    "crashed_processes",
)


@dataclass
class Report:
    seed: int
    options: dict[str, Any]
    messages: int = 0
    webhook_posts: int = 0
    webhook_statuses: dict[str, int] = field(default_factory=dict)
    accepted: int = 0
    not_accepted: int = 0
    answered_once: int = 0
    answered_twice: int = 0
    twice_at_a_kill: int = 0  # the send-to-commit gap of a SIGKILLed worker: at-least-once
    twice_per_kill: list[int] = field(default_factory=list)  # the same, per worker kill
    never_answered: int = 0
    out_of_order: int = 0
    apologies: int = 0
    memory_violations: int = 0
    folded_messages: int = 0
    crashed_processes: int = 0
    llm_faults: dict[str, int] = field(default_factory=dict)
    llm_calls_served: dict[str, int] = field(default_factory=dict)
    telegram_429s: int = 0
    twilio_429s: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    latency_p50: float = 0.0
    latency_p95: float = 0.0
    latency_max: float = 0.0
    wall_seconds: float = 0.0
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    def failures(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in FAILURE_COLUMNS}

    def passed(self) -> bool:
        return not any(self.failures().values())

    def table(self) -> str:
        rows = [
            ("inbound messages (50% Telegram, 50% WhatsApp)", self.messages),
            ("webhook POSTs incl. duplicates and retries", self.webhook_posts),
            ("messages accepted (2xx)", self.accepted),
            ("answered exactly once", self.answered_once),
            ("answered twice or more (any other cause)", self.answered_twice),
            ("answered twice, sent just as their worker was SIGKILLed", self.twice_at_a_kill),
            ("never answered", self.never_answered),
            ("answered out of order (per learner)", self.out_of_order),
            ("answered with an apology instead of a reply", self.apologies),
            ("memory invariant violations", self.memory_violations),
            ("messages folded into summaries", self.folded_messages),
            ("processes that crashed on their own", self.crashed_processes),
        ]
        lines = ["| measure | count |", "|---|---:|"]
        lines += [f"| {name} | {value:,} |" for name, value in rows]
        return "\n".join(lines)


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def deliveries_of(tg: FaultyTelegram, twilio: RecordingTwilio) -> list[Any]:
    """Every reply the fake Telegram and Twilio accepted, in arrival order."""
    return sorted([*snapshot(tg), *snapshot(twilio)], key=lambda d: d.at)


def answered_markers(tg: FaultyTelegram, twilio: RecordingTwilio) -> set[str]:
    """The markers of the messages that have a reply so far."""
    return {m for d in deliveries_of(tg, twilio) for m in MARKER.findall(d.text)}


def kill_gap_duplicates(
    twice: list[str], deliveries: list[Any], per_marker: Counter[str], worker_kills: list[float]
) -> tuple[list[str], list[int]]:
    """The duplicated markers that the send-to-record gap of a SIGKILLed worker explains, and
    how many each kill explains. Such a reply went out exactly twice, its first copy at most
    KILL_GAP seconds before a worker's kill, and it was the last thing its learner got before
    that kill: a lane records a send before it sends that learner anything else, so a reply
    followed by another to the same chat was recorded. A kill can leave one reply unrecorded
    per learner whose send was in flight (each of a worker's lanes holds one learner), not
    more. Each duplicate is charged to the first kill after its first copy."""
    explained: list[str] = []
    per_kill = [0] * len(worker_kills)
    for marker in twice:
        if per_marker[marker] != 2:  # a kill leaves one copy unrecorded, never two
            continue
        first = next(d for d in deliveries if marker in MARKER.findall(d.text))
        kills = [
            n
            for n, kill in enumerate(worker_kills)
            if -KILL_TIME_ROUNDING <= kill - first.at <= KILL_GAP
        ]
        if not kills:
            continue
        killed_at = worker_kills[kills[0]] + KILL_TIME_ROUNDING
        if any(d.chat == first.chat and first.at < d.at <= killed_at for d in deliveries):
            continue  # the learner got something after it: it had been recorded
        explained.append(marker)
        per_kill[kills[0]] += 1
    return explained, per_kill


def count_answers(
    report: Report,
    messages: list[Message],
    platforms: Platforms,
    tg: FaultyTelegram,
    twilio: RecordingTwilio,
    worker_kills: list[float],
) -> None:
    """Fill in how often, and in what order, each accepted message was answered."""
    accepted = [m for m in messages if m.platform_id in platforms.accepted_at]
    report.accepted = len(accepted)
    report.not_accepted = len(messages) - len(accepted)
    deliveries = deliveries_of(tg, twilio)
    per_marker = Counter(m for d in deliveries for m in MARKER.findall(d.text))
    report.answered_once = sum(1 for m in accepted if per_marker[m.marker] == 1)
    twice = [m.marker for m in accepted if per_marker[m.marker] > 1]
    never = [m.marker for m in accepted if per_marker[m.marker] == 0]
    # A worker SIGKILLed after the platform accepted a reply but before its COMMIT leaves the
    # reply unrecorded, and another worker sends it again: no platform offers the idempotency
    # key that would prevent it (docs/deploy/service.md). Such a duplicate's first copy arrived
    # at most KILL_GAP seconds before a worker was killed; every other duplicate is a failure.
    in_gap, per_kill = kill_gap_duplicates(twice, deliveries, per_marker, worker_kills)
    report.twice_at_a_kill = len(in_gap)
    report.twice_per_kill = per_kill
    report.answered_twice = len(twice) - len(in_gap)
    report.never_answered = len(never)
    report.details += [
        f"answered {per_marker[m]}x{' (sent as its worker was SIGKILLed)' if m in in_gap else ''}"
        f": {m}"
        for m in twice[:20]
    ]
    report.details += [f"never answered: {m}" for m in never[:20]]
    chats = {m.learner.chat: m.learner for m in messages}
    report.apologies = sum(1 for d in deliveries if not MARKER.search(d.text) and d.chat in chats)
    order = {m.marker: m.index for m in messages}
    for learner in {m.learner for m in messages}:
        seen: set[str] = set()
        highest = -1
        for delivery in deliveries:
            if delivery.chat != learner.chat:
                continue
            for marker in MARKER.findall(delivery.text):
                if marker in seen:
                    continue
                seen.add(marker)
                if order[marker] < highest:
                    report.out_of_order += 1
                    report.details.append(f"out of order: {marker} after M{highest + 1:02d}")
                highest = max(highest, order[marker])
    latencies = [
        first - platforms.accepted_at[m.platform_id]
        for m in accepted
        if (first := next((d.at for d in deliveries if m.marker in d.text), None)) is not None
    ]
    report.latency_p50 = round(percentile(latencies, 0.5), 3)
    report.latency_p95 = round(percentile(latencies, 0.95), 3)
    report.latency_max = round(max(latencies, default=0.0), 3)


def check_memory(
    report: Report,
    engine: Engine,
    learners: list[Learner],
    messages: list[Message],
    platforms: Platforms,
) -> None:
    """Per learner: every accepted message is stored once, in order, with exactly one reply;
    every stored message is either after the summary's watermark (unfolded) or listed in
    the summary exactly once (the fake summariser lists what it folded)."""
    store = Store(engine)
    for learner in learners:
        expected = [
            m.marker
            for m in messages
            if m.learner == learner and m.platform_id in platforms.accepted_at
        ]
        info = store.learners.find_learner(learner.address)
        if info is None:
            report.memory_violations += len(expected)
            report.details.append(f"{learner.key}: no memory at all")
            continue
        stored = store.conversation.messages(info.id)
        said = [
            MARKER.findall(m.content)[0]
            for m in stored
            if m.role == LEARNER and MARKER.search(m.content)
        ]
        if said != expected:
            missing = Counter(expected) - Counter(said)
            extra = Counter(said) - Counter(expected)
            bad = sum(missing.values()) + sum(extra.values()) or 1
            report.memory_violations += bad
            report.details.append(
                f"{learner.key}: stored messages differ from accepted ones: missing "
                f"{sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
            )
        roles = [m.role for m in stored]
        unanswered = sum(
            1
            for n, role in enumerate(roles)
            if role == LEARNER and (n + 1 >= len(roles) or roles[n + 1] != PAM)
        )
        doubled = sum(1 for a, b in itertools.pairwise(roles) if a == PAM and b == PAM)
        if unanswered or doubled:
            report.memory_violations += unanswered + doubled
            report.details.append(f"{learner.key}: {unanswered} unanswered, {doubled} doubled")
        summary = store.memory.summary(info.id)
        folded = [
            MARKER.findall(m.content)[0]
            for m in stored
            if m.role == LEARNER and m.id <= summary.watermark and MARKER.search(m.content)
        ]
        listed = MARKER.findall(summary.text)
        report.folded_messages += len(folded)
        if listed != folded:
            wrong = Counter(listed) - Counter(folded) + (Counter(folded) - Counter(listed))
            report.memory_violations += sum(wrong.values()) or 1
            report.details.append(
                f"{learner.key}: the summary lists {len(listed)} markers, {len(folded)} were "
                f"folded; differing: {sorted(wrong)[:5]}"
            )


def plot_timeline(
    report: Report,
    messages: list[Message],
    platforms: Platforms,
    tg: FaultyTelegram,
    twilio: RecordingTwilio,
    started: float,
    path: Path,
) -> None:
    """Save the timeline: messages accepted and answered, time to answer, faults marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    deliveries = deliveries_of(tg, twilio)
    first: dict[str, float] = {}
    for delivery in deliveries:
        for marker in MARKER.findall(delivery.text):
            first.setdefault(marker, delivery.at)
    accepted_times = sorted(t - started for t in platforms.accepted_at.values())
    answered_times = sorted(t - started for t in first.values())
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    top.plot(accepted_times, range(1, len(accepted_times) + 1), label="accepted (webhook 2xx)")
    top.plot(answered_times, range(1, len(answered_times) + 1), label="answered (reply delivered)")
    top.set_ylabel("messages (cumulative)")
    top.legend(loc="upper left")
    xs, ys = [], []
    for message in messages:
        accepted_at = platforms.accepted_at.get(message.platform_id)
        if accepted_at is not None and message.marker in first:
            xs.append(accepted_at - started)
            ys.append(first[message.marker] - accepted_at)
    bottom.scatter(xs, ys, s=4, alpha=0.5)
    bottom.set_yscale("log")
    bottom.set_ylabel("seconds from webhook to reply")
    bottom.set_xlabel("seconds since the run started")
    for event in report.events:
        for axis in (top, bottom):
            axis.axvline(event["at"], color="tab:red", linestyle="--", linewidth=0.8)
        top.annotate(
            event["what"],
            (event["at"], 0),
            xytext=(2, 4),
            textcoords="offset points",
            rotation=90,
            fontsize=7,
            color="tab:red",
        )
    figure.suptitle(
        f"Fault-injection run: {report.accepted:,} messages, {report.answered_once:,} answered "
        f"exactly once, {report.answered_twice} twice, {report.never_answered} never"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    progress(f"plot written to {path}")
