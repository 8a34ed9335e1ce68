"""The latency benchmark at a real model's speed (`dev.py bench latency --realistic`): how many
turns one worker keeps in flight, and what Pam adds to the model's time, on Postgres.

    python3 dev.py bench latency --realistic            # the sweep, about 60 s a point
    python3 dev.py bench latency --realistic --quick    # two small points, a first look
    python3 dev.py bench latency --realistic --memory-process off   # jobs on the worker's threads

The fake model runs in a process of its own and answers every call after a lognormal delay
(median 1.5 s, 95th percentile 5 s, seeded: a mean of 1.96 s). Fake Telegram stamps each reply
as it arrives, then answers 50 ms later, as a real network would keep the sender waiting. Both
keep a client's connection open between calls, as OpenAI's API and api.telegram.org do. Each
point is a fresh schema with one web process (gunicorn, 1 × 4 threads) and 1 or 2 `pam worker`s
at their defaults (128 inbox lanes each), every process with PAM_DB_POOL_SIZE=2. Learners write
in closed loop: a message, its reply, 2–6 s of thinking, the next (200 learners offer about 33
messages a second, about 65 of them in flight).

Per point: replies per second (between the 10th and 90th percentile of arrivals), turns in
flight (the reply calls the model has in flight, time-weighted over the point and at most, and
the most inbox items claimed at once; beside them every model call in flight, the memory jobs'
summaries and profiles included), Pam's overhead (each reply's latency less the seconds its
model calls waited) at p50 and p95, database connections per process (pg_stat_activity by
application_name, sampled at 2 Hz; a worker's memory process counts with it), resident memory
per process (alone, and with its children: a worker's memory process, gunicorn's worker), CPU
milliseconds per reply per process (what a loaded machine does not inflate, unlike the
overhead), and where the time went: p50 and p95 of the web's accept, the wait in the inbox
before a lane claims, the turn, the send (Pam's log lines) and the model's time. Minute by
minute: the overhead's p50 and p95, and the CPU a reply of each process and of the Postgres
server (when it runs on this machine), to see whether a turn costs more as the learners'
histories grow. Written to bench/results/latency_realistic.json, and replies per second against
learners, one line per worker count, to latency_realistic.png.

Exit status 0 when the targets pass at the headline point (200 learners, 1 worker), 1 when
one fails, 2 when it cannot run."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from bench.latency_learners import (
    DEFAULT_DATABASE,
    WEBHOOK_SECRET,
    Learners,
    Service,
    commit,
    warn_without_autovacuum,
)
from bench.latency_report import (
    PhaseResult,
    log_breakdown,
    lognormal_sigma,
    percentile,
    plot_minutes,
    plot_scaling,
)
from bench.latency_servers import LLMProcess, StopwatchTelegram
from bench.memory import children as children_of
from bench.memory import resident, with_children
from loopback import telegram_server
from loopback.harness import (
    PAM_CMD,
    ROOT,
    Process,
    Processes,
    db_upgrade,
    free_port,
    gunicorn,
    healthy,
    postgres_problem,
    postgres_schema,
    service_env,
    wait_for,
)
from memory.database import db

SAMPLE_SECONDS = 0.5
WARM_UP = [f"L{n}" for n in range(9001, 9011)]  # learners whose messages are not counted
TELEGRAM_DELAY = 0.05
IN_FLIGHT_TARGET = 64
RATE_TARGET = 20.0  # replies a second
OVERHEAD_TARGET_MS = 100.0  # Pam's p95 over the model's time
CONNECTIONS = text(
    "SELECT application_name AS name, count(*) AS n FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name LIKE :prefix "
    "GROUP BY application_name"
)
CLAIMED = text("SELECT count(*) FROM inbox WHERE status = 'claimed'")
# Memory jobs run so far by kind, and the learner messages they learn from: how often a
# learner's chat is folded and their profile learned under load (PAM_PROFILE_EVERY says 5).
JOB_RUNS = text("SELECT kind, sum(runs) AS runs FROM memory_jobs GROUP BY kind")
LEARNER_MESSAGES = text("SELECT count(*) FROM messages WHERE role = 'learner'")
# Memory jobs asked for and not yet done (claimed, or asked again while running).
JOBS_WAITING = text("SELECT count(*) FROM memory_jobs WHERE running OR dirty")


def progress(message: str) -> None:
    print(f"[realistic {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass(frozen=True)
class Point:
    """One measurement: this many learners against this many workers."""

    learners: int
    workers: int
    think: tuple[float, float]

    @property
    def slug(self) -> str:
        pause = "no-think" if self.think[1] == 0 else "think"
        return f"{self.learners}-learners-{self.workers}-worker-{pause}"


@dataclass(frozen=True)
class Options:
    learners: tuple[int, ...] = (25, 50, 100, 200, 400)
    workers: tuple[int, ...] = (1, 2)
    seconds: float = 60.0  # of closed-loop traffic per point
    think: tuple[float, float] = (2.0, 6.0)
    saturation: bool = True  # also 400 learners with no thinking, 1 worker
    headline: tuple[int, int] = (200, 1)  # (learners, workers) the verdicts read
    p50: float = 1.5
    p95: float = 5.0
    seed: int = 7
    pool_size: int = 2
    # PAM_MEMORY_PROCESS for the workers: "on" (the default: memory jobs in a child process),
    # or "off" (on the worker's own threads: one process, about 65 MB less).
    memory_process: str = "on"
    memory_threads: int | None = None  # PAM_MEMORY_THREADS; None: Pam's default
    database_url: str = DEFAULT_DATABASE
    out: Path | None = ROOT / "bench" / "results"
    plot: bool = True

    def points(self) -> list[Point]:
        found = [Point(n, k, self.think) for k in self.workers for n in self.learners]
        if self.saturation:
            found.append(Point(max(self.learners), 1, (0.0, 0.0)))
        return found

    def model_mean(self) -> float:
        """The mean of the model's delay: exp(μ + σ²/2)."""
        return self.p50 * math.exp(lognormal_sigma(self.p50, self.p95) ** 2 / 2)

    def messages_each(self, point: Point) -> int:
        """Messages per learner for about `seconds` of traffic."""
        cycle = statistics.fmean(point.think) + self.model_mean()
        return max(3, round(self.seconds / cycle))


QUICK = Options(learners=(20, 60), workers=(1, 2), seconds=15.0, saturation=False, headline=(60, 1))


# -- what a point measured ---------------------------------------------------------------------


def overheads(phase: PhaseResult, waited: dict[str, float]) -> list[float]:
    """Seconds each answered message took beyond its model calls' own: its latency (POST to
    the reply's arrival) less the seconds the model waited on its reply calls."""
    return [
        phase.arrivals[marker][0] - sent - waited.get(marker, 0.0)
        for marker, sent in phase.sent.items()
        if phase.arrivals.get(marker)
    ]


@dataclass
class Samples:
    """What the sampler saw at 2 Hz: connections per application name, resident memory per
    role (the process with its children), claimed inbox items, the model's calls in flight
    (all, and the reply calls alone), and when each sample was taken (seconds into the
    point)."""

    connections: dict[str, list[int]] = field(default_factory=dict)
    rss_mb: dict[str, list[float]] = field(default_factory=dict)
    claimed: list[int] = field(default_factory=list)
    model_in_flight: list[int] = field(default_factory=list)
    replies_in_flight: list[int] = field(default_factory=list)
    jobs_waiting: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    # CPU seconds per role (with its children) so far, (seconds into the point, readings):
    # the first taken as the point starts, at `started_at` (time.time(), the phase's clock).
    cpu: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    started_at: float = 0.0

    def add(self, into: dict[str, list[Any]], key: str, value: Any) -> None:
        into.setdefault(key, []).append(value)

    def summary(self) -> dict[str, Any]:
        def most_and_mean(values: list[Any]) -> dict[str, float]:
            return {
                "max": max(values, default=0),
                "mean": round(statistics.fmean(values), 1) if values else 0.0,
            }

        return {
            "connections": {k: most_and_mean(v) for k, v in sorted(self.connections.items())},
            "rss_mb": {k: round(max(v, default=0.0), 1) for k, v in sorted(self.rss_mb.items())},
            "rss_mb_by_minute": {k: self.by_minute(v) for k, v in sorted(self.rss_mb.items())},
            "claimed": most_and_mean(self.claimed),
            "model_in_flight": most_and_mean(self.model_in_flight),
            "replies_in_flight": most_and_mean(self.replies_in_flight),
            "memory_jobs_waiting": most_and_mean(self.jobs_waiting),
        }

    def by_minute(self, values: list[float]) -> list[float | None]:
        """The most of `values` in each minute of the point, in order (None for a minute
        without a sample): how memory grew."""
        minutes: dict[int, float] = {}
        for at, value in zip(self.seconds, values, strict=True):
            minutes[int(at // 60)] = max(value, minutes.get(int(at // 60), 0.0))
        return [
            round(minutes[m], 1) if m in minutes else None
            for m in range(max(minutes, default=-1) + 1)
        ]


def tree_rss(pid: int, children: bool = True) -> float:
    """VmRSS of `pid`, and (unless not `children`) its children's private pages, MB: what
    the machine holds for them, the pages a forked child shares counted once (0 once it
    ended; see bench.memory.with_children)."""
    try:
        parent = resident(pid)
    except OSError:
        return 0.0
    kids = []
    for each in children_of(pid) if children else []:
        with suppress(OSError):  # it ended while we looked
            kids.append(resident(each))
    return with_children(parent, kids)["rss_mb"]


def postmaster(monitor: Engine) -> int | None:
    """The Postgres server's main process, when it runs on this machine (None if not): the
    parent of the monitor connection's server process."""
    with monitor.connect() as connection:
        backend = int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
    try:
        parent = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        name = Path(f"/proc/{parent}/comm").read_text().strip()
    except (OSError, ValueError, IndexError):
        return None
    # In a container or on another host, that pid here is some other process.
    return parent if name.startswith("postgres") else None


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) `pid` and its children have used so far: its own, its
    living children's, and those of the children it has waited for once they ended (without
    them the sum fell whenever one ended, as Postgres's autovacuum workers do)."""
    ticks = 0  # summed whole and divided once: a child's ticks count the same alive or ended
    for each in [pid, *children_of(pid)]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        if each == pid:
            ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: ended children
    return ticks / os.sysconf("SC_CLK_TCK")


class Sampler:
    """A thread sampling the running service every SAMPLE_SECONDS until stopped."""

    def __init__(self, monitor: Engine, pids: dict[str, int], llm: LLMProcess, prefix: str):
        self.monitor, self.pids, self.llm, self.prefix = monitor, pids, llm, prefix
        self.samples = Samples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._started = time.monotonic()
        self.database_pid = postmaster(monitor)

    def __enter__(self) -> Samples:
        self._started = time.monotonic()
        self.samples.started_at = time.time()
        self.sample_cpu()
        self._thread.start()
        return self.samples

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                self.sample()
            except Exception as exc:  # a sample missed is no reason to stop the run
                progress(f"sample missed: {type(exc).__name__}: {exc}")

    def sample(self) -> None:
        with self.monitor.connect() as connection:
            rows = connection.execute(CONNECTIONS, {"prefix": f"{self.prefix}%"}).all()
            found: dict[str, int] = {str(row.name): int(row.n) for row in rows}
            claimed = int(connection.execute(CLAIMED).scalar() or 0)
            waiting = int(connection.execute(JOBS_WAITING).scalar() or 0)
        for role in self.pids:
            self.samples.add(self.samples.connections, role, found.get(f"{self.prefix}{role}", 0))
            pid = self.pids[role]
            self.samples.add(self.samples.rss_mb, role, tree_rss(pid, children=False))
            self.samples.add(self.samples.rss_mb, f"{role}+children", tree_rss(pid))
        self.samples.claimed.append(claimed)
        self.samples.jobs_waiting.append(waiting)
        calls, replies = self.llm.in_flight()
        self.samples.model_in_flight.append(calls)
        self.samples.replies_in_flight.append(replies)
        self.samples.seconds.append(time.monotonic() - self._started)
        self.sample_cpu()

    def sample_cpu(self) -> None:
        readings = {role: tree_cpu(pid) for role, pid in self.pids.items()}
        if self.database_pid is not None:  # every server process: what the queries cost
            readings["postgres"] = tree_cpu(self.database_pid)
        self.samples.cpu.append((time.monotonic() - self._started, readings))


def job_counts(monitor: Engine) -> dict[str, int]:
    """Memory job runs so far by kind, and "learner_messages": the learners' messages."""
    with monitor.connect() as connection:
        counts = {str(r.kind): int(r.runs or 0) for r in connection.execute(JOB_RUNS)}
        counts["learner_messages"] = int(connection.execute(LEARNER_MESSAGES).scalar() or 0)
    return counts


def job_cadence(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """The memory jobs run during a point, by kind, and how many learner messages each fold
    and profile run stood for (the profile's is PAM_PROFILE_EVERY when the jobs keep up)."""
    runs = {k: after[k] - before.get(k, 0) for k in sorted(after) if k != "learner_messages"}
    messages = after.get("learner_messages", 0) - before.get("learner_messages", 0)
    return {
        "runs": runs,
        "learner_messages": messages,
        "messages_per_run": {
            kind: round(messages / runs[kind], 1) if runs.get(kind) else None
            for kind in ("fold", "profile")
        },
    }


def minute_by_minute(
    phase: PhaseResult, waited: dict[str, float], samples: Samples
) -> dict[str, Any]:
    """Pam's overhead at p50 and p95 for the messages sent in each minute of the point, and
    each process's CPU milliseconds a reply in each minute (its CPU seconds that minute over
    the replies that arrived in it; "postgres", every process of a server on this machine):
    whether a turn costs more as the learners' histories grow. None for a minute without
    messages, replies or a CPU reading, and for the minute after one without a reading."""
    # The sampler's start; without one (a point put together by hand), the first message's.
    origin = samples.started_at or min(phase.sent.values(), default=0.0)

    def minute_of(at: float) -> int:
        return int((at - origin) // 60)

    overhead: dict[int, list[float]] = {}
    for marker, sent in phase.sent.items():
        if phase.arrivals.get(marker):
            over = phase.arrivals[marker][0] - sent - waited.get(marker, 0.0)
            overhead.setdefault(minute_of(sent), []).append(1000 * over)
    replies = Counter(minute_of(got[0]) for got in phase.arrivals.values() if got)
    minutes = range(max([*overhead, *replies], default=-1) + 1)
    cpu: dict[str, list[float | None]] = {}
    if samples.cpu:
        at_start = samples.cpu[0][1]
        for role in sorted(at_start):
            last: dict[int, float] = {}  # the minute's last reading
            for at, readings in samples.cpu:
                last[int(at // 60)] = readings[role]
            previous: float | None = at_start[role]  # None after a minute without a reading
            values: list[float | None] = []
            for minute in minutes:
                reading = last.get(minute)
                if reading is None or previous is None or not replies.get(minute):
                    values.append(None)
                else:
                    values.append(round(1000 * (reading - previous) / replies[minute], 1))
                previous = reading
            cpu[role] = values
    return {
        "overhead_ms_by_minute": [
            {
                "p50": round(percentile(overhead[m], 0.50), 1),
                "p95": round(percentile(overhead[m], 0.95), 1),
            }
            if overhead.get(m)
            else None
            for m in minutes
        ],
        "cpu_ms_per_reply_by_minute": cpu,
        "replies_by_minute": [replies.get(m, 0) for m in minutes],
    }


def point_result(
    point: Point,
    phase: PhaseResult,
    before: dict[str, Any],
    after: dict[str, Any],
    samples: Samples,
    cpu_seconds: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A point's figures, from its phase, the model's stats before and after, samples, and
    the CPU seconds each process (with its children) used during the phase."""
    answered = max(1, phase.counts()["answered_once"])
    cpu_ms = {role: round(1000 * v / answered, 1) for role, v in (cpu_seconds or {}).items()}
    waited = after.get("waited", {})
    over_ms = [1000 * v for v in overheads(phase, waited)]
    model_ms = [1000 * waited.get(marker, 0.0) for marker in phase.sent]
    seconds = phase.seconds()

    def mean_in_flight(key: str) -> float:
        busy = float(after[key]) - float(before[key])
        return round(busy / seconds, 1) if seconds > 0 else 0.0

    return {
        "learners": point.learners,
        "workers": point.workers,
        "think_seconds": list(point.think),
        **phase.counts(),
        "replies_per_second": round(phase.sustained_rate(), 1),
        "latency_ms": {k: v for k, v in phase.stats().items() if k.endswith("_ms")},
        "overhead_ms": {
            "p50": round(percentile(over_ms, 0.50), 1),
            "p95": round(percentile(over_ms, 0.95), 1),
            "p99": round(percentile(over_ms, 0.99), 1),
        },
        # The model's own seconds per message, beside the stages of Pam's log lines.
        "model_ms": {
            "p50": round(percentile(model_ms, 0.50), 1),
            "p95": round(percentile(model_ms, 0.95), 1),
        },
        # A turn is in flight from its claim to its finish: its reply call is most of that.
        "turns_in_flight": {
            "mean": mean_in_flight("replies_busy_seconds"),
            "max": int(after["most_replies_in_flight"]),
            "claimed_max": max(samples.claimed, default=0),
        },
        # Every model call, the memory jobs' summaries and profiles too.
        "model_calls_in_flight": {
            "mean": mean_in_flight("busy_seconds"),
            "max": int(after["most_in_flight"]),
        },
        **samples.summary(),
        # CPU per reply: what a loaded machine does not inflate, unlike the overhead.
        "cpu_ms_per_reply": cpu_ms,
        **minute_by_minute(phase, waited, samples),
        "wall_seconds": round(seconds, 1),
    }


def verdicts(
    headline: dict[str, Any] | None, points: list[dict[str, Any]], pool: int
) -> dict[str, str]:
    """The issue's targets: at the headline point ≥ 20 replies/s, overhead p95 < 100 ms, every
    message answered once; ≥ 64 turns in flight at some point on one worker; no process over
    2 × pool + 1 connections (a worker with its memory process: twice that, + 1)."""
    if headline is None:
        return {"headline": "n/a"}
    one_worker = [p for p in points if p["workers"] == 1]
    in_flight = max((p["turns_in_flight"]["claimed_max"] for p in one_worker), default=0)
    limits = {"web": 2 * pool, "worker": 4 * pool + 1}
    over = [
        f"{role}={figures['max']}"
        for p in points
        for role, figures in p["connections"].items()
        if figures["max"] > limits["web" if role == "web" else "worker"]
    ]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    return {
        "replies_per_second": verdict(headline["replies_per_second"] >= RATE_TARGET),
        "overhead_p95": verdict(headline["overhead_ms"]["p95"] < OVERHEAD_TARGET_MS),
        "answered_once": verdict(headline["answered_once"] == headline["sent"]),
        "turns_in_flight": verdict(in_flight >= IN_FLIGHT_TARGET),
        "connections": verdict(not over) + (f" ({', '.join(over)})" if over else ""),
    }


# -- the service -------------------------------------------------------------------------------


def named(url: str, name: str) -> str:
    """`url` with its connections named `name` in pg_stat_activity."""
    return (
        make_url(url)
        .update_query_dict({"application_name": name})
        .render_as_string(hide_password=False)
    )


def knobs(
    llm: LLMProcess,
    tg: StopwatchTelegram,
    pool: int,
    memory_process: str,
    memory_threads: int | None = None,
) -> dict[str, str]:
    """Pam at its defaults (lanes, memory jobs), the fakes, and the pool the issue sets."""
    threads = {"PAM_MEMORY_THREADS": str(memory_threads)} if memory_threads else {}
    return {
        **threads,
        "PAM_MEMORY_PROCESS": memory_process,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "latency-bench",
        "TELEGRAM_BOT_TOKEN": telegram_server.TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "TELEGRAM_API_URL": tg.base_url,
        "PAM_RATE_LIMIT_PER_MINUTE": "0",  # these learners type faster than people do
        # and more in a day: in a 30-minute run each writes 300 messages, and its 200,000
        # tokens a day ran out after about 150 (every reply after was the limit's notice)
        "PAM_LEARNER_DAILY_TOKENS": "0",
        "PAM_DB_POOL_SIZE": str(pool),
        "PAM_SHUTDOWN_WAIT_SECONDS": "2",
        "PAM_LOG_LEVEL": "INFO",
    }


@contextmanager
def serving(
    point: Point,
    llm: LLMProcess,
    tg: StopwatchTelegram,
    folder: Path,
    options: Options,
    prefix: str,
) -> Iterator[Service]:
    """One web and `point.workers` workers on a fresh schema, up and healthy; killed after."""
    port = free_port()
    group = Processes(folder, who="latency-realistic")
    service = Service(f"http://127.0.0.1:{port}", group)
    with ExitStack() as stack:
        stack.callback(group.close)
        url = stack.enter_context(postgres_schema(options.database_url, prefix="pam_realistic"))
        service.database_url = url
        pam = knobs(llm, tg, options.pool_size, options.memory_process, options.memory_threads)
        db_upgrade(service_env(url, **pam), folder)
        web_env = service_env(named(url, f"{prefix}web"), **pam)
        web = group.start(f"{point.slug}-web", gunicorn(port, workers=1, threads=4), web_env)
        service.pids["web"] = web.popen.pid
        service.logs["web"] = web.log
        for n in range(1, point.workers + 1):
            role = f"worker-{n}"
            env = service_env(named(url, f"{prefix}{role}"), **pam)
            worker = group.start(f"{point.slug}-{role}", [*PAM_CMD, "worker"], env)
            service.pids[role] = worker.popen.pid
            service.logs[role] = worker.log
            wait_for(partial(_started, worker), 90, f"{role} to start", poll=0.2)

        def ready() -> bool:
            group.assert_alive()
            return healthy(service.base)

        wait_for(ready, 60, f"{service.base}/healthz", poll=0.1)
        try:
            yield service
        except BaseException:
            print(group.tails(), flush=True)
            raise


def _started(worker: Process) -> bool:
    return "worker started" in worker.tail(200)


def measure(point: Point, options: Options, folder: Path) -> dict[str, Any]:
    """Run one point from a fresh start and return its figures."""
    prefix = f"pam-bench-{os.getpid()}-"
    llm = LLMProcess(options.p50, options.p95, options.seed)
    with ExitStack() as stack:
        stack.enter_context(llm)
        tg = stack.enter_context(StopwatchTelegram(delay=TELEGRAM_DELAY, keep_alive=True))
        service = stack.enter_context(serving(point, llm, tg, folder, options, prefix))
        assert service.database_url is not None
        monitor = db.make_engine(named(service.database_url, "pam-bench-monitor"), pool_size=1)
        stack.callback(monitor.dispose)
        learners = Learners(service.base, tg, options.seed)
        # Not counted: the first turns pay for the processes' warm-up (imports, connections,
        # the first chart's fonts loading beside them).
        learners.drive(WARM_UP, 3 * len(WARM_UP), (0.0, 0.5), f"{point.slug} warm-up")
        time.sleep(2.0)
        keys = [f"L{n:03d}" for n in range(1, point.learners + 1)]
        total = point.learners * options.messages_each(point)
        before = llm.stats()
        jobs_before = job_counts(monitor)
        cpu = {role: tree_cpu(pid) for role, pid in service.pids.items()}
        with Sampler(monitor, service.pids, llm, prefix) as samples:
            phase = learners.drive(keys, total, point.think, point.slug)
        cpu = {role: tree_cpu(pid) - cpu[role] for role, pid in service.pids.items()}
        after = llm.stats()
        jobs = job_cadence(jobs_before, job_counts(monitor))
        stages = log_breakdown(service.logs, phase.windows)
    found = point_result(point, phase, before, after, samples, cpu)
    found["stages_ms"] = stages
    found["memory_jobs"] = jobs
    progress(
        f"{point.slug}: memory jobs {jobs['runs']}, learner messages per fold and profile "
        f"{jobs['messages_per_run']}"
    )
    progress(
        f"{point.slug}: where the time went (ms, p50/p95): "
        + ", ".join(f"{k} {v['p50']:.0f}/{v['p95']:.0f}" for k, v in stages.items())
        + f", model {found['model_ms']['p50']:.0f}/{found['model_ms']['p95']:.0f}"
    )
    progress(
        f"{point.slug}: overhead p95 ms by minute "
        + " ".join("-" if m is None else f"{m['p95']:.0f}" for m in found["overhead_ms_by_minute"])
        + "; CPU ms a reply by minute "
        + "; ".join(
            f"{role} " + " ".join("-" if v is None else f"{v:.1f}" for v in values)
            for role, values in found["cpu_ms_per_reply_by_minute"].items()
        )
    )
    progress(
        f"{point.slug}: {found['replies_per_second']} replies/s, "
        f"{found['turns_in_flight']['mean']} turns in flight, overhead p50 "
        f"{found['overhead_ms']['p50']} ms p95 {found['overhead_ms']['p95']} ms, "
        f"{found['answered_once']}/{found['sent']} answered once"
    )
    return found


def run(options: Options, report: Callable[[str], None] = progress) -> dict[str, Any]:
    """Every point, one after the other; the results, also written to `options.out`."""
    measured = commit()  # the code that runs, not what was committed while it ran
    vacuumed = warn_without_autovacuum(options.database_url, report)
    with tempfile.TemporaryDirectory(prefix="latency-realistic-") as logs:
        folder = Path(logs)
        points = []
        for point in options.points():
            report(f"{point.slug}: starting")
            points.append(measure(point, options, folder))
    learners, workers = options.headline
    headline = next(
        (
            p
            for p in points
            if p["learners"] == learners and p["workers"] == workers and p["think_seconds"][1]
        ),
        None,
    )
    model = {
        "p50_s": options.p50,
        "p95_s": options.p95,
        "mean_s": round(options.model_mean(), 2),
        "seed": options.seed,
    }
    found = {
        "options": {k: str(v) for k, v in asdict(options).items()},
        "model": model,
        "points": points,
        "headline": headline,
        "verdicts": verdicts(headline, points, options.pool_size),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "python": platform.python_version(),
            "postgres_autovacuum": vacuumed,
        },
        "commit": measured,
    }
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        path = options.out / "latency_realistic.json"
        path.write_text(json.dumps(found, indent=1) + "\n")
        report(f"results written to {path}")
        if options.plot:
            plot_scaling(points, model, options.out / "latency_realistic.png", report)
            if headline is not None:
                plot_minutes(headline, model, options.out / "latency_realistic_minutes.png", report)
    return found


def table(points: list[dict[str, Any]]) -> str:
    """The points as the docs show them."""
    rows = [
        "| learners | workers | think s | replies/s | turns in flight (mean / max claimed) "
        "| overhead p50 / p95 ms | CPU ms per reply | connections max | RSS MB max "
        "| answered once |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        flight = p["turns_in_flight"]
        connections = ", ".join(f"{k} {v['max']}" for k, v in p["connections"].items())
        rss = ", ".join(f"{k} {v:.0f}" for k, v in p["rss_mb"].items())
        cpu = ", ".join(f"{k} {v:.1f}" for k, v in p["cpu_ms_per_reply"].items())
        think = "–".join(f"{v:g}" for v in p["think_seconds"])
        rows.append(
            f"| {p['learners']} | {p['workers']} | {think} | {p['replies_per_second']} "
            f"| {flight['mean']} / {flight['claimed_max']} "
            f"| {p['overhead_ms']['p50']:.0f} / {p['overhead_ms']['p95']:.0f} | {cpu} "
            f"| {connections} | {rss} | {p['answered_once']}/{p['sent']} |"
        )
    return "\n".join(rows)


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(
        prog="bench.latency --realistic", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="two small points, 15 s each")
    parser.add_argument("--learners", help="comma-separated learner counts to sweep")
    parser.add_argument("--workers", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--seconds", type=float, help="traffic per point (default 60)")
    parser.add_argument("--no-saturation", action="store_true")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--out", type=Path, default=Options.out)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--memory-process",
        choices=("on", "off"),
        default="on",
        help="off: memory jobs on the worker's threads, one process",
    )
    parser.add_argument(
        "--memory-threads", type=int, help="PAM_MEMORY_THREADS (default: Pam's, 32 on Postgres)"
    )
    args = parser.parse_args(argv)
    options = QUICK if args.quick else Options()
    try:
        if args.learners:
            options = replace(options, learners=tuple(int(v) for v in args.learners.split(",")))
        if args.workers:
            options = replace(options, workers=tuple(int(v) for v in args.workers.split(",")))
    except ValueError:
        parser.error("--learners and --workers take comma-separated whole numbers")
    if args.seconds:
        options = replace(options, seconds=args.seconds)
    if args.no_saturation:
        options = replace(options, saturation=False)
    return replace(
        options,
        database_url=args.database_url,
        out=args.out,
        plot=not args.no_plot,
        memory_process=args.memory_process,
        memory_threads=args.memory_threads,
    )


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    problem = postgres_problem(options.database_url)
    if problem:
        print(f"bench.latency --realistic: {problem}", file=sys.stderr)
        return 2
    found = run(options)
    print()
    print(table(found["points"]))
    print(f"\ntargets: {found['verdicts']}")
    return 0 if all(v == "PASS" for v in found["verdicts"].values()) else 1
