"""What happens to the service during the fault run: the processes, their SIGKILLs and
restarts (as Heroku and Fly restart a dead dyno or machine), and a Postgres restart."""

from __future__ import annotations

import itertools
import random
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.fault_traffic import progress
from loopback.harness import (
    PAM_CMD,
    Process,
    Processes,
    gunicorn,
    healthy,
    wait_for,
)

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


def worker_started(worker: Process) -> bool:
    """Whether a `pam worker` process has logged that it started."""
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


def chaos_plan(
    duration: float,
    worker_kills: int,
    web_kills: int,
    postgres_restart: bool,
    rng: random.Random,
) -> list[tuple[float, str]]:
    """The faults, at random moments while learners write for `duration` seconds, at least
    6 s apart."""
    actions = ["kill worker"] * worker_kills + ["kill web"] * web_kills
    if postgres_restart:
        actions.append("restart postgres")
    rng.shuffle(actions)
    span = (0.15 * duration, 0.85 * duration)
    for _ in range(1000):
        times = sorted(rng.uniform(*span) for _ in actions)
        if all(b - a >= 6 for a, b in itertools.pairwise(times)) or len(times) < 2:
            return list(zip(times, actions, strict=True))
    step = (span[1] - span[0]) / max(1, len(actions))
    return [(span[0] + n * step, action) for n, action in enumerate(actions)]
