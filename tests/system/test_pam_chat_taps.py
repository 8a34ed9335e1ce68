"""Translate, Explain and Say it end to end through the real `pam chat` process, the loopback
OpenAI server and a real SQLite file: for a learner whose native language is German, /translate
and /explain each answer in German with one LLM call of their own, /say speaks the reply
(slower when asked again), and the conversation keeps none of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.i18n import words_for
from bot.turn import taps
from loopback.openai_server import OpenAIServer
from memory.database import db
from memory.database.records import PAM
from memory.store.message_store import Store
from tests.system.test_pam_chat import chat as pam_chat
from tests.system.test_pam_chat import database_url, pam_env

pytestmark = pytest.mark.slow

USER = "lena"
REPLY = "¡Hola, Lena! ¿De dónde eres?"
CORRECTION = {
    "original": "yo es",
    "corrected": "yo soy",
    "explanation": "With yo, ser is soy.",
    "category": "conjugation",
}
TRANSLATION = "Hallo, Lena! Woher kommst du?"
THOUGHT = "The learner speaks German; keep it informal."
EXPLAINED = "✏️ yo es → yo soy: Mit „yo“ heißt „ser“ „soy“. Beispiel: Yo soy de Berlín."
GERMAN = words_for("German", "taps")


def answer(task: str, body: dict[str, Any], count: int) -> str:
    """A reply that corrects "yo es"; a translation (after the model's thinking) and an
    explanation in German, as a model asked for German gives them (the test checks that the
    request asked for German)."""
    if task == "translate":  # as Qwen3 answers: its thinking first, in the content
        return f"<think>{THOUGHT}</think>\n{TRANSLATION}"
    if task == "explain":
        return EXPLAINED
    if task == "reply":
        return json.dumps({"reply": REPLY, "corrections": [CORRECTION]}, ensure_ascii=False)
    return "Summary: the learner says hello." if task == "summary" else '{"no_change": true}'


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def chat(lines: list[str], cwd: Path, server: OpenAIServer) -> str:
    """`pam chat --user lena` with `lines` on stdin, to completion; its stdout."""
    process, out = pam_chat(lines, cwd=cwd, env=pam_env(cwd, server))
    assert process.returncode == 0, process.stderr.decode(errors="replace")
    return out


def test_translate_explain_and_say_in_the_native_language(
    tmp_path: Path, server: OpenAIServer
) -> None:
    lines = ["/language Spanish German", "Hola, yo es Lena", "/translate", "/explain", "/say"]
    out = chat([*lines, "/say slower"], tmp_path, server)

    assert TRANSLATION in out and EXPLAINED in out
    assert THOUGHT not in out  # the model's thinking is never shown
    assert GERMAN(taps.SPOKEN) in out and GERMAN(taps.SPOKEN_SLOWER) in out
    ((translate,), (explain,)) = server.of("translate"), server.of("explain")
    assert "German" in translate["messages"][0]["content"]
    assert REPLY in translate["messages"][1]["content"]
    assert "yo es → yo soy" in explain["messages"][1]["content"]
    assert len(server.of("reply")) == 1  # one reply; each tap one call of its own
    # The reply spoken twice, the second time slower; both clips saved beside the chat.
    speeds = [r.fields.get("speed") for r in server.audio_requests]
    assert speeds == [None, 0.8]
    assert all(r.fields["input"] == REPLY for r in server.audio_requests)
    assert len(list(tmp_path.glob("pam-voice-*.ogg"))) == 2

    engine = db.make_engine(database_url(tmp_path))
    try:
        store = Store(engine)
        learner = store.learners.find_learner(f"terminal:{USER}")
        assert learner is not None
        # The conversation holds the chat alone; the taps' calls are counted in usage.
        replies = [m.content for m in store.conversation.messages(learner.id, role=PAM)]
        assert len(replies) == 1 and replies[0].startswith(REPLY)
        usage = store.ledger.usage(learner.id)
        assert usage["translate"][0] == usage["explain"][0] == 1
    finally:
        engine.dispose()
