"""Pam's assembled parts, as the worker, the terminal and the services use them; built by the
composition root (webhooks.wiring.build)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from bot.channels import MediaLinks
from bot.settings import CoreSettings
from bot.turn.after_send import AfterSending
from bot.turn.local_turns import LocalTurns
from bot.turn.tutor import Tutor
from bot.worker.memory_process import MemoryProcess
from memory.clock import Clock
from memory.jobs.coordinator import JobRunner
from memory.llm import ChatModel
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from memory.turns import TurnWriter

log = logging.getLogger(__name__)


@dataclass
class Pam:
    """Pam's assembled parts."""

    settings: CoreSettings
    engine: Engine
    store: Store
    counter: TokenCounter
    model: ChatModel
    runner: JobRunner
    tutor: Tutor
    writer: TurnWriter  # stores a turn's reply, finishes its claim, queues its delivery
    after_sending: AfterSending  # a turn's review grades and memory jobs, once it is sent
    clock: Clock  # what every lease, backoff, retention cutoff and limit window goes by
    scheduler: BackgroundScheduler | None = None
    memory_process: MemoryProcess | None = None
    links: MediaLinks | None = None  # the signed links delivery gives charts and voice

    def local_turns(self) -> LocalTurns:
        """Turns taken without the inbox, the replies stored at once (the terminal)."""
        return LocalTurns(self.tutor, self.writer, self.after_sending, self.store.learners)

    def close(self, wait_seconds: float) -> bool:
        """Let running memory jobs finish for up to `wait_seconds` (here, or in the memory
        process), then stop. True if every job finished; jobs still running are handed back to
        the database for the next start."""
        deadline = time.monotonic() + wait_seconds
        finished = self.runner.wait_idle(wait_seconds)
        if not finished:
            count = self.runner.abandon_active()
            log.warning("stopped with %d memory job(s) unfinished; they resume next start", count)
        if self.scheduler is not None:
            stop_scheduler(self.scheduler)  # the memory jobs were waited for above
        if self.memory_process is not None:
            stopped = self.memory_process.stop(max(0.0, deadline - time.monotonic()))
            finished = finished and stopped
        self.engine.dispose()
        return finished


def stop_scheduler(scheduler: BackgroundScheduler) -> None:
    """Shut `scheduler` down (if it runs) once the round its thread is in has finished.

    APScheduler 3's shutdown marks the scheduler stopped before it takes the job-store lock.
    A round still under that lock then cannot remove the one-shot job it has just run: a
    stopped scheduler looks for it among the jobs pending its start, and JobLookupError ends
    the scheduler thread with a traceback (agronholm/apscheduler#104 was a related race).
    Paused, the scheduler starts no new round; its job list takes the lock a round holds, so
    it returns only once that round is done. (A round whose thread woke and passed the pause
    check in the instant before `pause()` can still take the lock after; that window is a
    few instructions wide.)

    Jobs still running finish on their own threads: `shutdown(wait=True)` would wait for them
    holding the job-store lock, which a running job that queues another (the memory jobs'
    recovery round) needs, and neither would ever finish.
    """
    if not scheduler.running:
        return
    scheduler.pause()
    scheduler.get_jobs()
    scheduler.shutdown(wait=False)
