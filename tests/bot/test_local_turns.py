"""Turns taken without the inbox (bot/turn/local_turns.py): `pam chat`'s /profile shows what
the learning its earlier turns started has found, though that runs in the background."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from sqlalchemy import Engine

from bot.turn.values import TurnRequest
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from webhooks.settings import Settings
from webhooks.wiring import build


def test_profile_waits_for_the_learning_under_way(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    started: list[threading.Timer] = []

    def later(work: Callable[[], None]) -> None:
        """A memory job run in the background, a little after it was asked for."""
        timer = threading.Timer(0.5, work)
        started.append(timer)
        timer.start()

    pam = build(settings, model=fake_model, submit=later, engine=engine)
    fake_model.queue("profile", json.dumps({"who": "Lena, a nurse from Berlin"}))
    turns, user = pam.local_turns(), unique_user()
    for i in range(5):  # the profile is learned every 5 learner messages
        fake_model.queue("reply", reply_json(f"¡Qué bien! {i}"))
        turns.take(TurnRequest(user, f"Soy Lena, soy enfermera en Berlín ({i})"))
    assert started, "the fifth message started the learning"

    answer = turns.reply(TurnRequest(user, "/profile"))

    assert "Lena, a nurse from Berlin" in answer.replies[0]
    for timer in started:
        timer.join()
