"""Concurrent learners: one learner's words never reach another learner's prompt or memory."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine

from bot.worker.runtime import Pam
from memory.database.records import LEARNER
from memory.llm import ChatMessage
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, fresh_ending, reply_json
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

LEARNERS = 6
MESSAGES = 8


def found_in(text: str, markers: Sequence[str]) -> list[str]:
    """The markers that occur in `text`."""
    return sorted(m for m in markers if m in text)


def echoing_model(markers: Sequence[str]) -> FakeChatModel:
    """A fake whose every answer repeats the markers it was shown, so a leak into one prompt
    would also spread into replies, summaries and profiles, where the checks below find it."""

    def seen(messages: Sequence[ChatMessage]) -> list[str]:
        return found_in("\n".join(m["content"] for m in messages), markers)

    def reply(messages: Sequence[ChatMessage]) -> str:
        found = " ".join(seen(messages))
        return reply_json(f"¡Qué interesante! Eco: {found} {fresh_ending(messages)}")

    def summary(messages: Sequence[ChatMessage]) -> str:
        return "The learner talked about " + " ".join(seen(messages))

    def profile(messages: Sequence[ChatMessage]) -> str:
        found = seen(messages)
        return json.dumps({"misc": found}) if found else '{"no_change": true}'

    model = FakeChatModel()
    answers: dict[str, Callable[[Sequence[ChatMessage]], str]] = {
        "reply": reply,
        "summary": summary,
        "profile": profile,
    }
    model.defaults.update(answers)
    return model


@pytest.mark.parametrize("jobs", ["inline", "scheduler"])
def test_concurrent_learners_stay_isolated(database_url: str, engine: Engine, jobs: str) -> None:
    markers = [f"mark{i}x{uuid.uuid4().hex[:8]}" for i in range(LEARNERS)]
    users = [unique_user(f"iso{i}") for i in range(LEARNERS)]
    model = echoing_model(markers)
    settings = Settings(
        database_url=database_url,
        llm={"api_key": "test-key"},
        memory={"summary_trigger_tokens": 30, "profile_every": 3},
    )
    if jobs == "inline":
        pam: Pam = build(settings, model=model, submit=lambda work: work(), engine=engine)
    else:
        pam = build(settings, model=model, engine=engine)
        assert pam.scheduler is not None
        pam.scheduler.start()
    start = threading.Barrier(LEARNERS)

    def converse(i: int) -> list[list[str]]:
        start.wait()
        return [
            handle(pam, users[i], f"Mensaje {n}: hoy hablé de {markers[i]} con mi amiga")
            for n in range(MESSAGES)
        ]

    try:
        with ThreadPoolExecutor(max_workers=LEARNERS) as pool:
            answers = list(pool.map(converse, range(LEARNERS)))
    finally:
        if jobs == "scheduler":
            assert pam.close(30)

    assert all(len(a) == 1 for per_learner in answers for a in per_learner)
    purposes = {call.purpose for call in model.calls}
    assert purposes == {"reply", "summary", "profile"}, "memory jobs must have run too"
    for call in model.calls:
        assert len(found_in(call.text, markers)) <= 1, (call.purpose, found_in(call.text, markers))

    for i, user in enumerate(users):
        info = pam.store.learners.find_learner(user)
        assert info is not None
        own = [markers[i]]
        messages = pam.store.conversation.messages(info.id)
        assert len(messages) == 2 * MESSAGES
        assert [m.content for m in messages if m.role == LEARNER] == [
            f"Mensaje {n}: hoy hablé de {markers[i]} con mi amiga" for n in range(MESSAGES)
        ]
        for message in messages:
            assert found_in(message.content, markers) == own
        summary = pam.store.memory.summary(info.id)
        assert summary.folds >= 1
        assert found_in(summary.text, markers) == own
        profile = pam.store.memory.profile(info.id)
        assert profile.data.get("misc") == own
        for answer in answers[i]:
            assert found_in(answer[0], markers) == own
