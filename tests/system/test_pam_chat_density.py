"""/corrections few end to end through the real `pam chat` process, the loopback OpenAI server
and a real SQLite file: the model's answer holds three corrections, the reply shows the most
important one, and all three are stored (review drills them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.i18n import words_for
from bot.turn import density
from loopback.openai_server import OpenAIServer
from memory.database import db
from memory.database.records import FEW
from memory.store.message_store import Store
from tests.system.test_pam_chat import chat as pam_chat
from tests.system.test_pam_chat import database_url, pam_env

pytestmark = pytest.mark.slow

USER = "lena"
MESSAGE = "Ayer yo es en la plalla con mis amigo"
REPLY = "¡Qué bien! ¿Hacía calor?"
CORRECTIONS = [  # as a model lists them: a spelling slip first
    {"original": "plalla", "corrected": "playa", "explanation": "con y", "category": "spelling"},
    {
        "original": "yo es",
        "corrected": "estuve",
        "explanation": "estar, pasado",
        "category": "conjugation",
    },
    {
        "original": "mis amigo",
        "corrected": "mis amigos",
        "explanation": "plural",
        "category": "grammar",
    },
]


def answer(task: str, body: dict[str, Any], count: int) -> str:
    if task == "reply":
        return json.dumps({"reply": REPLY, "corrections": CORRECTIONS}, ensure_ascii=False)
    return "Summary: a day at the beach." if task == "summary" else '{"no_change": true}'


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def chat(lines: list[str], cwd: Path, server: OpenAIServer) -> str:
    """`pam chat --user lena` with `lines` on stdin, to completion; its stdout."""
    process, out = pam_chat(lines, cwd=cwd, env=pam_env(cwd, server))
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    return out


def test_corrections_few_shows_one_correction_and_stores_them_all(
    tmp_path: Path, server: OpenAIServer
) -> None:
    out = chat(["/language Spanish German", "/corrections few", MESSAGE], tmp_path, server)

    assert words_for("German", density.DOMAIN)(density.CHOSEN[FEW]) in out
    shown = [line for line in out.splitlines() if "✏️" in line]
    assert len(shown) == 1 and "yo es → estuve" in shown[0]  # not the spelling slip
    assert REPLY in out
    (reply,) = server.of("reply")  # the model was asked as at normal
    assert "up to three real mistakes" in reply["messages"][0]["content"]

    engine = db.make_engine(database_url(tmp_path))
    try:
        store = Store(engine)
        learner = store.learners.find_learner(f"terminal:{USER}")
        assert learner is not None and learner.corrections == FEW
        stored = store.ledger.corrections(learner.id)
        assert {c.original for c in stored} == {"plalla", "yo es", "mis amigo"}
    finally:
        engine.dispose()
