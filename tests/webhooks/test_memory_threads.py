"""Memory jobs run many at once: each mostly waits on the model, and with four at a time a
worker answering 200 learners had their profiles learned every 12 messages instead of 5."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine

from bot.worker.runtime import stop_scheduler
from tests.support import wait_until
from webhooks.settings import Settings
from webhooks.wiring import background_scheduler, memory_threads


def test_the_memory_jobs_run_as_many_at_once_as_their_threads() -> None:
    scheduler = background_scheduler(8)
    together = threading.Barrier(8, timeout=10)  # broken unless all eight wait at once
    passed: list[int] = []
    scheduler.start()
    try:
        for _ in range(8):
            scheduler.add_job(lambda: passed.append(together.wait()))
        wait_until(lambda: len(passed) == 8, "eight memory jobs at once")
    finally:
        stop_scheduler(scheduler)  # as the worker does: no round cut short
    assert sorted(passed) == list(range(8))


def test_postgres_runs_32_memory_jobs_at_once_sqlite_4_unless_told() -> None:
    postgres = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")  # never connects
    sqlite = create_engine("sqlite://")
    for url, engine, threads in (("postgresql://x/y", postgres, 32), ("sqlite://", sqlite, 4)):
        assert memory_threads(Settings(database_url=url), engine) == threads
        told = Settings(database_url=url, service={"memory_threads": 6})
        assert memory_threads(told, engine) == 6
