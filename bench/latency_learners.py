"""The learners of the latency benchmarks (bench/latency.py, bench/latency_realistic.py):
Telegram users writing to Pam's webhook in closed loop, each waiting for the reply that echoes
its message's marker at the fake Telegram, then thinking; and what both modes share about the
service under test."""

from __future__ import annotations

import itertools
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from sqlalchemy.engine import make_url

from bench.fault_traffic import TEMPLATES
from bench.latency_report import PhaseResult
from bench.latency_servers import StopwatchTelegram
from loopback.harness import ROOT, Processes
from memory.database import db

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"
WEBHOOK_SECRET = "latency-bench-webhook-secret"
ANSWER_TIMEOUT = 60.0  # a reply later than this counts as missing


def progress(message: str) -> None:
    print(f"[latency {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the learners ----------------------------------------------------------------------------


def shares(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal whole shares, the remainder to the first ones."""
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


class Learners:
    """Telegram users writing to the webhook in closed loop: one message in flight each."""

    def __init__(self, base: str, tg: StopwatchTelegram, seed: int) -> None:
        self.base = base
        self.tg = tg
        self.rng = random.Random(seed)
        self.update_ids = itertools.count(self.rng.randrange(10_000_000, 900_000_000))
        self.lock = threading.Lock()
        # Messages each learner has sent so far: a later block continues its numbering, so
        # markers stay unique and the conversation grows as in one long phase.
        self.written: Counter[str] = Counter()

    def update(self, key: str, index: int, marker: str) -> dict[str, Any]:
        user_id = 500_000_000 + int(key[1:])
        user = {
            "id": user_id,
            "is_bot": False,
            "first_name": f"Learner{key}",
            "language_code": "de",
        }
        with self.lock:
            update_id = next(self.update_ids)
            words = self.rng.choice(TEMPLATES).format(marker=marker)
        return {
            "update_id": update_id,
            "message": {
                "message_id": index + 1,
                "from": user,
                "chat": {"id": user_id, "first_name": user["first_name"], "type": "private"},
                "date": int(time.time()),
                "text": words,
            },
        }

    def drive(
        self, keys: list[str], total: int, think: tuple[float, float], label: str
    ) -> PhaseResult:
        """`total` messages spread over `keys`, each learner in its own thread, numbered on
        from the learner's last message in an earlier call."""
        phase = PhaseResult(messages=total)
        counts = shares(total, len(keys))
        stop = threading.Event()

        def write(key: str, indexes: range, seed: float) -> None:
            rng = random.Random(seed)
            time.sleep(rng.uniform(0, think[1]))  # learners do not all start at once
            with requests.Session() as session:
                for index in indexes:
                    self._write(session, phase, key, index, think, rng)

        def report() -> None:
            while not stop.wait(5.0):
                with self.lock:
                    sent = list(phase.sent)
                progress(f"{label}: sent {len(sent)}/{total}, answered {self.tg.answered(sent)}")

        threads = [
            threading.Thread(
                target=write, args=(key, self._next(key, count), self.rng.random()), daemon=True
            )
            for key, count in zip(keys, counts, strict=True)
            if count
        ]
        ticker = threading.Thread(target=report, daemon=True)
        started = time.time()
        ticker.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(0.5)  # a duplicate reply would arrive now
        stop.set()
        phase.windows.append((started, time.time()))
        with self.tg.lock:
            phase.arrivals = {m: list(self.tg.arrivals.get(m, [])) for m in phase.sent}
        return phase

    def _next(self, key: str, count: int) -> range:
        """The indexes of the learner's next `count` messages."""
        first = self.written[key]
        self.written[key] += count
        return range(first, first + count)

    def _write(
        self,
        session: requests.Session,
        phase: PhaseResult,
        key: str,
        index: int,
        think: tuple[float, float],
        rng: random.Random,
    ) -> None:
        """One message: POST it, wait for its reply, think."""
        marker = f"{key}-M{index + 1:02d}"
        update = self.update(key, index, marker)
        arrived = self.tg.expect(marker)
        sent = time.time()
        status = self.post(session, update)
        with self.lock:
            phase.sent[marker] = sent
            phase.statuses[status] += 1
        if status != "200":
            return
        arrived.wait(ANSWER_TIMEOUT)
        if think[1] > 0:
            time.sleep(rng.uniform(*think))

    def post(self, session: requests.Session, update: dict[str, Any]) -> str:
        """POST the update until it is acknowledged, as Telegram retries (briefly here)."""
        status = "?"
        for attempt in range(20):
            try:
                response = session.post(
                    f"{self.base}/telegram/webhook",
                    json=update,
                    headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
                    timeout=30,
                )
                status = str(response.status_code)
            except requests.RequestException as exc:
                status = type(exc).__name__
            if status == "200":
                return status
            time.sleep(0.05 * (attempt + 1))
        return status


@dataclass
class Service:
    base: str
    group: Processes
    logs: dict[str, Path] = field(default_factory=dict)  # role ("web", "worker") -> log file
    pids: dict[str, int] = field(default_factory=dict)
    database_url: str | None = None  # Pam's: the quiet checks, Postgres's table statistics


def autovacuum(database_url: str) -> bool | None:
    """Whether the Postgres at `database_url` runs autovacuum (None: not Postgres, or not
    reachable). Without it nothing runs ANALYZE: foreign-key checks keep plans made when the
    tables were small, and dead queue rows stay in the claims' indexes, so a long run slows
    as no managed Postgres would (docs/benchmarks/speed.md, "Why Postgres slowed in long
    runs")."""
    if make_url(database_url).get_backend_name() != "postgresql":
        return None
    try:
        engine = db.make_engine(database_url, pool_size=1, max_overflow=0)
        try:
            with engine.connect() as connection:
                return connection.exec_driver_sql("SHOW autovacuum").scalar() == "on"
        finally:
            engine.dispose()
    except Exception:
        return None


def warn_without_autovacuum(database_url: str, report: Callable[[str], None]) -> bool | None:
    """Say so when the benchmark's Postgres runs without autovacuum; what `autovacuum` says."""
    running = autovacuum(database_url)
    if running is False:
        report(
            "warning: this Postgres runs with autovacuum off: a long run slows as tables "
            "grow, which a managed Postgres would not (turn it on for figures to quote)"
        )
    return running


def commit() -> str:
    """The checkout's commit, "+dirty" when tracked files changed."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
