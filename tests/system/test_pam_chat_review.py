"""Review end to end through the real `pam chat` process, the loopback OpenAI server and the
real store: a mistake corrected once becomes a review item; once its turn has left the
prompt's window and the item is due, a later reply prompt carries it in its system part as
data; the learner's next message uses it correctly, the reply's report says so, and the
item is graded Good. /forget leaves no item behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from bot.review.prompt import DUE_TAG
from loopback.openai_server import OpenAIServer
from memory.clock import utcnow
from memory.database import db
from memory.database.models_review import ReviewItem, ReviewLog
from memory.review.items import USED
from memory.store.message_store import Store
from tests.system.test_pam_chat_recall import FILLER, chat, folded_out, pam_env

pytestmark = pytest.mark.slow

MISTAKE = "Yo es enfermera en Berlín."
CORRECTION = {
    "original": "Yo es",
    "corrected": "Soy",
    "explanation": "With yo, ser is soy.",
    "category": "conjugation",
    "rule": "yo es → soy",
}
USES_IT = "Soy muy feliz con mi trabajo."
REPLIES = ("¡Qué bien! ¿Y qué más?", "¡Anda! Cuéntame, ¿cómo te fue luego?")


def answer(task: str, body: dict[str, Any], count: int) -> str:
    """Replies that correct only MISTAKE, and report the due item as used when the learner's
    message uses its corrected form, as a careful model would; short summaries and profiles."""
    if task == "summary":
        return f"Summary #{count}: the learner is a nurse in Berlin."
    if task == "profile":
        return json.dumps({"who": "Lena, a nurse in Berlin"})
    latest = body["messages"][-1]["content"]
    said = [m.get("content") or "" for m in body["messages"][1:] if m["role"] == "assistant"]
    # Never its previous reply again (Pam takes a repeat for no reply): the other one.
    words = REPLIES[1] if said and said[-1].startswith(REPLIES[0]) else REPLIES[0]
    reply: dict[str, Any] = {"reply": words, "corrections": []}
    if latest == MISTAKE:
        reply["corrections"] = [CORRECTION]
    if f"<{DUE_TAG}>" in body["messages"][0]["content"]:
        reply["review"] = {"used": [1] if latest == USES_IT else [], "missed": []}
    return json.dumps(reply, ensure_ascii=False)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def _store(tmp_path: Path) -> tuple[Store, Any]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    return Store(engine), engine


def _items(tmp_path: Path) -> list[ReviewItem]:
    store, engine = _store(tmp_path)
    try:
        with store.inspection.sessions() as session:
            return list(session.scalars(select(ReviewItem)))
    finally:
        engine.dispose()


def _half_an_hour_passes(tmp_path: Path) -> None:
    """Time passes as `pam chat` sees it: the item falls due (its first learning step is half
    an hour; the process runs on the real clock, so its due date moves instead)."""
    store, engine = _store(tmp_path)
    try:
        with store.inspection.sessions.begin() as session:
            session.execute(update(ReviewItem).values(due=utcnow() - timedelta(minutes=1)))
    finally:
        engine.dispose()


def _due_part(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    return system.split(f"<{DUE_TAG}>", 1)[1] if f"<{DUE_TAG}>" in system else ""


def test_a_mistake_comes_back_once_out_of_the_window_and_the_report_grades_it(
    tmp_path: Path, server: OpenAIServer
) -> None:
    env = pam_env(tmp_path, server)
    chat("lena", ["/language Spanish English", MISTAKE], cwd=tmp_path, env=env)
    [item] = _items(tmp_path)
    assert (item.rule, item.original, item.corrected, item.mistakes) == (
        "yo es → soy",
        "Yo es",
        "Soy",
        1,
    )
    _half_an_hour_passes(tmp_path)
    first = len(server.of("reply"))
    for line in [*FILLER[:2], USES_IT]:  # one process each: its fold done when it ends
        chat("lena", [line], cwd=tmp_path, env=env)
    assert folded_out(tmp_path, "lena", MISTAKE)

    requests = server.of("reply")[first:]
    carried = [bool(_due_part(r)) for r in requests]
    shown = [MISTAKE in [m["content"] for m in r["messages"][1:]] for r in requests]
    # Due from the start, but carried only once the mistake's turn has left the window (the
    # window shows the correction already); then again for the answer to the invitation.
    assert carried == [False, True, True]
    assert shown == [True, False, False]
    for request in requests[1:]:
        assert "1. Yo es → Soy (yo es → soy)" in _due_part(request)
        assert '"review": {"used": [], "missed": []}' in request["messages"][0]["content"]
    [graded] = _items(tmp_path)
    assert (graded.successes, graded.mistakes) == (1, 1)
    assert graded.due > utcnow() + timedelta(hours=12)  # the next learning step: a day
    store, engine = _store(tmp_path)
    try:
        with store.inspection.sessions() as session:
            sources = list(session.scalars(select(ReviewLog.source).order_by(ReviewLog.id)))
    finally:
        engine.dispose()
    assert sources == ["mistake", USED]

    chat("lena", ["/forget", "yes"], cwd=tmp_path, env=env)
    assert _items(tmp_path) == []
