"""Background memory jobs, coordinated through the database so that any number of threads and
processes agree: per learner at most one job of each kind (fold, profile, review) runs at a
time, and a trigger that arrives during a run makes the job run again afterwards (running/dirty
flags with a lease)."""

from __future__ import annotations

import enum
import logging
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, or_, select, update
from sqlalchemy.exc import IntegrityError

from memory import metrics
from memory.clock import utcnow
from memory.database import db
from memory.database.backends import backend_for
from memory.database.models import MemoryJob
from memory.database.records import REVIEW_JOB, LearnerGone
from memory.queue.heartbeat import Heartbeats

log = logging.getLogger(__name__)

# A job whose last run failed rests this long before it is claimed again. Every run of a
# failing fold or profile update can cost billed calls (unusable answers are billed), and
# every turn asks for the job again: without a rest, a learner whose summary the model keeps
# botching would pay for a failed fold on every message. Asks meanwhile are kept (the job
# stays marked), so the job runs at the first ask or sweep after the rest.
RETRY_AFTER_FAILURE = timedelta(minutes=5)

FOLD = "fold"
PROFILE = "profile"
# Grading the review items by the turns' replies: the reply's write leaves the grades and
# asks for this job in the same transaction, so the reply lanes never grade.
REVIEW = REVIEW_JOB
KINDS = (FOLD, PROFILE, REVIEW)
# The jobs that call no model: a failed run stays asked for, so the sweep runs it again after
# the rest. Nothing else may ask again: a reply's grades wait in review_pending for the
# review job, and the learner's next turn may leave none.
ASKED_AFTER_FAILURE = frozenset({REVIEW})


class Finish(enum.Enum):
    DONE = "done"  # released; nobody asked for another run
    AGAIN = "again"  # a trigger arrived during the run: the claim is kept, run again
    LOST = "lost"  # the row is gone (/forget) or the lease was taken over: stop, write nothing


def _rested(now: datetime) -> Any:
    """The job did not fail last time, or failed long enough ago (RETRY_AFTER_FAILURE)."""
    return or_(MemoryJob.last_error.is_(None), MemoryJob.updated_at < now - RETRY_AFTER_FAILURE)


def _held(learner_id: int, kind: str, token: str) -> Any:
    """The job row as long as `token` still holds its claim."""
    return and_(
        MemoryJob.learner_id == learner_id,
        MemoryJob.kind == kind,
        MemoryJob.claim_token == token,
    )


class Coordinator:
    """The running/dirty/lease state of every learner's memory jobs, in the `memory_jobs` table."""

    def __init__(
        self, engine: Engine, lease_seconds: float, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.engine = engine
        self.lease = timedelta(seconds=lease_seconds)
        self.single = db.autocommit(engine)
        self.backend = backend_for(engine)
        self.clock = clock  # tests pass their own, and advance it instead of sleeping

    def mark(self, learner_id: int, kind: str) -> bool:
        """Ask for a run of `kind` for the learner. False if the learner no longer exists."""
        values = {"learner_id": learner_id, "kind": kind, "running": False, "dirty": True}
        statement = self.backend.mark_job(values | {"runs": 0, "failures": 0}, {"dirty": True})
        try:
            with self.single.begin() as connection:  # one statement
                connection.execute(statement)
        except IntegrityError:  # the learner was forgotten: nothing to do
            return False
        return True

    def claim(self, learner_id: int, kind: str) -> str | None:
        """Take the job if it was asked for and nobody holds a live lease. The claim token, or
        None when someone else runs it (they will see the dirty flag and run again)."""
        token = str(uuid.uuid4())
        now = self.clock()
        with self.single.begin() as connection:  # one statement
            result = connection.execute(
                update(MemoryJob)
                .where(
                    MemoryJob.learner_id == learner_id,
                    MemoryJob.kind == kind,
                    MemoryJob.dirty.is_(True),
                    or_(MemoryJob.running.is_(False), MemoryJob.lease_expires_at < now),
                    _rested(now),
                )
                .values(
                    running=True,
                    dirty=False,
                    claim_token=token,
                    lease_expires_at=now + self.lease,
                    runs=MemoryJob.runs + 1,
                    updated_at=now,
                )
            )
        return token if result.rowcount else None

    def finish(self, learner_id: int, kind: str, token: str) -> Finish:
        """End a successful run: release the job, or keep it for another run if it was asked
        for meanwhile."""
        now = self.clock()
        mine = _held(learner_id, kind, token)
        with self.engine.begin() as connection:
            released = connection.execute(
                update(MemoryJob)
                .where(mine, MemoryJob.dirty.is_(False))
                .values(
                    running=False,
                    claim_token=None,
                    lease_expires_at=None,
                    last_error=None,
                    updated_at=now,
                )
            )
            if released.rowcount:
                return Finish.DONE
            renewed = connection.execute(
                update(MemoryJob)
                .where(mine)
                .values(
                    dirty=False,
                    lease_expires_at=now + self.lease,
                    runs=MemoryJob.runs + 1,
                    last_error=None,
                    updated_at=now,
                )
            )
        return Finish.AGAIN if renewed.rowcount else Finish.LOST

    def renew(self, learner_id: int, kind: str, token: str) -> bool:
        """Extend a running job's lease (its runner is alive). False if the claim is gone."""
        now = self.clock()
        with self.engine.begin() as connection:
            result = connection.execute(
                update(MemoryJob)
                .where(_held(learner_id, kind, token))
                .values(lease_expires_at=now + self.lease, updated_at=now)
            )
        return bool(result.rowcount)

    def fail(self, learner_id: int, kind: str, token: str, error: str) -> None:
        """End a failed run: release the job; the next trigger tries again (for the kinds
        ASKED_AFTER_FAILURE, the sweep after the rest)."""
        again = {"dirty": True} if kind in ASKED_AFTER_FAILURE else {}
        with self.engine.begin() as connection:
            connection.execute(
                update(MemoryJob)
                .where(_held(learner_id, kind, token))
                .values(
                    running=False,
                    claim_token=None,
                    lease_expires_at=None,
                    failures=MemoryJob.failures + 1,
                    last_error=error[:300],
                    updated_at=self.clock(),
                    **again,
                )
            )

    def abandon(self, learner_id: int, kind: str, token: str) -> None:
        """Give a claimed job back unfinished (shutting down), asking for another run."""
        with self.engine.begin() as connection:
            connection.execute(
                update(MemoryJob)
                .where(_held(learner_id, kind, token))
                .values(running=False, dirty=True, claim_token=None, lease_expires_at=None)
            )

    def claimable(self, limit: int = 100) -> list[tuple[int, str]]:
        """Jobs asked for and not running, or whose runner's lease expired (it crashed)."""
        now = self.clock()
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(MemoryJob.learner_id, MemoryJob.kind)
                .where(
                    MemoryJob.dirty.is_(True) | MemoryJob.running.is_(True),
                    or_(MemoryJob.running.is_(False), MemoryJob.lease_expires_at < now),
                    _rested(now),
                    MemoryJob.kind.in_(KINDS),
                )
                .order_by(MemoryJob.updated_at, MemoryJob.learner_id)
                .limit(limit)
            )
            return [(int(row.learner_id), str(row.kind)) for row in rows]

    def expire_lease_for_recovery(self, learner_id: int, kind: str) -> None:
        """Mark a job whose runner died as asked-for again, so the next claim reruns it."""
        with self.engine.begin() as connection:
            connection.execute(
                update(MemoryJob)
                .where(
                    MemoryJob.learner_id == learner_id,
                    MemoryJob.kind == kind,
                    MemoryJob.running.is_(True),
                    MemoryJob.lease_expires_at < self.clock(),
                )
                .values(dirty=True)
            )


Job = Callable[[int], None]
Submit = Callable[[Callable[[], None]], None]
HandOff = Callable[[int, str], None]


class JobRunner:
    """Runs memory jobs on request without blocking the caller: `submit` hands the work to an
    executor (APScheduler's thread pool in production, inline or a queue in tests).

    With `hand_off`, a request is only marked here and then passed on to another runner that
    starts it (the services' memory process, see bot/worker/memory_process.py); the mark is the
    durable part, so a hand-off that gets lost only delays the job until that runner's next
    `recover`."""

    def __init__(
        self,
        coordinator: Coordinator,
        jobs: dict[str, Job],
        submit: Submit,
        hand_off: HandOff | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.jobs = jobs
        self.submit = submit
        self.hand_off = hand_off
        self._active: dict[str, tuple[int, str]] = {}
        self._starting = 0  # `marked` jobs given to the executor, not claimed yet
        self._idle = threading.Condition()
        # A running job's lease stays live while it runs, however slow: every job's on one
        # thread.
        self._leases = Heartbeats("pam-job-leases")

    def request(self, learner_id: int, kind: str) -> None:
        """Ask for a run of `kind`; start it (or hand it off) unless one is running (which
        will then rerun)."""
        if kind not in self.jobs:
            raise ValueError(f"unknown job kind {kind!r}")
        if not self.coordinator.mark(learner_id, kind):
            return
        if self.hand_off is not None:
            self.hand_off(learner_id, kind)
        else:
            self.start(learner_id, kind)

    def marked(self, learner_id: int, kind: str) -> None:
        """Start a job its caller asked for in a write of its own (the reply's write asks for
        the review job): hand it off, or start it on the executor, so that the caller's
        thread runs no statement for it."""
        if kind not in self.jobs:
            raise ValueError(f"unknown job kind {kind!r}")
        if self.hand_off is not None:
            self.hand_off(learner_id, kind)
            return
        with self._idle:
            self._starting += 1  # `wait_idle` waits for it too

        def start() -> None:
            try:
                self.start(learner_id, kind)
            finally:
                self._started()

        try:
            self.submit(start)
        except BaseException:
            self._started()  # still asked for in the database: the next sweep starts it
            raise

    def _started(self) -> None:
        with self._idle:
            self._starting -= 1
            self._idle.notify_all()

    def recover(self) -> int:
        """Start every job that was asked for but is not running, or whose runner died.
        Returns how many were started."""
        started = 0
        for learner_id, kind in self.coordinator.claimable():
            if kind in self.jobs:
                self.coordinator.expire_lease_for_recovery(learner_id, kind)
                started += self.start(learner_id, kind)
        return started

    def start(self, learner_id: int, kind: str) -> bool:
        """Start a job that was asked for (marked), unless it runs already or nobody asked.
        True if this runner claimed it and submitted it."""
        if kind not in self.jobs:
            raise ValueError(f"unknown job kind {kind!r}")
        token = self.coordinator.claim(learner_id, kind)
        if token is None:
            return False
        with self._idle:
            self._active[token] = (learner_id, kind)
        try:
            self.submit(lambda: self._run(learner_id, kind, token))
        except BaseException:
            self._release(token)
            self.coordinator.abandon(learner_id, kind, token)
            raise
        return True

    def _run(self, learner_id: int, kind: str, token: str) -> None:
        every = self.coordinator.lease.total_seconds() / 3
        try:
            with self._leases.beat(every, lambda: self.coordinator.renew(learner_id, kind, token)):
                self._run_until_done(learner_id, kind, token)
        finally:
            self._release(token)

    def _run_until_done(self, learner_id: int, kind: str, token: str) -> None:
        while True:
            try:
                self.jobs[kind](learner_id)
            except LearnerGone:
                return  # forgotten: the job rows are gone too, nothing to release
            except Exception as exc:
                log.warning(
                    "memory job %s failed for learner %s: %s",
                    kind,
                    learner_id,
                    type(exc).__name__,
                )
                self.coordinator.fail(learner_id, kind, token, f"{type(exc).__name__}: {exc}")
                metrics.count_job(kind, failed=True)
                return
            metrics.count_job(kind, failed=False)
            if self.coordinator.finish(learner_id, kind, token) is not Finish.AGAIN:
                return

    def _release(self, token: str) -> None:
        with self._idle:
            self._active.pop(token, None)
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for running jobs to finish. True if none is left."""
        with self._idle:
            return self._idle.wait_for(
                lambda: not (self._active or self._starting), timeout=timeout
            )

    def abandon_active(self) -> int:
        """Hand every job still running back to the database as asked-for (at shutdown), so
        the next start picks it up at once. Returns how many there were."""
        with self._idle:
            active = dict(self._active)
            self._active.clear()
        for token, (learner_id, kind) in active.items():
            self.coordinator.abandon(learner_id, kind, token)
        return len(active)
