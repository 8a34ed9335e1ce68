"""The fault-injection run: Pam as operators deploy it (gunicorn web app and `pam worker`
processes on Postgres) against fake LLM, Telegram and Twilio servers on 127.0.0.1, while
learners on both channels write, platforms redeliver, the LLM and Telegram misbehave,
processes are SIGKILLed and Postgres restarts. Then it counts, per message, how often it was
answered, in what order, and whether memory kept it exactly once.

    python3 dev.py bench faults                  # 2,000 messages, 50 learners (~4 minutes)
    python3 dev.py bench faults --messages 300   # a quicker run

Exit status 0 when every failure column is zero, 1 when one is not, 2 when it cannot run."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from sqlalchemy import Engine, make_url

from bench.fault_chaos import Chaos, Service, chaos_plan, worker_started
from bench.fault_report import Report, answered_markers, check_memory, count_answers, plot_timeline
from bench.fault_servers import FaultyLLM, FaultyTelegram, RecordingTwilio
from bench.fault_traffic import (
    WEBHOOK_SECRET,
    Message,
    Platforms,
    make_learners,
    make_messages,
    progress,
)
from loopback import telegram_server, twilio_server
from loopback.harness import (
    ROOT,
    Processes,
    db_upgrade,
    free_port,
    postgres_problem,
    postgres_schema,
    service_env,
    wait_for,
)
from memory.database import db
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"
LLM_TIMEOUT = 2.0


@dataclass(frozen=True)
class Options:
    messages: int = 2000
    learners: int = 50
    duration: float = 150.0  # seconds over which the learners write
    duplicates: float = 0.2
    llm_fault_rate: float = 0.1
    telegram_429_rate: float = 0.05
    twilio_429_rate: float = 0.02
    worker_kills: int = 2
    web_kills: int = 1
    postgres_restart: bool = True
    database_url: str = DEFAULT_DATABASE
    seed: int | None = None
    settle: float = 240.0  # how long to wait for the last answers after the last message
    # PAM_LLM_TIMEOUT of the services; an injected "timeout" fault stalls a second longer. A
    # machine busy with other work answers some honest calls slower than 2 s: tests set more.
    llm_timeout: float = LLM_TIMEOUT
    out: Path | None = ROOT / "bench" / "results"
    plot: bool = True
    keep_logs: bool = False


def unfinished(engine: Engine) -> int:
    try:
        counts = Counter(Inbox(engine, 1).counts()) + Counter(Outbox(engine, 1).counts())
    except Exception:  # Postgres is restarting: ask again in a moment
        return -1
    return counts["pending"] + counts["claimed"]


def service_knobs(
    llm: FaultyLLM, tg: FaultyTelegram, twilio: RecordingTwilio, port: int, llm_timeout: float
) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "fault-run",
        "TELEGRAM_BOT_TOKEN": telegram_server.TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "TELEGRAM_API_URL": tg.base_url,
        "TWILIO_ACCOUNT_SID": twilio_server.ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": twilio_server.AUTH_TOKEN,
        "TWILIO_WHATSAPP_NUMBER": twilio_server.NUMBER,
        "TWILIO_API_URL": twilio.base_url,
        "PAM_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PAM_POLL_SECONDS": "0.1",
        # Leases short enough that a killed worker's work comes back within the run.
        "PAM_INBOX_LEASE_SECONDS": "5",
        "PAM_DELIVERY_LEASE_SECONDS": "5",
        "PAM_JOB_LEASE_SECONDS": "10",
        "PAM_LLM_TIMEOUT": str(llm_timeout),
        "PAM_LLM_MAX_RETRIES": "2",
        "PAM_SUMMARY_TRIGGER_TOKENS": "400",  # fold often: the invariant gets exercised
        # The fake summary lists every folded marker; the cap must not cut that list.
        "PAM_SUMMARY_MAX_TOKENS": "1000",
        "PAM_RATE_LIMIT_PER_MINUTE": "0",  # these learners type faster than people do
        "PAM_MAX_QUEUED_PER_ADDRESS": "0",  # and queue more than people do during outages
        "PAM_SHUTDOWN_WAIT_SECONDS": "5",
        "PAM_LOG_LEVEL": "INFO",
    }


def run(options: Options) -> Report:
    """Run the whole fault-injection scenario and return its report."""
    seed = options.seed if options.seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    report = Report(seed=seed, options={k: str(v) for k, v in asdict(options).items()})
    learners = make_learners(options.learners, rng)
    messages = make_messages(learners, options.messages, rng)
    report.messages = len(messages)
    folder = Path(tempfile.mkdtemp(prefix="pam-faults-"))
    progress(
        f"seed={seed}: {len(messages)} messages from {len(learners)} learners over "
        f"~{options.duration:.0f}s; logs in {folder}"
    )
    with (
        FaultyLLM(options.llm_fault_rate, options.llm_timeout, seed) as llm,
        FaultyTelegram(options.telegram_429_rate, seed + 1) as tg,
        RecordingTwilio(options.twilio_429_rate, seed + 2) as twilio,
        postgres_schema(options.database_url, prefix="pam_faults") as url,
    ):
        group = Processes(folder, who="faults")
        port = free_port()
        service = Service(
            group,
            service_env(url, **service_knobs(llm, tg, twilio, port, options.llm_timeout)),
            port,
        )
        engine = db.make_engine(url)
        try:
            db_upgrade(service.env, folder)
            service.start_web()
            for _ in range(2):
                service.start_worker()
            for worker in list(service.workers):
                wait_for(partial(worker_started, worker), 60, f"{worker.name} to start")
            started = time.time()
            plan = chaos_plan(
                options.duration,
                options.worker_kills,
                options.web_kills,
                options.postgres_restart,
                rng,
            )
            chaos = Chaos(service, plan, started)
            platforms = Platforms(service.base, give_up_after=120.0)
            chaos.thread.start()
            _send_everything(
                messages,
                platforms,
                options,
                rng,
                started,
                lambda: len(answered_markers(tg, twilio)),
            )
            progress(f"all {len(messages)} messages sent; waiting for the last answers")
            chaos.thread.join(timeout=120)
            if chaos.error is not None:
                raise RuntimeError(f"a scheduled fault could not be run: {chaos.error!r}")
            _settle(engine, messages, platforms, tg, twilio, options.settle, started)
            time.sleep(3.0)  # a late duplicate would arrive now
            report.wall_seconds = round(time.time() - started, 1)
            crashed = service.crashed()
            report.crashed_processes = len(crashed)
            report.details += [f"crashed: {name}" for name in crashed]
            kills = [started + e.at for e in chaos.events if e.what.startswith("SIGKILL worker")]
            count_answers(report, messages, platforms, tg, twilio, kills)
            check_memory(report, engine, learners, messages, platforms)
            report.queues = {
                "inbox": Inbox(engine, 1).counts(),
                "outbox": Outbox(engine, 1).counts(),
            }
            report.events = [asdict(e) for e in chaos.events]
            report.webhook_posts = platforms.posts
            report.webhook_statuses = dict(platforms.statuses)
            report.llm_faults = dict(llm.injected)
            report.llm_calls_served = dict(llm.served)
            report.telegram_429s = tg.throttled
            report.twilio_429s = twilio.throttled
            if options.plot and options.out is not None:
                plot_timeline(
                    report, messages, platforms, tg, twilio, started, options.out / "faults.png"
                )
        except BaseException:
            print(group.tails(), flush=True)
            raise
        finally:
            group.close()
            engine.dispose()
            if report.passed() and not options.keep_logs:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                progress(f"process logs kept in {folder}")
    return report


def _send_everything(
    messages: list[Message],
    platforms: Platforms,
    options: Options,
    rng: random.Random,
    started: float,
    answered: Callable[[], int],
) -> None:
    """Each learner writes their messages in order, a few seconds apart, from their own
    thread; 20% of messages are delivered twice (half at once, half a few seconds later)."""
    per_learner: dict[str, list[Message]] = defaultdict(list)
    for message in messages:
        per_learner[message.learner.key].append(message)
    plans = {key: random.Random(rng.random()) for key in per_learner}
    sent = Counter[str]()
    lock = threading.Lock()
    stop = threading.Event()

    def redeliver_later(message: Message, delay: float) -> None:
        time.sleep(delay)
        platforms.deliver(message)

    def learner_writes(key: str, extra: ThreadPoolExecutor) -> None:
        own = per_learner[key]
        plan = plans[key]
        gap = options.duration / max(1, len(own))
        time.sleep(plan.uniform(0, gap))
        for message in own:
            roll = plan.random()
            if roll < options.duplicates / 2:
                extra.submit(platforms.deliver, message)  # a concurrent duplicate
            elif roll < options.duplicates:
                extra.submit(redeliver_later, message, plan.uniform(1, 8))
            platforms.deliver(message)
            with lock:
                sent[key] += 1
            if stop.wait(plan.uniform(0.3, 1.7) * gap):
                return

    def report_progress() -> None:
        while not stop.wait(5.0):
            with lock:
                done = sum(sent.values())
            progress(
                f"t={time.time() - started:5.1f}s sent {done}/{len(messages)}, "
                f"accepted {len(platforms.accepted_at)}, answered {answered()}"
            )

    with ThreadPoolExecutor(max_workers=32, thread_name_prefix="duplicate") as extra:
        threads = [
            threading.Thread(target=learner_writes, args=(key, extra), name=f"learner-{key}")
            for key in per_learner
        ]
        ticker = threading.Thread(target=report_progress, daemon=True)
        ticker.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stop.set()


def _settle(
    engine: Engine,
    messages: list[Message],
    platforms: Platforms,
    tg: FaultyTelegram,
    twilio: RecordingTwilio,
    settle: float,
    started: float,
) -> None:
    """Wait (bounded) until every accepted message has an answer and both queues are empty."""
    accepted = {m.marker for m in messages if m.platform_id in platforms.accepted_at}
    deadline = time.monotonic() + settle
    last = 0.0
    while time.monotonic() < deadline:
        answered = answered_markers(tg, twilio) & accepted
        left = unfinished(engine)
        if len(answered) == len(accepted) and left == 0:
            return
        if time.monotonic() - last > 5:
            last = time.monotonic()
            progress(
                f"t={time.time() - started:5.1f}s answered {len(answered)}/{len(accepted)}; "
                f"{left if left >= 0 else '?'} queue item(s) unfinished"
            )
        time.sleep(0.25)
    progress(f"gave up waiting after {settle:.0f}s")


# -- command line ----------------------------------------------------------------------------


def check_environment(options: Options) -> str | None:
    """What stops this run from working here, said so an operator can fix it; or None."""
    problem = postgres_problem(options.database_url)
    if problem:
        return problem
    if make_url(db.normalize_url(options.database_url)).get_backend_name() != "postgresql":
        return "the fault run needs Postgres (--database-url postgresql://...)"
    if options.postgres_restart:
        host = make_url(db.normalize_url(options.database_url)).host
        if host not in {"127.0.0.1", "localhost"} or not shutil.which("pg_ctlcluster"):
            return (
                "restarting Postgres needs a local cluster and pg_ctlcluster; "
                "pass --no-postgres-restart to run without that fault"
            )
    return None


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(prog="bench.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=Options.messages)
    parser.add_argument("--learners", type=int, default=Options.learners)
    parser.add_argument(
        "--duration", type=float, default=Options.duration, help="seconds of sending"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--no-postgres-restart", action="store_true")
    parser.add_argument("--out", type=Path, default=Options.out, help="where faults.json/.png go")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    return Options(
        messages=args.messages,
        learners=args.learners,
        duration=args.duration,
        seed=args.seed,
        database_url=args.database_url,
        postgres_restart=not args.no_postgres_restart,
        out=args.out,
        plot=not args.no_plot,
        keep_logs=args.keep_logs,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    problem = check_environment(options)
    if problem:
        print(f"bench.faults: {problem}", file=sys.stderr)
        return 2
    report = run(options)
    print(report.table())
    print(
        f"\nLLM faults injected: {report.llm_faults}; Telegram 429s: {report.telegram_429s}; "
        f"Twilio 429s: {report.twilio_429s}; webhook answers: {report.webhook_statuses}"
    )
    print(f"events: {[(e['at'], e['what']) for e in report.events]}")
    print(
        f"webhook-to-reply latency p50 {report.latency_p50:.2f}s, p95 {report.latency_p95:.2f}s, "
        f"max {report.latency_max:.2f}s; run took {report.wall_seconds:.0f}s"
    )
    for line in report.details[:40]:
        print(f"  {line}")
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "faults.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    verdict = "PASS" if report.passed() else "FAIL"
    print(f"\n{verdict}: failure columns {report.failures()}")
    return 0 if report.passed() else 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
