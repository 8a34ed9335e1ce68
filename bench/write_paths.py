"""A turn's hot writes on Postgres two ways, side by side in one process: each as one fused
statement (data-modifying CTEs, one round trip: what Pam ran on Postgres before issue 30,
bench/write_paths_fused.py) and as the plain statements both backends can share (SQLite's way:
a short transaction, or statements that commit by themselves), which is what Pam runs now
where the fused statement did not pay (docs/benchmarks/speed.md, "One write path").

    python3 dev.py bench write_paths [--turns 400] [--database-url URL]

Each turn is a message accepted as the web accepts it (bounded per address), claimed, stored
with the read of its context (`begin_turn`), answered by a reply stored with its usage and
the memory backlog's read, its claim finished and its part queued (`save_reply` + finish),
every other turn with a correction and review grades; then a command is accepted, claimed
and finished with its answer queued (`finish`, as a command's turn ends). Both ways write
for the same learners, one after the other in every turn, which way goes first alternating,
so both see the same machine and the same amount of stored conversation. Only the write
itself is timed: wall time, this thread's CPU time (the database server's is not counted),
and its round trips (statements, and on Postgres the BEGIN and COMMIT of a transaction that
is more than one statement's own), counted as tests/bot/test_round_trips.py counts them.
A pause (`--pause-ms`) before each timed write leaves the connection idle, as the model call
and the learner's typing do between a turn's writes. Writes bench/results/write_paths.json
and prints a table."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event, func, select

from bench.latency_learners import DEFAULT_DATABASE
from bench.write_paths_fused import FusedWrites
from loopback.harness import ROOT, postgres_problem, postgres_schema
from memory.database import db
from memory.database.backends.base import Backend
from memory.database.backends.postgres import PostgresBackend
from memory.database.backends.sqlite import SqliteBackend
from memory.database.claims import Finishing, InboxClaim, admission_values, turned_away_values
from memory.database.records import (
    LEARNER,
    ActivityWindow,
    CorrectionRecord,
    LearnerInfo,
    ReplyRecord,
    ReviewReport,
    StoredMessage,
)
from memory.queue.inbox import Inbox
from memory.store.message_store import Store
from memory.turns import PROFILE_COUNT_LIMIT
from memory.wakeup import CHANNEL

RESULT = ROOT / "bench" / "results" / "write_paths.json"
FUSED, SHARED = "fused statement", "shared path"
ACCEPT, BEGIN, SAVE, SAVE_GRADED, FINISH = (
    "accept (web)",
    "begin_turn",
    "save_reply + finish",
    "save_reply + finish, corrections + review",
    "finish (a command)",
)
WRITES = (ACCEPT, BEGIN, SAVE, SAVE_GRADED, FINISH)
# The writes of one message from the webhook to a queued reply, half of them corrected.
A_TURN = (ACCEPT, BEGIN)
MAX_QUEUED = 20  # the web's default bound per address (PAM_MAX_QUEUED_PER_ADDRESS)
LEARNERS = 20
CORRECTION = CorrectionRecord("yo es", "yo soy", "ser for identity", "grammar", "ser vs estar")
_T = TypeVar("_T")


def progress(message: str) -> None:
    """A progress line on stdout."""
    print(f"[write_paths {time.strftime('%H:%M:%S')}] {message}", flush=True)


class SharedWrites(PostgresBackend):
    """Pam's Postgres backend with every hot write as the plain statements both backends can
    share, even where Postgres keeps a fused statement of its own: the reply's write as
    `Backend`'s transaction, and a message accepted by SQLite's statements with the NOTIFY
    a statement of its own in their transaction."""

    save_reply = Backend.save_reply

    def accept(self, row: Mapping[str, Any], now: datetime, max_queued: int = 0) -> bool:
        """`Backend.accept` in one transaction, SQLite's statements and a NOTIFY."""
        values = admission_values(dict(row), now, max_queued)
        accept, admit, note = SqliteBackend.accepting
        with self.engine.begin() as connection:
            if connection.execute(admit if max_queued else accept, values).first() is not None:
                connection.execute(NOTIFY)
                return True
            if connection.execute(note, turned_away_values(values)).first() is not None:
                connection.execute(NOTIFY)
        return False


NOTIFY = select(func.pg_notify(CHANNEL, ""))


@dataclass
class Trips:
    """Round trips sent through one engine while `on`: statements, and the BEGIN and COMMIT
    of every transaction not in autocommit."""

    statements: int = 0
    transactions: int = 0
    on: bool = False

    def watch(self, engine: Engine) -> None:
        def began(connection: Connection) -> None:
            autocommit = connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
            if self.on and not autocommit:
                self.transactions += 1

        def executed(*_: Any) -> None:
            if self.on:
                self.statements += 1

        event.listen(engine, "begin", began)
        event.listen(engine, "before_cursor_execute", executed)

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.statements = self.transactions = 0
        self.on = True
        try:
            yield
        finally:
            self.on = False

    @property
    def count(self) -> int:
        return self.statements + 2 * self.transactions


@dataclass
class Samples:
    """One write's measurements, one way."""

    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    trips: set[int] = field(default_factory=set)


class Ways:
    """The writes, each run one way or the other on the same database."""

    def __init__(self, url: str, pause: float) -> None:
        # The worker's engine commits without waiting for the disk, as `pam worker`'s does;
        # the web's waits, as the web's must.
        self.worker = db.make_engine(url, replayable=True)
        self.web = db.make_engine(url)
        self.trips = Trips()
        self.trips.watch(self.worker)
        self.trips.watch(self.web)
        self.store = Store(self.worker)
        self.inbox = Inbox(self.worker, 60)
        self.fused = FusedWrites(self.worker)
        self.fused_web = FusedWrites(self.web)
        self.shared = SharedWrites(self.worker)
        self.shared_web = SharedWrites(self.web)
        self.pause = pause
        self.samples = {(way, write): Samples() for way in (FUSED, SHARED) for write in WRITES}

    def close(self) -> None:
        self.worker.dispose()
        self.web.dispose()

    def timed(self, way: str, write: str, work: Callable[[], _T]) -> _T:
        """`work`'s result, its wall and CPU time and round trips noted as `write`'s."""
        time.sleep(self.pause)
        with self.trips.counting():
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            result = work()
            wall, cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
        samples = self.samples[way, write]
        samples.wall_ms.append(wall / 1e6)
        samples.cpu_ms.append(cpu / 1e6)
        samples.trips.add(self.trips.count)
        return result

    def accept(self, way: str, learner: LearnerInfo, text: str, *, timed: bool) -> InboxClaim:
        """Accept `text` from `learner` as the web does, and claim it."""
        now = datetime.now(UTC)
        backend = self.fused_web if way == FUSED else self.shared_web
        row = _inbound(learner.external_id, text)

        def accept() -> bool:
            return backend.accept(row, now, MAX_QUEUED)

        assert self.timed(way, ACCEPT, accept) if timed else accept()
        claim = self.inbox.claim_next()
        assert claim is not None and claim.text == text
        return claim

    def turn(self, way: str, learner: LearnerInfo, number: int) -> None:
        """One message from the webhook to its reply queued, then one command."""
        claim = self.accept(way, learner, f"{way} mensaje {number}", timed=True)
        window = ActivityWindow(
            datetime.now(UTC) - timedelta(minutes=1), datetime.now(UTC) - timedelta(days=1), False
        )
        message = StoredMessage(0, LEARNER, claim.text, 5)
        stored = self.timed(way, BEGIN, lambda: self._begin(way, learner, message, claim, window))
        graded = number % 2 == 1
        reply = ReplyRecord(
            learner.id,
            stored.id,
            "¡Muy bien! ¿Y tú qué hiciste ayer?",
            12,
            (CORRECTION,) if graded else (),
            ("gpt-4o-mini", 900, 40),
            ReviewReport((1,), (), (1, 2)) if graded else None,
        )
        now = datetime.now(UTC)
        finishing = Finishing(claim, now, deliver_lease=timedelta(seconds=30))
        backend = self.fused if way == FUSED else self.shared
        finish = (finishing, ["¡Muy bien! ¿Y tú qué hiciste ayer?"])
        ids = self.timed(
            way,
            SAVE_GRADED if graded else SAVE,
            lambda: backend.save_reply(reply, PROFILE_COUNT_LIMIT, now, finish),
        ).ids
        assert ids is not None and len(ids) == 1
        command = self.accept(way, learner, "/help", timed=False)
        finishing = Finishing(command, datetime.now(UTC), deliver_lease=timedelta(seconds=30))
        ids = self.timed(way, FINISH, lambda: backend.finish(finishing, ["Pam helps you..."]))
        assert ids is not None and len(ids) == 1

    def _begin(
        self,
        way: str,
        learner: LearnerInfo,
        message: StoredMessage,
        claim: InboxClaim,
        window: ActivityWindow,
    ) -> StoredMessage:
        """The learner's message stored and the context read, one way; the stored message."""
        now = datetime.now(UTC)
        if way == FUSED:
            found = self.fused.begin_turn(learner.id, message, claim.id, window, now)
            assert found is not None
            return found[0].messages[-1]
        begun = self.store.conversation.begin_turn(
            learner.id, message.content, message.tokens, inbox_id=claim.id, window=window
        )
        assert begun.answered is None and begun.context is not None
        return begun.stored


def _inbound(address: str, text: str) -> dict[str, Any]:
    """The inbox columns the web sets for a text message (`Inbox.admit`'s row)."""
    return {
        "channel": "bench",
        "platform_id": f"{address}-{time.perf_counter_ns()}",
        "address": address,
        "chat_id": address,
        "display_name": "Lena",
        "text": text,
        "kind": "text",
        "voice": None,
        "language_hint": "de",
    }


def run(url: str, turns: int, pause: float) -> Ways:
    """`turns` turns each way, interleaved, on a fresh schema of `url`."""
    with postgres_schema(url, prefix="pam_write_paths") as schema_url:
        engine = db.make_engine(schema_url)
        db.upgrade(engine)
        engine.dispose()
        ways = Ways(schema_url, pause)
        try:
            learners = [ways.store.learners.learner(f"bench:{n}", "Lena") for n in range(LEARNERS)]
            # Warm-up, uncounted: connections opened, statements compiled and cached.
            for way in (FUSED, SHARED):
                ways.turn(way, learners[0], 0)
            ways.samples = {key: Samples() for key in ways.samples}
            for n in range(turns):
                order = (FUSED, SHARED) if n % 2 == 0 else (SHARED, FUSED)
                for way in order:
                    ways.turn(way, learners[n % LEARNERS], n)
                if (n + 1) % 50 == 0 or n + 1 == turns:
                    progress(f"{n + 1}/{turns} turns each way")
        finally:
            ways.close()
    return ways


def summary(ways: Ways) -> dict[str, Any]:
    """Per write and way: round trips, wall p50 and mean, CPU mean (ms)."""
    found: dict[str, Any] = {}
    for write in WRITES:
        for way in (FUSED, SHARED):
            samples = ways.samples[way, write]
            found.setdefault(write, {})[way] = {
                "round_trips": sorted(samples.trips),
                "n": len(samples.wall_ms),
                "wall_p50_ms": statistics.median(samples.wall_ms),
                "wall_mean_ms": statistics.fmean(samples.wall_ms),
                "cpu_mean_ms": statistics.fmean(samples.cpu_ms),
            }
    return found


def per_turn(found: dict[str, Any], way: str, figure: str) -> float:
    """A message's writes from the webhook to its queued reply, half of them corrected."""
    saves = (found[SAVE][way][figure] + found[SAVE_GRADED][way][figure]) / 2
    return float(sum(found[write][way][figure] for write in A_TURN) + saves)


def table(found: dict[str, Any]) -> str:
    """The summary as a Markdown table."""
    lines = [
        "| write | round trips (fused, shared) | wall p50 ms (fused, shared, +) "
        "| wall mean ms (fused, shared, +) | CPU mean ms (fused, shared, +) |",
        "|---|---|---|---|---|",
    ]

    def cells(fused: float, shared: float) -> str:
        return f"{fused:.2f}, {shared:.2f}, {shared - fused:+.2f}"

    for write in WRITES:
        fused, shared = found[write][FUSED], found[write][SHARED]
        trips = "/".join(map(str, fused["round_trips"])), "/".join(map(str, shared["round_trips"]))
        lines.append(
            f"| {write} | {trips[0]}, {trips[1]} "
            f"| {cells(fused['wall_p50_ms'], shared['wall_p50_ms'])} "
            f"| {cells(fused['wall_mean_ms'], shared['wall_mean_ms'])} "
            f"| {cells(fused['cpu_mean_ms'], shared['cpu_mean_ms'])} |"
        )
    turn = {
        figure: (per_turn(found, FUSED, figure), per_turn(found, SHARED, figure))
        for figure in ("wall_p50_ms", "wall_mean_ms", "cpu_mean_ms")
    }
    lines.append(
        "| **a message, webhook to queued reply** (accept, begin_turn, save_reply + finish) | – "
        f"| {cells(*turn['wall_p50_ms'])} | {cells(*turn['wall_mean_ms'])} "
        f"| {cells(*turn['cpu_mean_ms'])} |"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py bench write_paths", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--turns", type=int, default=400, help="turns each way (default 400)")
    parser.add_argument(
        "--pause-ms", type=float, default=5.0, help="idle before each timed write (default 5)"
    )
    parser.add_argument("--out", type=Path, default=RESULT, help=f"default {RESULT}")
    args = parser.parse_args(argv)
    problem = postgres_problem(args.database_url)
    if problem:
        print(f"write_paths: {problem}", file=sys.stderr)
        return 1
    progress(f"{args.turns} turns each way on Postgres, interleaved")
    ways = run(args.database_url, args.turns, args.pause_ms / 1000)
    found = summary(ways)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"turns": args.turns, "pause_ms": args.pause_ms, "machine": platform.platform()}
    args.out.write_text(json.dumps({"run": meta, "writes": found}, indent=2) + "\n")
    print(table(found))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
