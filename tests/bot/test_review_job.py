"""The review job (issue 30): a turn's grades are written with its reply (review_pending, in
the reply's own write, with the ask for the job) and graded by the "review" memory job, off
the reply lanes. It grades each turn once however often it runs, after a crash between the
reply's write and the job too, and /forget racing it leaves nothing behind."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from bot import phrases
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.database.models_review import ReviewLog, ReviewPending
from memory.jobs.coordinator import REVIEW, Coordinator
from memory.review import reviews
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel, ManualExecutor, reply_json
from tests.support import forget, handle
from webhooks.settings import Settings
from webhooks.wiring import build

WAIT = 20.0  # a safety bound for joins and events, never an expectation about speed
YO_ES = {"original": "yo es", "corrected": "yo soy", "explanation": "ser", "rule": "ser: soy"}


def pending(engine: Engine, learner_id: int) -> int:
    """How many of the learner's turns wait for the review job."""
    with engine.connect() as connection:
        count = connection.scalar(
            select(func.count())
            .select_from(ReviewPending)
            .where(ReviewPending.learner_id == learner_id)
        )
    return int(count or 0)


def logs(engine: Engine, learner_id: int) -> list[tuple[int | None, str]]:
    """The learner's grades: (learner message, source), in order."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(ReviewLog.message_id, ReviewLog.source)
            .where(ReviewLog.learner_id == learner_id)
            .order_by(ReviewLog.id)
        )
        return [(row.message_id, row.source) for row in rows]


def review_job(pam: Pam, learner_id: int) -> dict[str, Any]:
    [job] = [j for j in pam.store.inspection.job_states(learner_id) if j["kind"] == REVIEW]
    return job


@pytest.fixture
def executor() -> ManualExecutor:
    return ManualExecutor()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def later(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    executor: ManualExecutor,
    clock: ManualClock,
) -> Pam:
    """Pam whose memory jobs wait for `executor.run_all()`."""
    return build(settings, model=fake_model, submit=executor, engine=engine, clock=clock)


def corrected_turn(pam: Pam, fake_model: FakeChatModel, user: str, text: str) -> None:
    fake_model.queue("reply", reply_json("¡Hola!", [YO_ES | {"original": text}]))
    handle(pam, user, text)


def test_a_corrected_turn_ends_with_its_grades_written_by_the_review_job(
    later: Pam, engine: Engine, fake_model: FakeChatModel, executor: ManualExecutor
) -> None:
    user = unique_user()
    corrected_turn(later, fake_model, user, "yo es Lena")
    learner = learner_of(later, user)
    # Written with the reply: the grades to come and the ask for the job; nothing graded.
    assert pending(engine, learner.id) == 1
    assert review_job(later, learner.id)["dirty"] is True
    assert logs(engine, learner.id) == []

    assert executor.run_all() == 2  # the job's start, then its run
    [message] = [m.id for m in later.store.conversation.messages(learner.id) if m.role == "learner"]
    assert logs(engine, learner.id) == [(message, "mistake")]
    assert pending(engine, learner.id) == 0
    job = review_job(later, learner.id)
    assert (job["running"], job["dirty"], job["runs"], job["failures"]) == (False, False, 1, 0)


def test_turns_left_before_the_job_runs_are_graded_in_order_in_one_run(
    later: Pam, engine: Engine, fake_model: FakeChatModel, executor: ManualExecutor
) -> None:
    user = unique_user()
    for text in ("yo es Lena", "yo es enfermera", "yo es de Bremen"):
        corrected_turn(later, fake_model, user, text)
    learner = learner_of(later, user)
    assert pending(engine, learner.id) == 3
    executor.run_all()
    theirs = [m.id for m in later.store.conversation.messages(learner.id) if m.role == "learner"]
    assert logs(engine, learner.id) == [(m, "mistake") for m in theirs]
    [pattern] = later.store.reviews.patterns(learner.id)
    assert pattern.mistakes == 3
    assert review_job(later, learner.id)["runs"] == 1  # asked for thrice, run once


def test_the_review_job_run_again_grades_nothing_twice(
    later: Pam, engine: Engine, fake_model: FakeChatModel, executor: ManualExecutor
) -> None:
    user = unique_user()
    corrected_turn(later, fake_model, user, "yo es Lena")
    learner = learner_of(later, user)
    executor.run_all()
    graded = logs(engine, learner.id)
    assert later.store.reviews.record_pending(learner.id) == 0
    later.runner.request(learner.id, REVIEW)
    executor.run_all()
    assert logs(engine, learner.id) == graded
    [pattern] = later.store.reviews.patterns(learner.id)
    assert pattern.mistakes == 1


def test_a_crash_between_the_reply_write_and_the_job_loses_no_grade(
    settings: Settings,
    later: Pam,
    engine: Engine,
    fake_model: FakeChatModel,
    executor: ManualExecutor,
    clock: ManualClock,
) -> None:
    """The reply was written and sent, and the worker died before the job ran (its hand-off
    lost): the next start's sweep grades the turn. And a job that died mid-run (its lease
    taken, nothing committed) is run again once its lease has expired, grading once."""
    user = unique_user()
    corrected_turn(later, fake_model, user, "yo es Lena")
    learner = learner_of(later, user)
    executor.pending.clear()  # the process died: the job was never started

    restarted = build(settings, model=fake_model, submit=executor, engine=engine, clock=clock)
    # The sweep starts this learner's review job (and any other test's left in a shared
    # database: so it is asked of the job table, not of the count started).
    assert (learner.id, REVIEW) in restarted.runner.coordinator.claimable()
    assert restarted.runner.recover() >= 1
    assert (learner.id, REVIEW) not in restarted.runner.coordinator.claimable()
    executor.run_all()
    assert [source for _, source in logs(engine, learner.id)] == ["mistake"]
    assert pending(engine, learner.id) == 0

    corrected_turn(restarted, fake_model, user, "yo es enfermera")
    executor.pending.clear()
    coordinator = Coordinator(engine, settings.memory.job_lease_seconds, clock)
    assert coordinator.claim(learner.id, REVIEW) is not None  # a run that dies
    # Its lease is live: nobody takes it over.
    assert (learner.id, REVIEW) not in restarted.runner.coordinator.claimable()
    clock.advance(timedelta(seconds=settings.memory.job_lease_seconds + 1))
    assert (learner.id, REVIEW) in restarted.runner.coordinator.claimable()
    assert restarted.runner.recover() >= 1
    assert (learner.id, REVIEW) not in restarted.runner.coordinator.claimable()
    executor.run_all()
    assert [source for _, source in logs(engine, learner.id)] == ["mistake", "mistake"]
    assert pending(engine, learner.id) == 0


def test_forget_before_the_review_job_runs_leaves_nothing(
    later: Pam, engine: Engine, fake_model: FakeChatModel, executor: ManualExecutor
) -> None:
    user, bystander = unique_user(), unique_user("bystander")
    corrected_turn(later, fake_model, user, "yo es Lena")
    corrected_turn(later, fake_model, bystander, "yo es Bruno")
    learner = learner_of(later, user)
    assert forget(later, user) == [phrases.FORGOTTEN]
    executor.run_all()
    assert later.runner.wait_idle(0)
    counts = later.store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0), counts
    assert [source for _, source in logs(engine, learner_of(later, bystander).id)] == ["mistake"]


class Paused:
    """Stops the review job inside its transaction, once it has read the grades left and
    before it writes any, until `release` is set."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.read = reviews._corrections_of

    def __call__(self, session: Any, learner_id: int, message_ids: Sequence[int]) -> Any:
        found = self.read(session, learner_id, message_ids)
        self.inside.set()
        assert self.release.wait(WAIT)
        return found


def test_forget_while_the_review_job_runs_leaves_nothing(
    later: Pam,
    engine: Engine,
    fake_model: FakeChatModel,
    executor: ManualExecutor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The job has read the grades left and not written yet when /forget deletes everything:
    its writes then find the learner gone, and it ends quietly, writing nothing (nor failing:
    there is nothing to retry)."""
    user = unique_user()
    corrected_turn(later, fake_model, user, "yo es Lena")
    learner = learner_of(later, user)
    paused = Paused()
    monkeypatch.setattr(reviews, "_corrections_of", paused)
    errors: list[BaseException] = []

    def run(work: Callable[[], int]) -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    job = threading.Thread(target=run, args=(executor.run_all,), daemon=True)
    caplog.set_level(logging.INFO)
    job.start()
    assert paused.inside.wait(WAIT)

    later.store.learners.forget(learner.id)
    counts = later.store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0), counts

    paused.release.set()
    job.join(WAIT)
    assert not job.is_alive() and errors == []
    assert later.runner.wait_idle(WAIT)
    assert "failed" not in caplog.text
    counts = later.store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0), counts
