"""The turn's values (bot/turn/values.py): the one request the tutor is asked with, made from an
inbox claim by the worker or from a line by the terminal; and the after-send work a turn leaves,
done only once its reply is on its way."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import Engine, update

from bot.turn.after_send import AfterSending
from bot.turn.values import AfterSend, Turn, TurnRequest
from bot.worker.answering import LLM_TURN_ATTEMPTS
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.database.models_queue import InboxItem
from memory.jobs.coordinator import FOLD, PROFILE, REVIEW
from memory.turns import Written
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import RecordingSender, inbound, queue_items
from webhooks.settings import Settings
from webhooks.wiring import build


def asked_with(pam: Pam) -> list[TurnRequest]:
    """The requests the tutor of `pam` is asked with from now on."""
    asked: list[TurnRequest] = []
    answer = pam.tutor.answer

    def recording(request: TurnRequest) -> Turn:
        asked.append(request)
        return answer(request)

    pam.tutor.answer = recording  # type: ignore[method-assign]
    return asked


def test_a_request_from_a_line_allows_nothing_the_terminal_cannot_do() -> None:
    request = TurnRequest("terminal:lena", "Hola", "lena")
    assert (request.kind, request.voice, request.inbox_id, request.learner) == (
        "text",
        None,
        None,
        None,
    )
    assert not request.can_retry and not request.can_speak
    assert request.fetcher is None and request.group is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.text = "Adiós"  # type: ignore[misc]


def test_the_worker_asks_the_tutor_with_one_request_made_from_its_claim(
    pam: Pam, engine: Engine, sender: RecordingSender
) -> None:
    user = unique_user()
    learner = pam.store.learners.learner(user, "Lena")
    worker = Worker(pam, {"test": sender})
    assert worker.inbox.accept(inbound(user, "Hola, ¿qué tal?"))
    asked = asked_with(pam)

    assert worker.answer_next()

    (item,) = queue_items(engine, InboxItem, InboxItem.address == user)
    assert asked == [
        TurnRequest(
            user,
            "Hola, ¿qué tal?",
            kind="text",
            inbox_id=item.id,
            learner=learner,  # read with the claim: the turn looks nobody up again
            can_retry=True,  # the first attempt: a failed model call is tried again later
        )
    ]
    assert sender.calls, "answered"


def test_the_last_attempt_asks_for_an_answer_come_what_may(
    pam: Pam, engine: Engine, sender: RecordingSender
) -> None:
    user = unique_user()
    worker = Worker(pam, {"test": sender})
    assert worker.inbox.accept(inbound(user, "Hola"))
    with engine.begin() as connection:  # tried before, as often as a failing model allows
        connection.execute(
            update(InboxItem)
            .where(InboxItem.address == user)
            .values(attempts=LLM_TURN_ATTEMPTS - 1)
        )
    asked = asked_with(pam)

    assert worker.answer_next()

    assert [request.can_retry for request in asked] == [False]


class Recorder:
    """A job runner that notes what it is asked to do, in order."""

    def __init__(self) -> None:
        self.done: list[object] = []

    def request(self, learner_id: int, kind: str) -> None:
        self.done.append(("asked", learner_id, kind))

    def marked(self, learner_id: int, kind: str) -> None:
        self.done.append(("started", learner_id, kind))


def test_after_send_starts_the_jobs_the_write_asked_for_then_asks_for_the_others() -> None:
    recorder = Recorder()
    after = AfterSending(recorder)  # type: ignore[arg-type]
    work = AfterSend(memory_jobs=(FOLD,))
    written = Written([], due=(PROFILE,), marked=(REVIEW,))
    after.run(Turn(["¡Hola!"], 7, after_send=work.and_written(written)))
    assert recorder.done == [("started", 7, REVIEW), ("asked", 7, FOLD), ("asked", 7, PROFILE)]
    assert work.memory_jobs == (FOLD,)  # a value: adding the write's jobs made a new one


def test_a_local_turn_leaves_its_after_send_work_to_the_caller(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = build(
        settings.replace(memory={"profile_every": 1}),
        model=fake_model,
        submit=lambda work: work(),
        engine=engine,
    )
    turns, user = pam.local_turns(), unique_user()

    turn = turns.reply(TurnRequest(user, "Trabajo de enfermera en Bremen"))

    assert turn.reply is not None and turn.after_send.memory_jobs == (PROFILE,)
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    assert [m.role for m in pam.store.conversation.messages(learner.id)] == ["learner", "pam"]
    assert fake_model.of("profile") == []  # nothing runs before the reply is shown
    turns.after_send(turn)
    assert len(fake_model.of("profile")) == 1
