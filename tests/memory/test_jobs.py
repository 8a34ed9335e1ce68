"""Job coordination through the database: one run at a time, reruns, failures, leases, forget."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from memory.clock import ManualClock, utcnow
from memory.database import db
from memory.database.models import MemoryJob
from memory.database.records import LearnerGone
from memory.jobs.coordinator import (
    FOLD,
    PROFILE,
    RETRY_AFTER_FAILURE,
    Coordinator,
    Finish,
    JobRunner,
    Submit,
)
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.fakes import ManualExecutor

WAIT = 20.0  # a safety bound for joins and events, never an expectation about speed


@dataclass
class JobState:
    """A job's row in `memory_jobs`, as plain values."""

    running: bool
    dirty: bool
    claim_token: str | None
    runs: int
    failures: int
    last_error: str | None


def job_row(engine: Engine, learner_id: int, kind: str) -> JobState | None:
    with engine.connect() as connection:
        row = connection.execute(
            select(
                MemoryJob.running,
                MemoryJob.dirty,
                MemoryJob.claim_token,
                MemoryJob.runs,
                MemoryJob.failures,
                MemoryJob.last_error,
            ).where(MemoryJob.learner_id == learner_id, MemoryJob.kind == kind)
        ).one_or_none()
    return JobState(*row) if row else None


# In a shared Postgres, recover() also runs other tests' leftover jobs: tests count only the
# runs for their own learner.


@dataclass
class Recorder:
    """A job that records its runs and the highest number of runs at the same time."""

    calls: list[int] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    before: Callable[[int], None] | None = None  # called inside the run, e.g. to block

    def __call__(self, learner_id: int) -> None:
        with self.lock:
            self.calls.append(learner_id)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            run = len(self.calls)
        try:
            if self.before is not None:
                self.before(run)
        finally:
            with self.lock:
                self.active -= 1


class ThreadSubmit:
    """An executor that runs every submitted job on its own thread, like a thread pool."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def __call__(self, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive()


def inline(work: Callable[[], None]) -> None:
    work()


@pytest.fixture
def second_engine(database_url: str) -> Iterator[Engine]:
    """Another engine on the same database: what a second process would have."""
    engine = db.make_engine(database_url)
    yield engine
    engine.dispose()


def runner_for(
    engine: Engine,
    job: Recorder,
    submit: Submit,
    lease: float = 300,
    clock: ManualClock | None = None,
) -> JobRunner:
    coordinator = Coordinator(engine, lease, clock or utcnow)
    return JobRunner(coordinator, {FOLD: job, PROFILE: job}, submit)


# -- the basics ---------------------------------------------------------------------------


def test_a_request_runs_the_job_once_and_releases_it(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    job = Recorder()
    runner = runner_for(engine, job, inline)

    runner.request(learner.id, FOLD)

    assert job.calls == [learner.id]
    assert job_row(engine, learner.id, FOLD) == JobState(False, False, None, 1, 0, None)
    assert job_row(engine, learner.id, PROFILE) is None
    assert runner.wait_idle(0)


def test_an_unknown_kind_is_refused(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    runner = JobRunner(Coordinator(engine, 300), {FOLD: Recorder()}, inline)
    with pytest.raises(ValueError, match="unknown job kind"):
        runner.request(learner.id, PROFILE)
    assert job_row(engine, learner.id, PROFILE) is None


def test_claim_needs_a_request_and_excludes_a_second_claim(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    coordinator = Coordinator(engine, 300)
    assert coordinator.claim(learner.id, FOLD) is None  # nobody asked
    assert coordinator.mark(learner.id, FOLD)
    token = coordinator.claim(learner.id, FOLD)
    assert token is not None
    assert coordinator.mark(learner.id, FOLD)  # asked again while running
    assert coordinator.claim(learner.id, FOLD) is None  # ...but nobody else may run it
    assert coordinator.finish(learner.id, FOLD, token) is Finish.AGAIN
    assert coordinator.finish(learner.id, FOLD, token) is Finish.DONE
    assert coordinator.claim(learner.id, FOLD) is None


def test_kinds_and_learners_are_coordinated_separately(store: Store, engine: Engine) -> None:
    lena = store.learners.learner(unique_user("lena"))
    omar = store.learners.learner(unique_user("omar"))
    job = Recorder()
    executor = ManualExecutor()
    runner = runner_for(engine, job, executor)
    runner.request(lena.id, FOLD)
    runner.request(lena.id, PROFILE)
    runner.request(omar.id, FOLD)
    assert len(executor.pending) == 3  # none waits for another
    executor.run_all()
    assert sorted(job.calls) == sorted([lena.id, lena.id, omar.id])


# -- at most one run, and no trigger lost -------------------------------------------------


def test_requests_during_a_run_cause_exactly_one_rerun(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    executor = ManualExecutor()
    job = Recorder()
    runner = runner_for(engine, job, executor)

    def trigger_during_first_run(run: int) -> None:
        if run == 1:
            for _ in range(3):
                runner.request(learner.id, FOLD)
            assert executor.pending == []  # no second run was started

    job.before = trigger_during_first_run
    runner.request(learner.id, FOLD)
    runner.request(learner.id, FOLD)  # claimed but not yet running: coalesces too
    assert len(executor.pending) == 1

    assert executor.run_all() == 1
    assert job.calls == [learner.id, learner.id]
    assert job.max_active == 1
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    # One claim and one renewal: two runs.
    assert (state.running, state.dirty, state.claim_token, state.runs) == (False, False, None, 2)


def test_a_request_while_a_thread_runs_the_job_reruns_it_afterwards(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    started, release = threading.Event(), threading.Event()
    job = Recorder()

    def block_first_run(run: int) -> None:
        if run == 1:
            started.set()
            assert release.wait(WAIT)

    job.before = block_first_run
    submit = ThreadSubmit()
    runner = runner_for(engine, job, submit)

    runner.request(learner.id, FOLD)
    assert started.wait(WAIT)
    runner.request(learner.id, FOLD)
    runner.request(learner.id, FOLD)
    assert len(submit.threads) == 1  # no second run started
    assert not runner.wait_idle(0)
    release.set()
    assert runner.wait_idle(WAIT)
    submit.join()

    assert job.calls == [learner.id, learner.id]
    assert job.max_active == 1
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty) == (False, False)


def test_two_processes_never_run_the_same_job_at_once(
    store: Store, engine: Engine, second_engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    job = Recorder()
    executor_a, executor_b = ManualExecutor(), ManualExecutor()
    runner_a = runner_for(engine, job, executor_a)
    runner_b = runner_for(second_engine, job, executor_b)

    def b_asks_during_first_run(run: int) -> None:
        if run == 1:
            runner_b.request(learner.id, FOLD)

    job.before = b_asks_during_first_run
    runner_a.request(learner.id, FOLD)
    runner_b.request(learner.id, FOLD)
    assert (len(executor_a.pending), len(executor_b.pending)) == (1, 0)

    executor_a.run_all()
    assert executor_b.pending == []  # B's requests became A's reruns
    assert job.calls == [learner.id, learner.id]
    # Once A is done, B runs the next request itself.
    runner_b.request(learner.id, FOLD)
    assert executor_b.run_all() == 1
    assert len(job.calls) == 3


@pytest.mark.parametrize("processes", [1, 2])
def test_no_trigger_is_lost_under_concurrent_requests(
    store: Store, engine: Engine, second_engine: Engine, processes: int
) -> None:
    """Every request is followed by a run that starts after it; never two runs at once."""
    learner = store.learners.learner(unique_user())
    requested = 0
    seen: list[int] = []
    lock = threading.Lock()

    def observe(run: int) -> None:
        with lock:
            seen.append(requested)
        time.sleep(0.002)  # widen the window in which requests arrive during a run

    job = Recorder(before=observe)
    submits = [ThreadSubmit() for _ in range(processes)]
    engines = [engine, second_engine][:processes]
    runners = [runner_for(e, job, s) for e, s in zip(engines, submits, strict=True)]

    def requester(runner: JobRunner) -> None:
        nonlocal requested
        for _ in range(15):
            with lock:
                requested += 1
            runner.request(learner.id, FOLD)

    threads = [threading.Thread(target=requester, args=(runners[n % processes],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    for runner in runners:
        assert runner.wait_idle(WAIT)
    for submit in submits:
        submit.join()

    assert job.max_active == 1
    assert seen[-1] == requested == 60
    assert len(seen) <= 60
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty, state.claim_token) == (False, False, None)


# -- failures -----------------------------------------------------------------------------


def test_a_failed_job_releases_the_claim_rests_and_then_the_next_request_retries(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())

    def fail_first(run: int) -> None:
        if run == 1:
            raise RuntimeError("model timed out")

    job = Recorder(before=fail_first)
    clock = ManualClock()
    runner = runner_for(engine, job, inline, clock=clock)

    runner.request(learner.id, FOLD)  # the failure stays inside the runner

    state = job_row(engine, learner.id, FOLD)
    assert state == JobState(False, False, None, 1, 1, "RuntimeError: model timed out")
    assert runner.wait_idle(0)

    # Each run of a failing job may cost billed calls: asks during its rest are kept, not run.
    clock.advance(RETRY_AFTER_FAILURE - timedelta(seconds=1))
    runner.request(learner.id, FOLD)
    assert len(job.calls) == 1
    state = job_row(engine, learner.id, FOLD)
    assert state is not None and (state.running, state.dirty) == (False, True)

    clock.advance(timedelta(seconds=2))
    runner.request(learner.id, FOLD)
    assert len(job.calls) == 2
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    # A success clears the error: the next failure rests again, the next success does not.
    assert (state.running, state.runs, state.failures, state.last_error) == (False, 2, 1, None)


def test_a_trigger_during_a_failed_run_is_kept_for_recovery(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    job = Recorder()
    clock = ManualClock()
    runner = runner_for(engine, job, inline, clock=clock)

    def ask_then_fail(run: int) -> None:
        if run == 1:
            runner.request(learner.id, FOLD)
            raise RuntimeError("boom")

    job.before = ask_then_fail
    runner.request(learner.id, FOLD)
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty, state.failures) == (False, True, 1)

    assert (learner.id, FOLD) not in runner.coordinator.claimable(limit=10_000)  # resting
    clock.advance(RETRY_AFTER_FAILURE + timedelta(seconds=1))
    assert runner.recover() >= 1
    assert job.calls.count(learner.id) == 2
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty) == (False, False)


def test_a_submit_that_fails_gives_the_job_back(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())

    def broken_submit(work: Callable[[], None]) -> None:
        raise RuntimeError("scheduler is shut down")

    runner = runner_for(engine, Recorder(), broken_submit)
    with pytest.raises(RuntimeError):
        runner.request(learner.id, FOLD)
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty, state.claim_token) == (False, True, None)
    assert runner.wait_idle(0)


# -- leases and recovery ------------------------------------------------------------------


def test_an_expired_lease_is_recovered_by_another_runner(
    store: Store, engine: Engine, second_engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    crashed_job = Recorder()
    clock = ManualClock()
    crashed = runner_for(engine, crashed_job, ManualExecutor(), lease=60, clock=clock)
    crashed.request(learner.id, FOLD)  # claimed, then the process "dies": the work never runs
    crashed_state = job_row(engine, learner.id, FOLD)
    assert crashed_state is not None
    assert crashed_state.running
    stale_token = crashed_state.claim_token
    assert stale_token is not None

    clock.advance(timedelta(seconds=61))  # the lease runs out
    job = Recorder()
    survivor = runner_for(second_engine, job, inline, lease=300, clock=clock)
    assert survivor.recover() >= 1

    assert job.calls.count(learner.id) == 1
    assert crashed_job.calls == []
    state = job_row(engine, learner.id, FOLD)
    assert state is not None
    assert (state.running, state.dirty, state.claim_token) == (False, False, None)
    # The crashed runner coming back cannot release or renew a claim that is no longer its own.
    assert Coordinator(engine, 300).finish(learner.id, FOLD, stale_token) is Finish.LOST


def test_a_live_lease_is_not_recovered(store: Store, engine: Engine, second_engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    busy = runner_for(engine, Recorder(), ManualExecutor(), lease=300)
    busy.request(learner.id, FOLD)
    job = Recorder()
    other = runner_for(second_engine, job, inline)
    other.recover()
    assert learner.id not in job.calls
    assert (learner.id, FOLD) not in Coordinator(engine, 300).claimable(limit=10_000)


def test_a_request_takes_over_an_expired_lease(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    clock = ManualClock()
    runner_for(engine, Recorder(), ManualExecutor(), lease=60, clock=clock).request(
        learner.id, FOLD
    )
    clock.advance(timedelta(seconds=61))
    job = Recorder()
    runner_for(engine, job, inline, clock=clock).request(learner.id, FOLD)
    assert job.calls == [learner.id]


# -- forget -------------------------------------------------------------------------------


def test_finish_after_forget_is_lost_and_writes_nothing(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    coordinator = Coordinator(engine, 300)
    assert coordinator.mark(learner.id, FOLD)
    token = coordinator.claim(learner.id, FOLD)
    assert token is not None

    store.learners.forget(learner.id)

    assert coordinator.finish(learner.id, FOLD, token) is Finish.LOST
    coordinator.fail(learner.id, FOLD, token, "late failure")
    coordinator.abandon(learner.id, FOLD, token)
    assert not coordinator.mark(learner.id, FOLD)
    assert job_row(engine, learner.id, FOLD) is None


def test_a_request_for_a_forgotten_learner_runs_nothing(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    job = Recorder()
    runner_for(engine, job, inline).request(learner.id, FOLD)
    assert job.calls == []
    assert store.inspection.rows_about(learner.id, learner.external_id)["memory_jobs"] == 0


def test_a_job_that_finds_its_learner_gone_ends_quietly(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())

    def forgotten_mid_run(run: int) -> None:
        store.learners.forget(learner.id)
        raise LearnerGone(learner.id)

    runner = runner_for(engine, Recorder(before=forgotten_mid_run), inline)
    runner.request(learner.id, FOLD)
    assert runner.wait_idle(0)
    assert store.inspection.rows_about(learner.id, learner.external_id)["memory_jobs"] == 0


def test_a_queued_job_for_a_forgotten_learner_writes_no_job_row(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    executor = ManualExecutor()
    job = Recorder()
    runner = runner_for(engine, job, executor)
    runner.request(learner.id, FOLD)
    store.learners.forget(learner.id)
    executor.run_all()
    assert runner.wait_idle(0)
    assert job_row(engine, learner.id, FOLD) is None


# -- handing requests to another runner (the services' memory process) --------------------


def test_a_hand_off_runner_marks_the_job_and_passes_it_on_without_running_it(
    store: Store, engine: Engine, second_engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    handed: list[tuple[int, str]] = []
    job = Recorder()

    def never_here(work: Callable[[], None]) -> None:
        raise AssertionError("a hand-off runner submits nothing")

    marking = JobRunner(
        Coordinator(engine, 300), {FOLD: job}, never_here, hand_off=lambda *r: handed.append(r)
    )
    marking.request(learner.id, FOLD)

    assert handed == [(learner.id, FOLD)]
    assert job.calls == []
    assert job_row(engine, learner.id, FOLD) == JobState(False, True, None, 0, 0, None)
    running = runner_for(second_engine, job, inline)
    assert running.start(learner.id, FOLD)
    assert job.calls == [learner.id]
    assert job_row(engine, learner.id, FOLD) == JobState(False, False, None, 1, 0, None)
    assert not running.start(learner.id, FOLD)  # nobody asked for another run


def test_a_request_handed_off_during_a_run_makes_that_run_go_again(
    store: Store, engine: Engine, second_engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    handed: list[tuple[int, str]] = []
    marking = JobRunner(
        Coordinator(engine, 300), {FOLD: Recorder()}, inline, hand_off=lambda *r: handed.append(r)
    )

    def trigger_during_first_run(run: int) -> None:
        if run == 1:
            marking.request(learner.id, FOLD)
            assert not running.start(*handed[-1])  # it runs: the hand-off only marked it

    job = Recorder(before=trigger_during_first_run)
    running = runner_for(second_engine, job, inline)
    marking.request(learner.id, FOLD)
    assert running.start(*handed[0])
    assert job.calls == [learner.id, learner.id]
    assert job.max_active == 1
    assert job_row(engine, learner.id, FOLD) == JobState(False, False, None, 2, 0, None)


def test_a_hand_off_for_a_forgotten_learner_passes_nothing_on(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    handed: list[tuple[int, str]] = []
    marking = JobRunner(
        Coordinator(engine, 300), {FOLD: Recorder()}, inline, hand_off=lambda *r: handed.append(r)
    )
    marking.request(learner.id, FOLD)
    assert handed == []


# -- shutdown -----------------------------------------------------------------------------


def test_wait_idle_reports_whether_jobs_are_still_running(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    executor = ManualExecutor()
    runner = runner_for(engine, Recorder(), executor)
    assert runner.wait_idle(0)
    runner.request(learner.id, FOLD)
    runner.request(learner.id, PROFILE)
    assert not runner.wait_idle(0)
    executor.run_all()
    assert runner.wait_idle(0)


def test_abandoned_jobs_are_handed_back_and_resumed_by_the_next_start(
    store: Store, engine: Engine, second_engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    executor = ManualExecutor()
    stopping = runner_for(engine, Recorder(), executor)
    stopping.request(learner.id, FOLD)
    stopping.request(learner.id, PROFILE)

    assert stopping.abandon_active() == 2
    assert stopping.wait_idle(0)
    for kind in (FOLD, PROFILE):
        state = job_row(engine, learner.id, kind)
        assert state is not None
        assert (state.running, state.dirty, state.claim_token) == (False, True, None)

    job = Recorder()
    next_start = runner_for(second_engine, job, inline)
    assert next_start.recover() >= 2
    assert job.calls.count(learner.id) == 2
    for kind in (FOLD, PROFILE):
        state = job_row(engine, learner.id, kind)
        assert state is not None
        assert (state.running, state.dirty) == (False, False)


def test_a_live_run_that_outlasts_its_lease_is_not_run_twice(store: Store, engine: Engine) -> None:
    """BUG: the lease is set at claim time and never renewed while the job runs, so a runner that
    is alive but slow (a fold job takes up to MAX_FOLDS_PER_RUN LLM calls, each up to the LLM
    timeout times its retries, easily past the 300 s default lease with a slow local model)
    looks crashed: the next request, or recover(), starts a second run of the same job for the
    same learner while the first still runs."""
    lease = 0.3
    learner = store.learners.learner(unique_user())
    started, release = threading.Event(), threading.Event()

    def slow_first_run(run: int) -> None:
        if run == 1:
            started.set()
            assert release.wait(WAIT)

    job = Recorder(before=slow_first_run)
    submit = ThreadSubmit()
    runner = runner_for(engine, job, submit, lease=lease)
    runner.request(learner.id, FOLD)
    assert started.wait(WAIT)
    try:
        time.sleep(lease * 3)  # the runner is alive, just slow (state only; no timing asserted)
        runner.request(learner.id, FOLD)  # a new trigger: must become a rerun, not a 2nd run
        started_runs = len(submit.threads)
    finally:
        release.set()
        assert runner.wait_idle(WAIT)
        submit.join()

    assert started_runs == 1
    assert job.max_active == 1
    assert job.calls.count(learner.id) == 2  # the first run, then one rerun for the trigger
