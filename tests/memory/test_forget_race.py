"""/forget racing running memory jobs: a job that was running when /forget came writes nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest
from sqlalchemy import Engine

from bot import phrases
from bot.worker.runtime import Pam
from memory.database.records import LEARNER, PAM, LearnerInfo
from memory.jobs.coordinator import FOLD, PROFILE
from memory.llm import ChatMessage, Purpose
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, Gate, ManualExecutor
from tests.support import forget, handle
from webhooks.settings import Settings
from webhooks.wiring import build

WAIT = 20.0  # a safety bound for joins and events, never an expectation about speed


class Worker(threading.Thread):
    """A thread that keeps the exception its target raised, for the test to check."""

    def __init__(self, target: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.work = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:
            self.error = exc

    def wait_for(self, event: threading.Event) -> None:
        """Wait until `event` is set; fail with this thread's error if it ended first."""
        for _ in range(int(WAIT * 20)):
            if event.wait(0.05):
                return
            if not self.is_alive():
                raise AssertionError(f"the job ended before the model was called: {self.error!r}")
        raise AssertionError("the model was never called")

    def finish(self) -> None:
        self.join(WAIT)
        assert not self.is_alive()
        assert self.error is None, repr(self.error)


def _due_for_both_jobs(store: Store, learner_id: int) -> None:
    """Enough conversation for both jobs: 16 messages of 300 tokens (a fold is due: a batch
    of 6 beyond the window) of which 8 are the learner's (the profile job has something to
    read)."""
    for n in range(16):
        role = LEARNER if n % 2 == 0 else PAM
        store.conversation.add_message(
            learner_id, role, f"Soy Lena, enfermera en Bremen ({n})", 300
        )


def _nothing_about(store: Store, learner: LearnerInfo) -> None:
    counts = store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0), counts


@pytest.mark.parametrize("kind", [FOLD, PROFILE])
@pytest.mark.parametrize("via", ["command", "store"])
def test_a_job_running_during_forget_writes_nothing_back(
    pam: Pam, fake_model: FakeChatModel, kind: str, via: str
) -> None:
    user = unique_user()
    learner = pam.store.learners.learner(user)
    _due_for_both_jobs(pam.store, learner.id)
    purpose: Purpose = "summary" if kind == FOLD else "profile"
    gate = Gate("Lena is a nurse." if kind == FOLD else '{"who": "Lena, nurse in Bremen"}')
    fake_model.queue(purpose, gate)

    job = Worker(lambda: pam.runner.request(learner.id, kind))
    job.start()
    job.wait_for(gate.called)

    if via == "command":
        assert forget(pam, user) == [phrases.FORGOTTEN]
    else:
        pam.store.learners.forget(learner.id)
    _nothing_about(pam.store, learner)

    gate.release.set()
    job.finish()

    assert pam.runner.wait_idle(WAIT)
    _nothing_about(pam.store, learner)
    assert len(fake_model.of(purpose)) == 1  # the job did run, and was not retried


def test_fold_and_profile_both_running_during_forget_write_nothing(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = unique_user()
    learner = pam.store.learners.learner(user)
    _due_for_both_jobs(pam.store, learner.id)
    fold_gate, profile_gate = Gate("A summary."), Gate('{"interests": ["chess"]}')
    fake_model.queue("summary", fold_gate)
    fake_model.queue("profile", profile_gate)
    jobs = [
        Worker(lambda: pam.runner.request(learner.id, FOLD)),
        Worker(lambda: pam.runner.request(learner.id, PROFILE)),
    ]
    for job in jobs:
        job.start()
    jobs[0].wait_for(fold_gate.called)
    jobs[1].wait_for(profile_gate.called)

    assert forget(pam, user) == [phrases.FORGOTTEN]
    fold_gate.release.set()
    profile_gate.release.set()
    for job in jobs:
        job.finish()

    _nothing_about(pam.store, learner)


@pytest.mark.parametrize("kind", [FOLD, PROFILE])
def test_forget_between_the_answer_and_the_write_writes_nothing(
    pam: Pam, fake_model: FakeChatModel, kind: str
) -> None:
    """The tightest spot: the model has answered, the job is about to record and save."""
    learner = pam.store.learners.learner(unique_user())
    _due_for_both_jobs(pam.store, learner.id)

    def forget_then_answer(messages: Sequence[ChatMessage]) -> str:
        pam.store.learners.forget(learner.id)
        return "A summary." if kind == FOLD else '{"who": "Lena"}'

    purpose: Purpose = "summary" if kind == FOLD else "profile"
    fake_model.queue(purpose, forget_then_answer)
    pam.runner.request(learner.id, kind)
    _nothing_about(pam.store, learner)


def test_queued_jobs_for_a_forgotten_learner_write_nothing(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    executor = ManualExecutor()
    pam = build(settings, model=fake_model, submit=executor, engine=engine)
    user = unique_user()
    learner = pam.store.learners.learner(user)
    _due_for_both_jobs(pam.store, learner.id)
    pam.runner.request(learner.id, FOLD)
    pam.runner.request(learner.id, PROFILE)
    assert len(executor.pending) == 2

    assert forget(pam, user) == [phrases.FORGOTTEN]
    executor.run_all()

    assert fake_model.calls == []
    assert pam.runner.wait_idle(0)
    _nothing_about(pam.store, learner)


def test_writing_again_during_and_after_forget_starts_fresh(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = unique_user()
    old = pam.store.learners.learner(user)
    _due_for_both_jobs(pam.store, old.id)
    gate = Gate("OLD SUMMARY: Lena is a nurse in Bremen.")
    fake_model.queue("summary", gate)
    job = Worker(lambda: pam.runner.request(old.id, FOLD))
    job.start()
    job.wait_for(gate.called)

    assert forget(pam, user) == [phrases.FORGOTTEN]
    assert handle(pam, user, "Hola, soy nueva aquí") != []  # while the old job still runs
    gate.release.set()
    job.finish()
    assert handle(pam, user, "¿Te acuerdas de mí?") != []

    new = pam.store.learners.find_learner(user)
    assert new is not None
    assert new.id > old.id
    counts = pam.store.inspection.rows_about(old.id, user)
    assert counts.pop("learners") == 1  # the new learner, under the same external id
    assert counts == dict.fromkeys(counts, 0), counts
    context = pam.store.conversation.context(new.id)
    assert context.summary.text == ""
    assert context.summary.watermark == 0
    assert context.profile.data == {}
    assert [m.content for m in context.messages if m.role == LEARNER] == [
        "Hola, soy nueva aquí",
        "¿Te acuerdas de mí?",
    ]
    assert set(pam.store.ledger.usage(new.id)) == {"reply"}
    last_prompt = fake_model.of("reply")[-1].text
    assert "Bremen" not in last_prompt
    assert "OLD SUMMARY" not in last_prompt
