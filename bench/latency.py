"""The latency benchmark: webhook-to-reply latency and sustained throughput of one web + one
worker, against a zero-latency fake LLM and a fake Telegram on 127.0.0.1, on SQLite
(`pam serve`: waitress and the worker in one process) and on Postgres (gunicorn, 1 process
× 4 threads, + `pam worker`), each with memory jobs off and on, next to the floor: the same
HTTP hops with no Pam logic (bench/latency_floor.py under the same HTTP server).

    python3 dev.py bench latency                       # 1,000 messages per configuration
    python3 dev.py bench latency --quick               # 200 messages, a first look
    python3 dev.py bench latency --rounds 10           # finer interleaving (default 5)
    python3 dev.py bench latency --backends postgres --profile   # py-spy on web and worker
    python3 dev.py bench latency --realistic           # a real model's latency: see
                                                       # bench/latency_realistic.py

Per backend, the floor and Pam with memory jobs off and on run side by side, each with its
own fake LLM, fake Telegram and database, and are measured interleaved: this machine's speed
drifts over minutes, and the targets are ratios between configurations, so each ratio
compares numbers taken in the same minutes. After a warm-up of each (20 messages, not
counted), the latency phase runs in rounds (5 by default): in each round every configuration
gets its share of the messages as one block, one configuration at a time, and the order
rotates from round to round (round r starts with configuration r mod 3), so each is measured
early, in the middle and late. Before each block every Pam service is left to finish its
work (no unfinished inbox or outbox item, no memory job asked for or running) and then
0.5 s more, so a block never pays for the one before it.

In a block, 50 learners write in closed loop: each sends a message, waits for its reply at
the fake Telegram, thinks 2–4 s, and sends the next (about 15 messages/s offered: half of
what one web + one worker sustain, so the latency is Pam's, not a queue's). A learner keeps
its identity and its conversation from block to block. Latency is from just before the
webhook POST to the fake Telegram receiving the sendMessage that echoes the message's marker.
Throughput phase, one configuration at a time while the others idle: fresh learners with no
think time (every learner always has a message in flight), replies per second between the
10th and 90th percentile of arrivals.

Exit status 0 when both targets pass, 1 when one fails, 2 when it cannot run."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import event, func, or_, select, text

from bench.latency_learners import (
    DEFAULT_DATABASE,
    WEBHOOK_SECRET,
    Learners,
    Service,
    commit,
    progress,
    shares,
)
from bench.latency_realistic import tree_cpu
from bench.latency_report import (
    ConfigResult,
    log_breakdown,
    plot,
    profile_summary,
    table,
    verdicts,
)
from bench.latency_servers import LLMProcess, StopwatchTelegram
from loopback import telegram_server
from loopback.harness import (
    BIN,
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
    sqlite_url,
    wait_for,
)
from memory.database import db
from memory.database.claims import UNFINISHED
from memory.database.models import MemoryJob
from memory.database.models_queue import InboxItem, OutboxItem

BACKENDS = ("sqlite", "postgres")
JOBS_OFF = {"PAM_SUMMARY_TRIGGER_TOKENS": "100000000", "PAM_PROFILE_EVERY": "100000000"}
JOBS_ON = {"PAM_SUMMARY_TRIGGER_TOKENS": "400", "PAM_PROFILE_EVERY": "5"}
QUIET_TIMEOUT = 60.0  # seconds to wait for Pam to finish its work before a block
QUIET_PAUSE = 0.5  # and then this long, so the last replies' after-work settles too
STATS_DELAY = 1.0  # backends report their table counters within a second
WARM_UP = [f"L{n:03d}" for n in range(901, 905)]


@dataclass(frozen=True)
class Options:
    messages: int = 1000
    learners: int = 50
    rounds: int = 5  # the latency phase's blocks per configuration, interleaved
    throughput_messages: int = 1000
    think: tuple[float, float] = (2.0, 4.0)  # seconds a learner waits after each reply
    backends: tuple[str, ...] = BACKENDS
    database_url: str = DEFAULT_DATABASE
    out: Path | None = ROOT / "bench" / "results"
    plot: bool = True
    profile: bool = False
    seed: int = 7
    keep_logs: bool = False


@dataclass(frozen=True)
class Config:
    """One row of the table: the floor or Pam, on one backend's process shape."""

    backend: str  # "sqlite" or "postgres"
    pam: bool  # False: the floor
    jobs: bool = False

    @property
    def name(self) -> str:
        if not self.pam:
            server = "waitress" if self.backend == "sqlite" else "gunicorn"
            return f"floor ({server}, no Pam)"
        shape = "SQLite, pam serve" if self.backend == "sqlite" else "Postgres, web + worker"
        return f"{shape}, memory jobs {'on' if self.jobs else 'off'}"

    @property
    def slug(self) -> str:
        return f"{self.backend}-{'pam' if self.pam else 'floor'}" + (
            f"-jobs-{'on' if self.jobs else 'off'}" if self.pam else ""
        )


def configurations(backends: tuple[str, ...]) -> list[Config]:
    return [
        config
        for backend in backends
        for config in (
            Config(backend, pam=False),
            Config(backend, pam=True, jobs=False),
            Config(backend, pam=True, jobs=True),
        )
    ]


# -- the service under test ------------------------------------------------------------------


def pam_knobs(llm: LLMProcess, tg: StopwatchTelegram, jobs: bool) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "latency-bench",
        "TELEGRAM_BOT_TOKEN": telegram_server.TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "TELEGRAM_API_URL": tg.base_url,
        "PAM_RATE_LIMIT_PER_MINUTE": "0",  # these learners type faster than people do
        "PAM_MAX_QUEUED_PER_ADDRESS": "0",  # and queue more than people do during outages
        # and write more in a day: at a 3,700-token prompt a learner's 200,000 tokens last
        # about 54 messages, and every reply after is the limit's notice (a trace of 1,500
        # messages over 5 learners waited for replies that never came)
        "PAM_LEARNER_DAILY_TOKENS": "0",
        "PAM_SHUTDOWN_WAIT_SECONDS": "2",
        "PAM_LOG_LEVEL": "INFO",
        **(JOBS_ON if jobs else JOBS_OFF),
    }


def _worker_started(process: Process) -> bool:
    return "worker started" in process.tail(200)


@contextmanager
def running(
    config: Config, llm: LLMProcess, tg: StopwatchTelegram, folder: Path, options: Options
) -> Iterator[Service]:
    """The configuration's processes, up and healthy; killed afterwards."""
    port = free_port()
    group = Processes(folder, who="latency")
    service = Service(f"http://127.0.0.1:{port}", group)
    with ExitStack() as stack:
        stack.callback(group.close)
        if not config.pam:
            env = service_env(
                "sqlite://",
                FLOOR_LLM_URL=llm.base_url,
                FLOOR_TELEGRAM_URL=f"{tg.base_url}{telegram_server.TOKEN}",
                FLOOR_SECRET=WEBHOOK_SECRET,
                FLOOR_THREADS="4",
            )
            if config.backend == "sqlite":
                argv = [
                    str(BIN / "waitress-serve"),
                    "--host=127.0.0.1",
                    f"--port={port}",
                    "--threads=8",
                    "--call",
                    "bench.latency_floor:create_app",
                ]
            else:
                argv = [
                    *gunicorn(port, workers=1, threads=4)[:-1],
                    "bench.latency_floor:create_app()",
                ]
            web = group.start(f"{config.slug}-web", argv, env)
            service.logs["web"] = web.log
            service.pids["web"] = web.popen.pid
        elif config.backend == "sqlite":
            service.database_url = sqlite_url(folder)
            env = service_env(
                service.database_url, PORT=str(port), **pam_knobs(llm, tg, config.jobs)
            )
            serve = group.start(
                f"{config.slug}-serve", [*PAM_CMD, "serve", "--host", "127.0.0.1"], env
            )
            service.logs["web"] = service.logs["worker"] = serve.log
            service.pids["serve"] = serve.popen.pid
            wait_for(lambda: _worker_started(serve), 60, "pam serve to start its worker", poll=0.1)
        else:
            url = stack.enter_context(postgres_schema(options.database_url, prefix="pam_latency"))
            env = service_env(url, **pam_knobs(llm, tg, config.jobs))
            service.database_url = url
            db_upgrade(env, folder)
            web = group.start(f"{config.slug}-web", gunicorn(port, workers=1, threads=4), env)
            worker = group.start(f"{config.slug}-worker", [*PAM_CMD, "worker"], env)
            service.logs = {"web": web.log, "worker": worker.log}
            service.pids = {"web": web.popen.pid, "worker": worker.popen.pid}
            wait_for(lambda: _worker_started(worker), 60, "pam worker to start", poll=0.1)

        def ready() -> bool:
            group.assert_alive()
            return healthy(service.base)

        wait_for(ready, 60, f"{service.base}/healthz", poll=0.1)
        try:
            yield service
        except BaseException:
            print(group.tails(), flush=True)
            raise


@contextmanager
def profiled(service: Service, folder: Path, slug: str) -> Iterator[dict[str, Path]]:
    """py-spy sampling every process of the service at 100 Hz without pausing it, twice:
    "busy" samples every thread that is not idle (Python work and waits inside C calls such
    as psycopg's wait for Postgres), "gil" only the thread holding the GIL (CPU in Python).
    Yields where each raw profile will be once the block ends."""
    spy = shutil.which("py-spy") or str(BIN / "py-spy")
    outputs: dict[str, Path] = {}
    spies: list[subprocess.Popen[bytes]] = []
    for role, pid in service.pids.items():
        for mode in ("busy", "gil"):
            key = f"{role} {mode}"
            outputs[key] = folder / f"latency_profile_{slug}_{role}_{mode}.txt"
            argv = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "100"]
            argv += ["--nonblocking", "--subprocesses", "-o", str(outputs[key])]
            argv += ["--gil"] if mode == "gil" else []
            log = (folder / f"py-spy-{role}-{mode}.log").open("wb")
            spies.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    time.sleep(1.0)  # py-spy attaches
    try:
        yield outputs
    finally:
        for spy_process in spies:
            spy_process.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for spy_process in spies:
            try:
                spy_process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                spy_process.kill()


TABLE_STATS = text(
    "SELECT relname, seq_scan, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_del "
    "FROM pg_stat_user_tables WHERE schemaname = current_schema()"
)


def table_stats(url: str | None) -> dict[str, list[int]]:
    """Postgres's per-table counters in the configuration's schema: seq scans, index scans,
    rows inserted, updated, deleted. There is no count of transactions: Postgres keeps it per
    database only, and the configurations that run side by side share the database, so it
    would count the other Pam configuration's transactions too."""
    if url is None or not url.startswith("postgresql"):
        return {}
    engine = db.make_engine(url)
    try:
        with engine.connect() as connection:
            return {row[0]: [int(v) for v in row[1:]] for row in connection.execute(TABLE_STATS)}
    finally:
        engine.dispose()


def per_message(
    before: dict[str, list[int]], after: dict[str, list[int]], messages: int
) -> dict[str, dict[str, float]]:
    """What each message cost each table, from two table_stats snapshots."""
    names = ("seq_scans", "index_scans", "inserted", "updated", "deleted")
    found = {}
    for relation, values in sorted(after.items()):
        start = before.get(relation, [0] * len(values))
        found[relation] = {
            name: round((v - b) / max(1, messages), 2)
            for name, v, b in zip(names, values, start, strict=True)
        }
    return found


# -- waiting until Pam has finished its work -------------------------------------------------

UNFINISHED_WORK = {
    "inbox": select(func.count()).where(InboxItem.status.in_(UNFINISHED)),
    "outbox": select(func.count()).where(OutboxItem.status.in_(UNFINISHED)),
    "memory jobs": select(func.count()).where(
        or_(MemoryJob.dirty.is_(True), MemoryJob.running.is_(True))
    ),
}


def _uncounted(dbapi_connection: Any, _record: Any) -> None:
    """Keep the quiet checks' own reads out of pg_stat_user_tables, whose counters become the
    per-message table statistics (only a superuser may; otherwise say that they count)."""
    try:
        dbapi_connection.execute("SET track_counts TO off")
        dbapi_connection.commit()
    except psycopg.Error as exc:
        dbapi_connection.rollback()
        progress(f"the quiet checks' reads count in the table statistics ({exc})")


class Backlog:
    """A Pam service's unfinished work, read from its database: inbox and outbox items not yet
    done or sent, memory jobs asked for or running."""

    def __init__(self, url: str) -> None:
        self.engine = db.make_engine(url, pool_size=1, max_overflow=0)
        if self.engine.dialect.name == "postgresql":
            event.listen(self.engine, "connect", _uncounted)

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as connection:
            return {
                what: int(connection.execute(query).scalar_one())
                for what, query in UNFINISHED_WORK.items()
            }

    def close(self) -> None:
        self.engine.dispose()


# -- one backend's three configurations, side by side ----------------------------------------


@dataclass
class Rig:
    """One configuration with everything of its own: fake LLM and Telegram (so its counts are
    its own), service, learners (who keep their numbering from block to block), its result so
    far, and for Pam its backlog."""

    config: Config
    folder: Path
    llm: LLMProcess
    tg: StopwatchTelegram
    service: Service
    learners: Learners
    result: ConfigResult
    backlog: Backlog | None


@contextmanager
def rigged(config: Config, options: Options, folder: Path) -> Iterator[Rig]:
    """The configuration up and healthy in its own folder (its logs, its SQLite file)."""
    folder.mkdir(parents=True)
    result = ConfigResult(name=config.name, slug=config.slug, backend=config.backend)
    result.pam, result.jobs = config.pam, config.jobs
    with (
        LLMProcess() as llm,
        StopwatchTelegram() as tg,
        running(config, llm, tg, folder, options) as service,
        ExitStack() as stack,
    ):
        backlog = None
        if config.pam and service.database_url is not None:
            backlog = Backlog(service.database_url)
            stack.callback(backlog.close)
        learners = Learners(service.base, tg, options.seed)
        yield Rig(config, folder, llm, tg, service, learners, result, backlog)


def wait_quiet(rigs: list[Rig]) -> None:
    """Wait until no Pam service has work left (at most QUIET_TIMEOUT, then go on and say
    so), then QUIET_PAUSE more: a block must not pay for the work of the one before."""
    started = time.monotonic()
    next_report = 5.0
    while busy := _busy(rigs):
        waited = time.monotonic() - started
        if waited > QUIET_TIMEOUT:
            progress(f"Pam still busy after {waited:.0f} s, going on anyway: {busy}")
            break
        if waited >= next_report:
            next_report += 5.0
            progress(f"waiting {waited:.0f} s for Pam to finish its work: {busy}")
        time.sleep(0.1)
    if not busy:
        progress(f"Pam quiet after {time.monotonic() - started:.1f} s")
    time.sleep(QUIET_PAUSE)


def _busy(rigs: list[Rig]) -> str:
    """The unfinished work of each Pam service that has some, e.g. "sqlite-pam-jobs-on:
    memory jobs 3"; empty when all are quiet."""
    found = []
    for rig in rigs:
        counts = rig.backlog.counts() if rig.backlog is not None else {}
        work = ", ".join(f"{what} {n}" for what, n in counts.items() if n)
        if work:
            found.append(f"{rig.config.slug}: {work}")
    return "; ".join(found)


def latency_phase(rigs: list[Rig], options: Options) -> None:
    """Every configuration's latency messages in `options.rounds` rounds of one block each,
    in an order that rotates per round; Postgres's table counters over the whole phase."""
    learners = [f"L{n:03d}" for n in range(1, options.learners + 1)]
    wait_quiet(rigs)
    time.sleep(STATS_DELAY)
    before = {rig.config.slug: table_stats(rig.service.database_url) for rig in rigs}
    with ExitStack() as stack:
        profiles = {
            rig.config.slug: stack.enter_context(profiled(rig.service, rig.folder, rig.config.slug))
            for rig in rigs
            if options.profile and rig.config.pam
        }
        for number, count in enumerate(shares(options.messages, options.rounds)):
            label = f"round {number + 1}/{options.rounds}"
            for rig in rigs[number % len(rigs) :] + rigs[: number % len(rigs)]:
                wait_quiet(rigs)
                progress(f"{label}: {rig.config.slug} {count} messages")
                pids = rig.service.pids
                cpu = {role: tree_cpu(pid) for role, pid in pids.items()}
                block = rig.learners.drive(
                    learners, count, options.think, f"{label}: {rig.config.slug}"
                )
                wait_quiet([rig])  # the block's own after-work (memory jobs) counts too
                for role, pid in pids.items():
                    used = tree_cpu(pid) - cpu[role]
                    rig.result.cpu_seconds[role] = rig.result.cpu_seconds.get(role, 0.0) + used
                progress(f"{label}: {rig.config.slug}: {block.summary()}")
                rig.result.latency.extend(block)
        wait_quiet(rigs)  # the last blocks' memory jobs count in the table statistics too
    time.sleep(STATS_DELAY)
    for rig in rigs:
        latency = rig.result.latency
        progress(f"{rig.config.slug} latency, {options.rounds} rounds: {latency.summary()}")
        progress(f"{rig.config.slug} CPU ms per reply: {rig.result.cpu_ms_per_reply()}")
        after = table_stats(rig.service.database_url)
        rig.result.tables = per_message(before[rig.config.slug], after, len(latency.sent))
        summarize_profiles(rig, profiles.get(rig.config.slug, {}))


def summarize_profiles(rig: Rig, profiles: dict[str, Path]) -> None:
    """Each of the configuration's raw py-spy profiles, summarized into its result."""
    for role, path in profiles.items():
        if path.exists():
            rig.result.profile[role] = profile_summary(path, ROOT)
        else:
            progress(f"no {role} profile was written (see py-spy-*.log in {rig.folder})")


def throughput_phase(rig: Rig, rigs: list[Rig], options: Options) -> None:
    """The configuration saturated by fresh learners while the others idle."""
    saturating = [f"L{n:03d}" for n in range(501, 501 + options.learners)]
    wait_quiet(rigs)
    label = f"{rig.config.slug} saturating"
    rig.result.throughput = rig.learners.drive(
        saturating, options.throughput_messages, (0.0, 0.0), label
    )
    progress(f"{rig.config.slug}: {rig.result.throughput.summary()}")


def collect(rig: Rig) -> ConfigResult:
    """The rest of the configuration's result, read while its service still runs."""
    result = rig.result
    result.llm_calls = dict(rig.llm.served)
    result.typing_calls = rig.tg.typing
    result.unmarked_replies = rig.tg.unmarked
    rig.service.group.assert_alive()
    if rig.config.pam:
        result.breakdown = log_breakdown(rig.service.logs, result.latency.windows)
    return result


def run_backend(backend: str, options: Options, folder: Path) -> list[ConfigResult]:
    """The backend's floor and Pam configurations, all running at once: warmed up, measured
    interleaved, then saturated one at a time."""
    configs = configurations((backend,))
    progress(f"== {backend}: {'; '.join(config.name for config in configs)}")
    with ExitStack() as stack:
        rigs = [stack.enter_context(rigged(c, options, folder / c.slug)) for c in configs]
        for rig in rigs:
            # A fresh process's first turns pay for lazy imports and new connections.
            rig.learners.drive(WARM_UP, 20, (0.0, 0.0), f"{rig.config.slug} warm-up")
        latency_phase(rigs, options)
        for rig in rigs:
            throughput_phase(rig, rigs, options)
        return [collect(rig) for rig in rigs]


# -- command line ----------------------------------------------------------------------------


def check_environment(options: Options) -> str | None:
    """What stops this run from working here, said so an operator can fix it; or None."""
    if "postgres" in options.backends:
        problem = postgres_problem(options.database_url)
        if problem:
            return f"{problem}, or run --backends sqlite"
    if options.profile and not (shutil.which("py-spy") or (BIN / "py-spy").exists()):
        return "--profile needs py-spy: .venv/bin/pip install py-spy"
    return None


def run(options: Options, report: Callable[[str], None] = progress) -> dict[str, Any]:
    """Every configuration of `options`; the results as written to latency.json."""
    folder = Path(tempfile.mkdtemp(prefix="pam-latency-"))
    report(
        f"{options.messages} messages from {options.learners} learners per configuration "
        f"in {options.rounds} interleaved rounds, backends {','.join(options.backends)}; "
        f"logs in {folder}"
    )
    results = [r for backend in options.backends for r in run_backend(backend, options, folder)]
    found: dict[str, Any] = {
        "options": {k: str(v) for k, v in asdict(options).items()},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "commit": commit(),
        },
        "configurations": [r.as_dict() for r in results],
        "verdicts": verdicts(results),
        "table": table(results),
    }
    if options.keep_logs or options.profile:
        found["logs"] = str(folder)
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        name = "latency_profile.json" if options.profile else "latency.json"
        (options.out / name).write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
        if options.plot and not options.profile:
            plot(results, options.out / "latency.png", report)
    if not options.keep_logs and not options.profile:
        shutil.rmtree(folder, ignore_errors=True)
    return found


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(prog="bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=Options.messages)
    parser.add_argument("--learners", type=int, default=Options.learners)
    parser.add_argument(
        "--rounds",
        type=int,
        default=Options.rounds,
        help="blocks per configuration in the interleaved latency phase (default 5)",
    )
    parser.add_argument(
        "--throughput-messages",
        type=int,
        default=None,
        help="messages of the saturation phase (default: --messages)",
    )
    parser.add_argument(
        "--think",
        default="2,4",
        help="a learner's think time after each reply, MIN,MAX seconds (default 2,4)",
    )
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgres")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--out", type=Path, default=Options.out, help="latency.json/.png go here")
    parser.add_argument("--quick", action="store_true", help="200 messages, 20 learners")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample web and worker with py-spy; writes latency_profile.json, keeps raw stacks",
    )
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = set(backends) - set(BACKENDS)
    if unknown or not backends:
        parser.error(f"--backends takes sqlite and/or postgres, not {sorted(unknown)}")
    if args.rounds < 1:
        parser.error("--rounds needs at least 1")
    options = Options(
        messages=args.messages,
        learners=args.learners,
        rounds=args.rounds,
        think=_think(parser, args.think),
        backends=backends,
        database_url=args.database_url,
        out=args.out,
        plot=not args.no_plot,
        profile=args.profile,
        keep_logs=args.keep_logs,
    )
    if args.quick:
        options = replace(options, messages=200, learners=20)
    return replace(options, throughput_messages=args.throughput_messages or options.messages)


def _think(parser: argparse.ArgumentParser, value: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in value.split(","))
    except ValueError:
        parser.error(f"--think takes MIN,MAX seconds, not {value!r}")
    if not 0 <= low <= high:
        parser.error("--think needs 0 <= MIN <= MAX")
    return low, high


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--realistic" in argv:  # a mode of its own: bench/latency_realistic.py
        from bench import latency_realistic

        return latency_realistic.main([a for a in argv if a != "--realistic"])
    options = parse_args(argv)
    problem = check_environment(options)
    if problem:
        print(f"bench.latency: {problem}", file=sys.stderr)
        return 2
    found = run(options)
    print()
    print(found["table"])
    for config in found["configurations"]:
        for role, summary in config.get("profile", {}).items():
            print(f"\nprofile of {config['slug']} {role} ({summary['samples']} samples):")
            for line in summary["top"][:15]:
                print(f"  {line['share']:6.1%}  {line['where']}")
    verdict = found["verdicts"]
    print(f"\ntargets: {verdict}")
    if options.profile:
        print(f"raw py-spy stacks kept in {found.get('logs')}")
    return 0 if all(v in {"PASS", "n/a"} for v in verdict.values()) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
