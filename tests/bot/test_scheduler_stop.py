"""A worker that stops while its scheduler is running a round stops cleanly: the memory job
the round started runs, and no traceback ends the scheduler's thread."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from apscheduler.job import Job
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING, STATE_STOPPED

from bot.worker.runtime import stop_scheduler
from tests.support import wait_until
from webhooks.wiring import background_scheduler


class HeldRound(MemoryJobStore):
    """A job store that holds the scheduler's first round with a job due inside the store's
    lock until `release` is set, as a busy scheduler thread is held by the operating system."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.release = threading.Event()

    def get_due_jobs(self, now: datetime) -> list[Job]:
        due: list[Job] = super().get_due_jobs(now)
        if due and not self.release.is_set():
            self.holding.set()
            self.release.wait(10)
        return due


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """Exceptions that end a thread while the test runs."""
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    return failures


def test_stopping_in_the_middle_of_a_round_lets_it_finish(
    thread_failures: list[BaseException | None],
) -> None:
    scheduler = background_scheduler(2)
    store = HeldRound()
    scheduler.add_jobstore(store)
    ran = threading.Event()
    scheduler.start()
    stopping = threading.Thread(target=stop_scheduler, args=(scheduler,))
    try:
        scheduler.add_job(ran.set)  # a memory job queued "now", as the runner queues them
        assert store.holding.wait(10), "the scheduler never took up the job"
        stopping.start()
        wait_until(lambda: scheduler.state != STATE_RUNNING, "the stop under way")
        # Paused, and waiting for the round: a plain shutdown would be STOPPED by now.
        assert scheduler.state == STATE_PAUSED and stopping.is_alive()
    finally:
        store.release.set()
        if stopping.ident is not None:  # started
            stopping.join(10)
    assert not stopping.is_alive()
    assert scheduler.state == STATE_STOPPED
    assert ran.wait(10), "the job the round submitted never ran"
    assert thread_failures == []  # the scheduler's shutdown joined its thread


def test_a_job_that_queues_another_while_the_worker_stops_does_not_hang_it() -> None:
    scheduler = background_scheduler(2)
    running, go, queued = threading.Event(), threading.Event(), threading.Event()

    def recover() -> None:  # as the memory jobs' recovery round queues the jobs it finds
        running.set()
        go.wait(10)
        scheduler.add_job(lambda: None)
        queued.set()

    scheduler.start()
    try:
        scheduler.add_job(recover)
        assert running.wait(10), "the job never started"
        stopping = threading.Thread(target=stop_scheduler, args=(scheduler,))
        stopping.start()
        # shutdown(wait=True) would wait for the job while holding the lock its add_job needs.
        stopping.join(10)
        assert not stopping.is_alive()
    finally:
        go.set()
    assert queued.wait(10), "the job's add_job hung"
