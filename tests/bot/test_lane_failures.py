"""A lane whose step keeps failing (issue 27: a 20 s Postgres outage gave 469 tracebacks, one
every 0.25 s per lane) rests longer after each failure and logs a traceback once per cause.
The failures are real: a claim on a SQLite database that cannot be opened."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from bot.worker.lanes import MAX_FAILURE_PAUSE, Lanes, failure_pause
from memory.queue.inbox import Inbox

WAIT = 20.0
POLL = 0.25  # PAM_POLL_SECONDS' default
FAILURES = 30  # of each cause


class FailingSteps:
    """A step that fails FAILURES times one way (the database cannot be opened), then FAILURES
    times another, then finds no work."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.calls = 0
        self.done = threading.Event()

    def __call__(self) -> bool:
        self.calls += 1
        if self.calls <= FAILURES:
            self.inbox.claim_next()  # raises: the database cannot be opened
        if self.calls <= 2 * FAILURES:
            raise RuntimeError(f"another cause, failure {self.calls}")
        self.done.set()
        return False


def test_a_failing_lane_backs_off_and_logs_each_causes_traceback_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = create_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'pam.db'}")
    steps = FailingSteps(Inbox(unreachable, 60))
    rests: list[int] = []

    def pause(failures: int) -> float:
        rests.append(failures)
        return 0.0  # the rest's length is failure_pause's (below); here only its count

    lanes = Lanes("test", 1, steps, 3600.0, pause=pause)
    with caplog.at_level(logging.INFO, logger="bot.worker.lanes"):
        lanes.start()
        try:
            assert steps.done.wait(WAIT)
        finally:
            assert lanes.stop(time.monotonic() + WAIT)

    assert rests == list(range(1, 2 * FAILURES + 1)), "a rest after every failure, growing"
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert [type(r.exc_info[1]).__name__ for r in tracebacks if r.exc_info] == [
        "OperationalError",
        "RuntimeError",
    ]
    failed_again = [r for r in caplog.records if "failed again" in r.getMessage()]
    assert len(failed_again) == 2 * FAILURES - 2
    assert "works again after 60 failures" in caplog.records[-1].getMessage()
    unreachable.dispose()


def test_a_twenty_second_outage_costs_a_lane_a_few_tries() -> None:
    """The rests of failure_pause, added up on a clock of their own: a lane tries a handful
    of times in a 20 s outage (it tried 80 times), and rests no longer than the cap."""
    clock, tries = 0.0, 0
    while clock < 20.0:
        tries += 1
        clock += failure_pause(tries, POLL)
    assert tries <= 8
    assert all(failure_pause(n, POLL) <= MAX_FAILURE_PAUSE for n in range(1, 200))
    assert failure_pause(100, POLL) >= 0.75 * MAX_FAILURE_PAUSE
