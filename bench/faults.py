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
import itertools
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import Engine, make_url, text
from twilio.request_validator import RequestValidator

from bench.fault_servers import MARKER, FaultyLLM, FaultyTelegram, RecordingTwilio, snapshot
from memory import db
from memory.queue import Inbox, Outbox
from memory.store import LEARNER, PAM, Store
from tests import telegram_server, twilio_server
from tests.harness import (
    PAM_CMD,
    ROOT,
    Process,
    Processes,
    db_upgrade,
    free_port,
    gunicorn,
    healthy,
    postgres_schema,
    service_env,
    wait_for,
)

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"
WEBHOOK_SECRET = "fault-run-webhook-secret"
LLM_TIMEOUT = 2.0
KILL_GAP = 1.0  # seconds: a send this close before a worker's SIGKILL may not be recorded
FAILURE_COLUMNS = (
    "never_answered",
    "answered_twice",
    "out_of_order",
    "memory_violations",
    "not_accepted",
    "apologies",
    "crashed_processes",
)
TEMPLATES = [
    "Hola Pam, yo es muy contento hoy porque el sol brilla. ({marker})",
    "Ayer fui al mercado y compré tomates, pan y queso para la cena. ({marker})",
    "Mi hermana trabaja en un hospital grande en Sevilla 🏥 ({marker})",
    "Am Wochenende war ich mit Freunden am See, es war sehr schön. ({marker})",
    "Ich habe gestern einen Kuchen gebacken, aber er war zu süß 😅 ({marker})",
    "¿Tú sabes cocinar paella? Yo no, pero quiero aprender. ({marker})",
]


def progress(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- what the learners send ------------------------------------------------------------------


@dataclass(frozen=True)
class Learner:
    key: str  # "L07": the prefix of this learner's markers
    channel: str  # "telegram" or "whatsapp"
    chat: str  # where replies go: the Telegram chat id, or "whatsapp:+<number>"
    address: str  # Pam's external id for the learner
    user: dict[str, Any] = field(hash=False, compare=False)  # Telegram's `from` object


@dataclass(frozen=True)
class Message:
    learner: Learner
    index: int  # 0-based position in the learner's conversation
    marker: str
    text: str
    platform_id: str  # Telegram update_id or Twilio MessageSid: the same on every redelivery


def make_learners(count: int, rng: random.Random) -> list[Learner]:
    """Half on Telegram, half on WhatsApp, alternating."""
    learners = []
    for n in range(1, count + 1):
        key = f"L{n:02d}"
        if n % 2:
            user_id = 500_000_000 + rng.randrange(100_000_000)
            user = {
                "id": user_id,
                "is_bot": False,
                "first_name": f"Learner{n}",
                "language_code": "de",
            }
            learners.append(Learner(key, "telegram", str(user_id), f"telegram:{user_id}", user))
        else:
            number = f"+3461{rng.randrange(10_000_000):07d}"
            chat = f"whatsapp:{number}"
            learners.append(Learner(key, "whatsapp", chat, chat, {"name": f"Learner{n}"}))
    return learners


def make_messages(learners: list[Learner], total: int, rng: random.Random) -> list[Message]:
    """`total` messages spread evenly over the learners, each carrying a unique marker."""
    update_ids = itertools.count(rng.randrange(10_000_000, 900_000_000))
    messages = []
    for n in range(total):
        learner = learners[n % len(learners)]
        index = n // len(learners)
        marker = f"{learner.key}-M{index + 1:02d}"
        text = rng.choice(TEMPLATES).format(marker=marker)
        platform_id = (
            str(next(update_ids))
            if learner.channel == "telegram"
            else f"SM{rng.getrandbits(128):032x}"
        )
        messages.append(Message(learner, index, marker, text, platform_id))
    return messages


# -- the platforms: deliver webhooks, retrying until acknowledged ------------------------------


class Platforms:
    """Telegram and Twilio as Pam's web app sees them: they POST each message (signed) and
    retry with backoff until it is acknowledged with a 2xx, as both platforms do."""

    def __init__(self, base: str, give_up_after: float) -> None:
        self.base = base
        self.give_up_after = give_up_after
        self.validator = RequestValidator(twilio_server.AUTH_TOKEN)
        self.local = threading.local()
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.posts = 0
        self.accepted_at: dict[str, float] = {}

    def _session(self) -> requests.Session:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        return session

    def _post_once(self, message: Message) -> int:
        learner = message.learner
        if learner.channel == "telegram":
            chat = {
                "id": learner.user["id"],
                "first_name": learner.user["first_name"],
                "type": "private",
            }
            update: dict[str, Any] = {
                "update_id": int(message.platform_id),
                "message": {
                    "message_id": message.index + 1,
                    "from": learner.user,
                    "chat": chat,
                    "date": int(time.time()),
                    "text": message.text,
                },
            }
            response = self._session().post(
                f"{self.base}/telegram/webhook",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
                timeout=10,
            )
        else:
            form = {
                "SmsMessageSid": message.platform_id,
                "NumMedia": "0",
                "ProfileName": learner.user["name"],
                "MessageType": "text",
                "SmsSid": message.platform_id,
                "WaId": learner.chat.removeprefix("whatsapp:+"),
                "SmsStatus": "received",
                "Body": message.text,
                "To": twilio_server.NUMBER,
                "NumSegments": "1",
                "MessageSid": message.platform_id,
                "AccountSid": twilio_server.ACCOUNT_SID,
                "From": learner.chat,
                "ApiVersion": "2010-04-01",
            }
            url = f"{self.base}/whatsapp/webhook"
            response = self._session().post(
                url,
                data=form,
                headers={"X-Twilio-Signature": self.validator.compute_signature(url, form)},
                timeout=10,
            )
        return response.status_code

    def deliver(self, message: Message) -> bool:
        """POST until acknowledged; False if the web app never acknowledged it."""
        deadline = time.monotonic() + self.give_up_after
        pause = 0.25
        while True:
            try:
                status = str(self._post_once(message))
            except requests.RequestException as exc:
                status = type(exc).__name__
                self.local.session = None  # a connection the dead server left behind
            with self.lock:
                self.posts += 1
                self.statuses[status] += 1
                if status.startswith("2"):
                    self.accepted_at.setdefault(message.platform_id, time.time())
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(pause * random.uniform(0.8, 1.2))
            pause = min(pause * 2, 4.0)


# -- the service, and what happens to it -----------------------------------------------------


@dataclass
class Service:
    """The web app and workers of one run, restartable after a kill."""

    group: Processes
    env: dict[str, str]
    port: int
    web: Process | None = None
    workers: list[Process] = field(default_factory=list)
    started_workers: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_web(self) -> None:
        self.web = self.group.start("web", gunicorn(self.port), self.env)
        wait_for(lambda: healthy(self.base), 60, "the web app to answer /healthz", poll=0.1)

    def start_worker(self) -> Process:
        self.started_workers += 1
        worker = self.group.start(f"worker-{self.started_workers}", [*PAM_CMD, "worker"], self.env)
        self.workers.append(worker)
        return worker

    def crashed(self) -> list[str]:
        """Processes that died without being killed by the run."""
        alive = [self.web, *self.workers]
        return [
            f"{p.name} (exit {p.popen.poll()})" for p in alive if p and p.popen.poll() is not None
        ]


def _started(worker: Process) -> bool:
    return "worker started" in worker.tail()


def restart_postgres() -> None:
    """Restart the local cluster the way an operator (or a managed failover) would."""
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )


@dataclass
class Event:
    at: float  # seconds since the run started
    what: str


class Chaos:
    """Runs the scheduled faults at their moments: SIGKILLs (the platform restarts the
    process a moment later, as Heroku and Fly do) and a Postgres restart."""

    def __init__(self, service: Service, plan: list[tuple[float, str]], started: float) -> None:
        self.service = service
        self.plan = sorted(plan)
        self.started = started
        self.events: list[Event] = []
        self.stop = threading.Event()
        self.rng = random.Random(len(plan))
        self.thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self.error: BaseException | None = None

    def _note(self, what: str) -> None:
        event = Event(round(time.time() - self.started, 2), what)
        self.events.append(event)
        progress(f"t={event.at:.1f}s {what}")

    def _run(self) -> None:
        try:
            for offset, action in self.plan:
                if self.stop.wait(max(0.0, self.started + offset - time.time())):
                    return
                self._do(action)
        except BaseException as exc:
            self.error = exc
            progress(f"chaos failed: {exc!r}")

    def _do(self, action: str) -> None:
        service = self.service
        if action == "kill worker":
            running = [w for w in service.workers if w.popen.poll() is None]
            victim = self.rng.choice(running)
            service.group.kill(victim)
            victim.popen.wait(timeout=10)
            service.workers.remove(victim)
            self._note(f"SIGKILL {victim.name}")
            time.sleep(1.5)
            service.start_worker()
        elif action == "kill web":
            assert service.web is not None
            service.group.kill(service.web)
            service.web.popen.wait(timeout=10)
            self._note("SIGKILL web (gunicorn and its workers)")
            time.sleep(1.0)
            service.start_web()
            self._note("web back")
        elif action == "restart postgres":
            self._note("Postgres restarting")
            restart_postgres()
            self._note("Postgres back")


def chaos_plan(options: Options, rng: random.Random) -> list[tuple[float, str]]:
    """The faults, at random moments while learners are writing, at least 6 s apart."""
    actions = ["kill worker"] * options.worker_kills + ["kill web"] * options.web_kills
    if options.postgres_restart:
        actions.append("restart postgres")
    rng.shuffle(actions)
    span = (0.15 * options.duration, 0.85 * options.duration)
    for _ in range(1000):
        times = sorted(rng.uniform(*span) for _ in actions)
        if all(b - a >= 6 for a, b in itertools.pairwise(times)) or len(times) < 2:
            return list(zip(times, actions, strict=True))
    step = (span[1] - span[0]) / max(1, len(actions))
    return [(span[0] + n * step, action) for n, action in enumerate(actions)]


# -- the run ---------------------------------------------------------------------------------


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
    out: Path | None = ROOT / "bench" / "results"
    plot: bool = True
    keep_logs: bool = False


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
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def unfinished(engine: Engine) -> int:
    try:
        counts = Counter(Inbox(engine, 1).counts()) + Counter(Outbox(engine, 1).counts())
    except Exception:  # Postgres is restarting: ask again in a moment
        return -1
    return counts["pending"] + counts["claimed"]


def service_knobs(
    llm: FaultyLLM, tg: FaultyTelegram, twilio: RecordingTwilio, port: int
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
        "PAM_LLM_TIMEOUT": str(LLM_TIMEOUT),
        "PAM_LLM_MAX_RETRIES": "2",
        "PAM_SUMMARY_TRIGGER_TOKENS": "400",  # fold often: the invariant gets exercised
        # The fake summary lists every folded marker; the cap must not cut that list.
        "PAM_SUMMARY_MAX_TOKENS": "1000",
        "PAM_RATE_LIMIT_PER_MINUTE": "0",  # these learners type faster than people do
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
        FaultyLLM(options.llm_fault_rate, LLM_TIMEOUT, seed) as llm,
        FaultyTelegram(options.telegram_429_rate, seed + 1) as tg,
        RecordingTwilio(options.twilio_429_rate, seed + 2) as twilio,
        postgres_schema(options.database_url, prefix="pam_faults") as url,
    ):
        group = Processes(folder, who="faults")
        port = free_port()
        service = Service(group, service_env(url, **service_knobs(llm, tg, twilio, port)), port)
        engine = db.make_engine(url)
        try:
            db_upgrade(service.env, folder)
            service.start_web()
            for _ in range(2):
                service.start_worker()
            for worker in list(service.workers):
                wait_for(partial(_started, worker), 60, f"{worker.name} to start")
            started = time.time()
            chaos = Chaos(service, chaos_plan(options, rng), started)
            platforms = Platforms(service.base, give_up_after=120.0)
            chaos.thread.start()
            _send_everything(
                messages,
                platforms,
                options,
                rng,
                started,
                lambda: len(_answered_markers(tg, twilio)),
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
            _count_answers(report, messages, platforms, tg, twilio, kills)
            _check_memory(report, engine, learners, messages, platforms)
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
                _plot(report, messages, platforms, tg, twilio, started, options.out / "faults.png")
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
        answered = _answered_markers(tg, twilio) & accepted
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


def _deliveries(tg: FaultyTelegram, twilio: RecordingTwilio) -> list[Any]:
    return sorted([*snapshot(tg), *snapshot(twilio)], key=lambda d: d.at)


def _answered_markers(tg: FaultyTelegram, twilio: RecordingTwilio) -> set[str]:
    return {m for d in _deliveries(tg, twilio) for m in MARKER.findall(d.text)}


def _count_answers(
    report: Report,
    messages: list[Message],
    platforms: Platforms,
    tg: FaultyTelegram,
    twilio: RecordingTwilio,
    worker_kills: list[float],
) -> None:
    accepted = [m for m in messages if m.platform_id in platforms.accepted_at]
    report.accepted = len(accepted)
    report.not_accepted = len(messages) - len(accepted)
    deliveries = _deliveries(tg, twilio)
    per_marker = Counter(m for d in deliveries for m in MARKER.findall(d.text))
    report.answered_once = sum(1 for m in accepted if per_marker[m.marker] == 1)
    twice = [m.marker for m in accepted if per_marker[m.marker] > 1]
    never = [m.marker for m in accepted if per_marker[m.marker] == 0]
    # A worker SIGKILLed after the platform accepted a reply but before its COMMIT leaves the
    # reply unrecorded, and another worker sends it again: no platform offers the idempotency
    # key that would prevent it (README, "Delivery"). Such a duplicate's first copy arrived
    # at most KILL_GAP seconds before a worker was killed; every other duplicate is a failure.
    in_gap = []
    for marker in twice:
        first = next(d.at for d in deliveries if marker in MARKER.findall(d.text))
        if any(0 <= kill - first <= KILL_GAP for kill in worker_kills):
            in_gap.append(marker)
    report.twice_at_a_kill = len(in_gap)
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


def _check_memory(
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
        info = store.find_learner(learner.address)
        if info is None:
            report.memory_violations += len(expected)
            report.details.append(f"{learner.key}: no memory at all")
            continue
        stored = store.messages(info.id)
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
        summary = store.summary(info.id)
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


def _plot(
    report: Report,
    messages: list[Message],
    platforms: Platforms,
    tg: FaultyTelegram,
    twilio: RecordingTwilio,
    started: float,
    path: Path,
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    deliveries = _deliveries(tg, twilio)
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


# -- command line ----------------------------------------------------------------------------


def check_environment(options: Options) -> str | None:
    """What stops this run from working here, said so an operator can fix it; or None."""
    try:
        engine = db.make_engine(options.database_url)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        return (
            f"cannot reach Postgres at {options.database_url} ({type(exc).__name__}). Start it "
            "(e.g. `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`) "
            "or pass --database-url."
        )
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
