"""Storage benchmark: how many bytes a learner-month of chat (600 learner messages: 20 a day for
30 days) leaves in the database, table by table, before and after chat retention
(PAM_CHAT_RETENTION_DAYS, 90 by default), on SQLite and on Postgres; what an active learner
adds in a year with retention on; and how many such learners a 1 GB and a 10 GB Postgres hold.

    python3 dev.py bench storage                       # 100 learners × 600 messages
    python3 dev.py bench storage --learners 1000       # the issue's 1,000 (hours: see below)
    python3 dev.py bench storage --quick               # 12 learners × 120 messages
    python3 dev.py bench storage --backends sqlite --out A   # one backend a process, then
    python3 dev.py bench storage --combine A/storage.json B/storage.json   # one report

Every message goes through Pam's real write paths, in this process: the worker's inbox, its
answering lane (the turn, the reply's write, the outbox, the send to a recording channel) and
the after-send work, with the memory jobs (fold and recall indexing, profile, review grading)
run inline as the memory process runs them; the scripted model and learners of the token
benchmark (bench/token_model.py, bench/conversations.py) answer and write; a manual clock
moves through the month, and every 10th learner asks for /progress once a week (the chart is
drawn and sent). Then the clock moves past the retention window and the worker's retention
round runs once (queues, charts and the chat history), and the sizes are read again. A learner
is forgotten last, and the inspection's row counts say whether anything about them is left.

Sizes: Postgres' `pg_total_relation_size` per table (indexes and TOAST included) after
`VACUUM (FULL, ANALYZE)`; SQLite's `dbstat` pages per table and its indexes after `VACUUM`
(bench/storage_sizes.py). Each is minus the empty, migrated database's, divided by learners.

Scale: every learner's rows come from their own script and their own memory jobs, so the
rows grow by the same amount per learner whatever the number of learners; the bytes per row
do not quite (docs/benchmarks/storage.md, "Scale": at 1,000 learners SQLite's recall terms
carry longer learner ids, and Postgres' GIN index shares each word's posting list among more
learners). On 2 shared cores the whole path runs 85 turns a second on SQLite and 34 on Postgres
(100 learners × 600 messages: 12 and 30 minutes), so 1,000 learners × 600 messages (600,000
turns) take about 2 hours on SQLite and 5 on Postgres; `--learners 1000` runs it.

Prints progress and markdown tables; writes bench/results/storage.json and storage.png (bytes
per learner-month by table, before and after retention, per backend). Deterministic but for
row ids: fixed seeds, a clock of its own."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from bench.conversations import LEARNERS, Learner, learner_messages
from bench.latency_learners import warn_without_autovacuum
from bench.storage_sizes import TABLES, NoDbstat, table_sizes
from bench.token_model import ScriptedModel
from bench.token_runs import REPLY_MODEL, START, bench_settings
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.harness import postgres_problem, postgres_schema
from memory.clock import ManualClock
from memory.config import MemoryConfig
from memory.database import db
from memory.database.models_recall import RECALL_FTS
from memory.database.schema import metadata
from memory.messages import Inbound, Sent
from memory.tokens import TokenCounter
from webhooks.wiring import build

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgres")
CHANNEL = "bench"
MONTH = timedelta(days=30)
RETENTION_DAYS = 90  # PAM_CHAT_RETENTION_DAYS' default
YEAR_MONTHS = 365 / 30
PROGRESS_EVERY = 10  # every this many learners asks for /progress once a week
GB = 10**9  # a "1 GB" plan, counted in decimal gigabytes (the smaller reading)
# What stays of each table in a year of steady chat: queues hold a week of finished items
# (PAM_QUEUE_RETENTION_HOURS), charts and spoken replies a day (their links' lifetime); these
# hold one row per learner (or per recurring mistake), whatever the months; the rest grows with
# every month, kept whole for the retention window and as retention leaves it after that.
QUEUES = {"inbox": 7 / 30, "outbox": 7 / 30, "speech_parts": 7 / 30}
MEDIA = {"charts": 1 / 30, "voice_clips": 1 / 30}
# What retention leaves of these is each learner's unfolded tail (the last messages and their
# corrections), which the retention window already holds: an old month keeps none of them.
TAIL = {"messages", "corrections"}
PER_LEARNER = {
    "learners",
    "summaries",
    "profiles",
    "memory_jobs",
    "review_items",
    "review_sessions",
    "review_pending",
}


def log(line: str) -> None:
    """A progress line, flushed at once."""
    print(line, flush=True)


@dataclass(frozen=True)
class Options:
    learners: int = 100
    messages: int = 600  # each learner's in the month
    backends: tuple[str, ...] = BACKENDS
    database_url: str = DEFAULT_DATABASE
    out: Path | None = RESULTS


class BenchSender:
    """A channel that takes every reply and chart and keeps nothing but a count."""

    max_chars = 4096

    def __init__(self) -> None:
        self.sent = 0

    def length(self, text: str) -> int:
        """Characters, as Telegram counts them closely enough."""
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Take one reply."""
        self.sent += 1
        return Sent(platform_id=f"b-{self.sent}")

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """Take one /progress chart."""
        return self.send(chat_id, caption, idempotency_key=idempotency_key)


def cohort(count: int) -> list[Learner]:
    """`count` scripted learners, the token benchmark's three kinds in turn, each with a seed
    (so a script) of their own."""
    return [
        replace(
            base,
            external_id=f"{CHANNEL}:{n}",
            name=f"{base.name} {n}",
            seed=base.seed * 100_003 + n,
        )
        for n in range(count)
        for base in [LEARNERS[n % len(LEARNERS)]]
    ]


@contextmanager
def database(backend: str, base_url: str) -> Iterator[str]:
    """A fresh database of `backend`: a SQLite file, or a schema of its own in the Postgres at
    `base_url`; gone afterwards."""
    if backend == "postgres":
        with postgres_schema(base_url, prefix="pam_storage") as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="pam-storage-") as folder:
        yield f"sqlite:///{Path(folder) / 'storage.db'}"


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows per table."""
    with engine.connect() as connection:
        return {
            table.name: int(connection.scalar(select(func.count()).select_from(table)) or 0)
            for table in metadata.sorted_tables
        }


class Month:
    """One backend's month of chat through a worker's lanes, run synchronously."""

    def __init__(self, url: str, learners: Sequence[Learner]) -> None:
        # As `pam worker` opens it: on Postgres, commits that do not wait for the disk.
        self.engine = db.make_engine(url, replayable=True)
        db.upgrade(self.engine)
        self.clock = ManualClock(START)
        self.model = ScriptedModel(TokenCounter(REPLY_MODEL), LEARNERS)
        self.pam = bench_settings_pam(url, self.engine, self.model, self.clock)
        self.sender = BenchSender()
        self.worker = Worker(self.pam, {CHANNEL: self.sender})
        self.learners = list(learners)

    def say(self, learner: Learner, text: str) -> None:
        """One message from `learner`, answered and delivered as a worker does."""
        chat_id = learner.external_id.split(":", 1)[1]
        message = Inbound(
            channel=CHANNEL,
            platform_id=uuid.uuid4().hex,
            address=learner.external_id,
            chat_id=chat_id,
            text=text,
        )
        assert self.worker.inbox.accept(message), "the inbox turned a message away"
        while self.worker.answering.next():
            pass
        while self.worker.delivery.next():  # charts: drawn and sent by the delivery lanes
            pass

    def run(self, messages: int, report: Callable[[str], None]) -> None:
        """Each learner's settings, then `messages` messages each, taking turns, over 30 days
        of the clock, /progress once a week for every PROGRESS_EVERY-th learner."""
        for learner in self.learners:
            self.say(learner, f"/language {learner.target} {learner.native}")
            self.say(learner, f"/level {learner.level}")
        scripts = {lr.external_id: learner_messages(lr, messages) for lr in self.learners}
        step = MONTH / messages
        weekly = {int(messages * week / 4.3) for week in range(1, 5)}
        started = time.monotonic()
        for turn in range(messages):
            self.clock.advance(step)
            for learner in self.learners:
                self.say(learner, scripts[learner.external_id][turn])
            if turn in weekly:
                for learner in self.learners[::PROGRESS_EVERY]:
                    self.say(learner, "/progress")
            if (turn + 1) % max(1, messages // 10) == 0 or turn + 1 == messages:
                done = (turn + 1) * len(self.learners)
                rate = done / (time.monotonic() - started)
                report(f"  message {turn + 1}/{messages} of each learner ({rate:.0f} turns/s)")

    def retain(self) -> int:
        """Move the clock past the retention window and run the worker's retention round."""
        self.clock.advance(timedelta(days=RETENTION_DAYS + 1))
        return self.worker.retention.prune()

    def forget_one(self) -> dict[str, int]:
        """/forget one learner, confirmed; the rows still about them, by table."""
        learner = self.learners[0]
        info = self.pam.store.learners.find_learner(learner.external_id)
        assert info is not None
        turns = self.pam.local_turns()
        asked = turns.take(TurnRequest(learner.external_id, "/forget"))
        confirm = [b.command for b in asked.buttons if b.command.startswith("/forget yes ")]
        assert len(confirm) == 1, "/forget asked for no confirmation"
        turns.take(TurnRequest(learner.external_id, confirm[0]))
        return self.pam.store.inspection.rows_about(info.id, learner.external_id)

    def close(self) -> None:
        self.pam.close(0)
        self.engine.dispose()


def bench_settings_pam(url: str, engine: Engine, model: ScriptedModel, clock: ManualClock) -> Pam:
    """Pam as the token benchmark builds it: default memory knobs, memory jobs inline."""
    settings = bench_settings(url, MemoryConfig())
    return build(settings, model=model, submit=lambda work: work(), engine=engine, clock=clock)


def run_backend(backend: str, options: Options, report: Callable[[str], None]) -> dict[str, Any]:
    """The month on one backend: sizes empty, after the month and after retention, per table;
    row counts; and what /forget left."""
    learners = cohort(options.learners)
    with database(backend, options.database_url) as url:
        month = Month(url, learners)
        try:
            empty = table_sizes(month.engine)
            report(
                f"{backend}: {len(learners)} learners × {options.messages} messages, through "
                "the worker's lanes"
            )
            # Sizes are read after a VACUUM FULL either way; the turns' rate is not.
            vacuumed = warn_without_autovacuum(url, report)
            started = time.monotonic()
            month.run(options.messages, report)
            seconds = time.monotonic() - started
            rows_month = row_counts(month.engine)
            sizes_month = table_sizes(month.engine)
            report(f"{backend}: month done in {seconds:.0f} s; retention …")
            pruned = month.retain()
            rows_after = row_counts(month.engine)
            sizes_after = table_sizes(month.engine)
            left = month.forget_one()
        finally:
            month.close()
    report(f"{backend}: retention removed {pruned:,} rows; /forget left {sum(left.values())}")
    return {
        "backend": backend,
        "learners": len(learners),
        "messages_per_learner": options.messages,
        "seconds": round(seconds, 1),
        "turns_per_second": round(len(learners) * options.messages / seconds, 1),
        "postgres_autovacuum": vacuumed,
        "empty_bytes": empty,
        "month_bytes": sizes_month,
        "after_bytes": sizes_after,
        "month_rows": rows_month,
        "after_rows": rows_after,
        "retention_removed_rows": pruned,
        "forgotten_rows_left": left,
    }


def per_learner(result: dict[str, Any], key: str) -> dict[str, float]:
    """Bytes per learner-month by table, over the empty database's."""
    learners = result["learners"]
    scale = 600 / result["messages_per_learner"]  # a shorter month is scaled to 600 messages
    sizes = {}
    for table, size in result[key].items():
        grown = size - result["empty_bytes"].get(table, 0)
        share = grown / learners
        sizes[table] = share if table in PER_LEARNER else share * scale
    return sizes


def year(before: dict[str, float], after: dict[str, float], retention: bool) -> dict[str, float]:
    """Bytes per table an active learner (600 messages a month) holds after a year, with chat
    retention at its default or off."""
    live = RETENTION_DAYS / 30 if retention else YEAR_MONTHS
    held = {}
    for table, month in before.items():
        if table in QUEUES:
            held[table] = month * QUEUES[table]
        elif table in MEDIA:
            held[table] = month * MEDIA[table]
        elif table in PER_LEARNER:
            held[table] = month
        elif table in TAIL:
            held[table] = live * month
        else:
            held[table] = live * month + (YEAR_MONTHS - live) * after[table]
    return held


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """One backend's bytes per learner-month before and after retention, a year's, and the
    learners a 1 GB and a 10 GB database hold."""
    before, after = per_learner(result, "month_bytes"), per_learner(result, "after_bytes")
    kept, unbounded = year(before, after, True), year(before, after, False)
    kept_total, unbounded_total = sum(kept.values()), sum(unbounded.values())
    return {
        "before": before,
        "after": after,
        "year_with_retention": kept,
        "year_without_retention": unbounded,
        "year_bytes_with_retention": kept_total,
        "year_bytes_without_retention": unbounded_total,
        "learners_per_1gb": int(GB // kept_total),
        "learners_per_10gb": int(10 * GB // kept_total),
        "learners_per_1gb_without_retention": int(GB // unbounded_total),
        "learners_per_10gb_without_retention": int(10 * GB // unbounded_total),
    }


def kb(value: float) -> str:
    return f"{value / 1000:,.1f}"


def markdown(results: dict[str, dict[str, Any]]) -> str:
    """The tables of docs/benchmarks/storage.md."""
    backends = list(results)
    tables = sorted(
        {t for r in results.values() for t, v in r["before"].items() if abs(v) >= 1},
        key=lambda t: -max(r["before"].get(t, 0) for r in results.values()),
    )
    head = " | ".join(f"{b} before | {b} after" for b in backends)
    lines = [
        "KB per learner-month (600 learner messages), before and after retention:",
        "",
        f"| table | {head} |",
        "|---|" + "---:|" * (2 * len(backends)),
    ]
    for table in tables:
        cells = " | ".join(
            f"{kb(results[b]['before'].get(table, 0))} | {kb(results[b]['after'].get(table, 0))}"
            for b in backends
        )
        lines.append(f"| {table} | {cells} |")
    totals = " | ".join(
        f"**{kb(sum(results[b][key].values()))}**" for b in backends for key in ("before", "after")
    )
    lines.append(f"| **all** | {totals} |")
    lines += [
        "",
        "| | " + " | ".join(backends) + " |",
        "|---|" + "---:|" * len(backends),
        "| MB an active learner holds after a year, retention 90 days | "
        + " | ".join(f"{results[b]['year_bytes_with_retention'] / 1e6:.2f}" for b in backends)
        + " |",
        "| MB after a year, retention off | "
        + " | ".join(f"{results[b]['year_bytes_without_retention'] / 1e6:.2f}" for b in backends)
        + " |",
        "| active learners for a year in 1 GB, retention 90 days | "
        + " | ".join(f"{results[b]['learners_per_1gb']:,}" for b in backends)
        + " |",
        "| … in 10 GB | "
        + " | ".join(f"{results[b]['learners_per_10gb']:,}" for b in backends)
        + " |",
        "| active learners for a year in 1 GB, retention off | "
        + " | ".join(f"{results[b]['learners_per_1gb_without_retention']:,}" for b in backends)
        + " |",
    ]
    return "\n".join(lines)


def plot(results: dict[str, dict[str, Any]], path: Path, report: Callable[[str], None]) -> None:
    """Stacked bars: KB per learner-month by table, before and after retention, per backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        report("matplotlib is not installed: no plot")
        return
    bars = [(f"{b}\nbefore", r["before"]) for b, r in results.items()]
    bars += [(f"{b}\nafter", r["after"]) for b, r in results.items()]
    bars.sort(key=lambda bar: list(results).index(bar[0].split("\n")[0]))
    largest = sorted(
        {t for _, sizes in bars for t in sizes},
        key=lambda t: -max(sizes.get(t, 0) for _, sizes in bars),
    )
    shown = [t for t in largest[:9] if max(s.get(t, 0) for _, s in bars) > 0]
    figure, axis = plt.subplots(figsize=(9, 5.5))
    bottoms = [0.0] * len(bars)
    colours = [plt.get_cmap("tab10")(n) for n in range(10)]
    for n, table in enumerate([*shown, "other"]):
        heights = [
            (
                sizes.get(table, 0)
                if table != "other"
                else sum(v for t, v in sizes.items() if t not in shown)
            )
            / 1000
            for _, sizes in bars
        ]
        heights = [max(h, 0.0) for h in heights]
        axis.bar(
            [name for name, _ in bars],
            heights,
            bottom=bottoms,
            label=table,
            color=colours[n % len(colours)],
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for x, total in enumerate(bottoms):
        axis.annotate(f"{total:,.0f} KB", (x, total), ha="center", va="bottom", fontsize=9)
    axis.set_ylim(0, max(bottoms) * 1.12)
    axis.set_ylabel("KB per learner-month (600 learner messages)")
    axis.set_title(
        f"Database growth per learner-month, before and after {RETENTION_DAYS}-day chat retention"
    )
    axis.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    report(f"wrote {path}")


def run(options: Options, report: Callable[[str], None] = log) -> dict[str, Any]:
    """The benchmark on each backend: the raw results, the figures and the tables."""
    raw = {b: run_backend(b, options, report) for b in options.backends}
    return write(raw, options.out, report)


def write(
    raw: dict[str, Any], out_dir: Path | None, report: Callable[[str], None]
) -> dict[str, Any]:
    """The figures and tables of the backends' `raw` results, reported and written to
    `out_dir` (storage.json, storage.png)."""
    results = {b: figures(r) for b, r in raw.items()}
    tables = markdown(results)
    report("")
    report(tables)
    for backend, result in raw.items():
        left = {t: n for t, n in result["forgotten_rows_left"].items() if n}
        report(f"{backend}: /forget after retention left {left or 'no row'} about the learner")
    out = {
        "runs": {
            b: {"learners": r["learners"], "messages": r["messages_per_learner"]}
            for b, r in raw.items()
        },
        "tables": [*TABLES, RECALL_FTS],
        "raw": raw,
        "results": results,
        "markdown": tables,
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "storage.json").write_text(json.dumps(out, indent=2) + "\n")
        report(f"wrote {out_dir / 'storage.json'}")
        plot(results, out_dir / "storage.png", report)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=Options.learners)
    parser.add_argument("--messages", type=int, default=Options.messages)
    parser.add_argument("--quick", action="store_true", help="12 learners × 120 messages")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="report the backends of earlier runs' storage.json files together (runs of one "
        "backend each, side by side), measuring nothing",
    )
    args = parser.parse_args(argv)
    if args.combine:
        raw = {}
        for path in args.combine:
            raw.update(json.loads(path.read_text())["raw"])
        write(dict(sorted(raw.items(), key=lambda item: BACKENDS.index(item[0]))), args.out, log)
        return 0
    backends = tuple(b for b in args.backends.split(",") if b)
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backend(s): {', '.join(sorted(unknown))}")
    if "postgres" in backends and (problem := postgres_problem(args.database_url)):
        print(problem, file=sys.stderr)
        return 2
    options = Options(
        learners=12 if args.quick else args.learners,
        messages=120 if args.quick else args.messages,
        backends=backends,
        database_url=args.database_url,
        out=args.out,
    )
    try:
        run(options)
    except NoDbstat as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
