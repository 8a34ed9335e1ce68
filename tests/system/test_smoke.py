"""A first end-to-end check through the assembled core with the fake model."""

from __future__ import annotations

from bot.worker.runtime import Pam
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import handle


def test_a_turn_answers_and_stores_both_messages(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    answers = handle(pam, user, "Hola, yo es Lena")
    assert answers == ["¡Qué bien! ¿Y qué más hiciste?"]
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    assert [m.role for m in pam.store.conversation.messages(learner.id)] == ["learner", "pam"]
