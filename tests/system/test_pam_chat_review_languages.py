"""/review through the real `pam chat` process and the loopback OpenAI server, for learners of
Spanish whose native language is German, Japanese or Arabic: every review text Pam writes
herself — the start, "Exercise 1 of 2", the exercise's instructions, the score so far when
the learner chats on, the score and when the next review is — is in the learner's language,
as a language-identification library (lingua) reads it, not by string equality; the
exercises' Spanish stays as the learner wrote it, and the chat stays in Spanish."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from lingua import Language, LanguageDetectorBuilder
from sqlalchemy import update

from bot.review.prompt import EXERCISE_TAG
from loopback.openai_server import OpenAIServer
from memory.clock import utcnow
from memory.database import db
from memory.database.models_review import ReviewItem
from tests.system.test_pam_chat_recall import chat, pam_env

pytestmark = pytest.mark.slow

NATIVE = {"German": Language.GERMAN, "Japanese": Language.JAPANESE, "Arabic": Language.ARABIC}
# The languages told apart: the learner's, the one they learn, and English, the fallback
# Pam's words would be in if they were not translated.
DETECTOR = LanguageDetectorBuilder.from_languages(
    *NATIVE.values(), Language.SPANISH, Language.ENGLISH
).build()

MISTAKE = "Yo es enfermera y tengo un bueno amigo en Berlín."
CORRECTIONS = [
    {
        "original": "Yo es enfermera",
        "corrected": "Yo soy enfermera",
        "explanation": "ser: yo soy",
        "category": "conjugation",
        "rule": "ser, first person singular",
    },
    {
        "original": "un bueno amigo",
        "corrected": "un buen amigo",
        "explanation": "buen before a masculine singular noun",
        "category": "grammar",
        "rule": "apocope of bueno",
    },
]
CHAT_REPLIES = {
    "mistake": "¡Qué bien! ¿Y qué haces en Berlín?",
    "right": "¡Muy bien, así se dice!",
    "chat": "¡Qué bonito! Cuéntame más de tu día.",
}
CHAT_ON = "Hoy hace sol y voy a pasear por el parque."


def answer(task: str, body: dict[str, Any], count: int) -> str:
    """Replies that correct MISTAKE, judge a /review answer right when it is the expected
    form, and take anything else during a review for chat about something else."""
    if task == "summary":
        return "The learner is a nurse in Berlin."
    if task == "profile":
        return json.dumps({"job": "nurse"})
    system = body["messages"][0]["content"]
    latest = body["messages"][-1]["content"]
    reply: dict[str, Any] = {"reply": CHAT_REPLIES["chat"], "corrections": []}
    if latest == MISTAKE:
        reply = {"reply": CHAT_REPLIES["mistake"], "corrections": CORRECTIONS}
    if f"<{EXERCISE_TAG}>" in system:
        expected = re.search(r"^expected: (.*)$", system, re.MULTILINE)
        right = expected is not None and latest.strip() == expected.group(1).strip()
        reply["exercise"] = "right" if right else "none"
        reply["reply"] = CHAT_REPLIES["right"] if right else CHAT_REPLIES["chat"]
    return json.dumps(reply, ensure_ascii=False)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def _all_due(tmp_path: Path) -> None:
    """Time passes as `pam chat` sees it: every item falls due."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    try:
        with engine.begin() as connection:
            connection.execute(update(ReviewItem).values(due=utcnow() - timedelta(minutes=1)))
    finally:
        engine.dispose()


def _pams_words(output: str) -> list[str]:
    """Pam's own words in `pam chat`'s output: each paragraph, without the Spanish the model
    wrote (its chat replies) or the learner did (the «…» exercises), nor /commands."""
    text = output
    for reply in CHAT_REPLIES.values():
        text = text.replace(reply, "\n\n")
    text = re.sub(r"«[^«»]*»", " ", text)
    text = re.sub(r"/\w+", " ", text)
    paragraphs = [p.strip(" \n>:") for p in re.split(r"\n\s*\n", text)]
    return [p for p in paragraphs if len(re.findall(r"\w+", p)) >= 2 or len(p) >= 6]


def _expected(tmp_path: Path, user: str) -> str:
    """The answer the learner's /review under way takes."""
    from memory.store.message_store import Store

    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    try:
        store = Store(engine)
        learner = store.learners.find_learner(f"terminal:{user}")
        assert learner is not None
        session = store.reviews.session(learner.id)
        assert session is not None
        return session.exercise.expected
    finally:
        engine.dispose()


@pytest.mark.parametrize("native", sorted(NATIVE))
def test_review_scaffolding_is_in_the_learners_language(
    tmp_path: Path, server: OpenAIServer, native: str
) -> None:
    env = pam_env(tmp_path, server)
    user = f"learner-{native.lower()}"
    chat(user, [f"/language Spanish {native}", MISTAKE], cwd=tmp_path, env=env)
    _all_due(tmp_path)

    started = chat(user, ["/review"], cwd=tmp_path, env=env)
    first = chat(user, [_expected(tmp_path, user)], cwd=tmp_path, env=env)
    paused = chat(user, [CHAT_ON], cwd=tmp_path, env=env)
    again = chat(user, ["/review"], cwd=tmp_path, env=env)
    done = chat(user, [_expected(tmp_path, user)], cwd=tmp_path, env=env)

    # The exercises themselves: the learner's Spanish, a gap in the corrected form.
    assert (
        f"«{CORRECTIONS[0]['original']}»" in started or f"«{CORRECTIONS[1]['original']}»" in started
    )
    assert "___" in first
    assert CHAT_REPLIES["right"] in first and CHAT_REPLIES["chat"] in paused
    for output in (started, first, paused, again, done):
        words = _pams_words(output.split("/review", 1)[-1] if output is started else output)
        assert words, output
        for paragraph in words:
            found = DETECTOR.detect_language_of(paragraph)
            assert found == NATIVE[native], (native, paragraph, found)
    # The chat itself stays in the language they learn.
    for reply in (CHAT_REPLIES["right"], CHAT_REPLIES["chat"]):
        assert DETECTOR.detect_language_of(reply) == Language.SPANISH
