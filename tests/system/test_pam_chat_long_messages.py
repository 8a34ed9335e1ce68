"""`pam chat` as a B1–B2 learner uses it: 40 long messages (about 90 tokens each) against a
model that writes its profile lists as comma-separated strings, at the default settings. The
profile is learned and reaches later prompts and /profile; folds come in batches."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopback.openai_server import OpenAIServer, default_answer
from memory.database import db
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests.system.test_pam_chat import EXTERNAL_ID, answers, chat, database_url, pam_env, section

pytestmark = pytest.mark.slow

# What a B1–B2 learner tells about their life, a few sentences a message.
SENTENCES = (
    "El fin de semana pasado fui de excursión a la sierra con mis compañeros de trabajo.",
    "Caminamos casi seis horas y al final estábamos muy cansados, pero fue precioso.",
    "Me encanta hacer senderismo porque puedo desconectar del ordenador y del móvil.",
    "Trabajo como ingeniera de software en una empresa pequeña que hace aplicaciones.",
    "A veces mi jefe me pide que trabaje los sábados y eso no me gusta nada.",
    "Los domingos suelo cocinar para toda la semana, sobre todo lentejas y arroz.",
    "Mi abuela me enseñó a cocinar cuando era pequeña y todavía uso sus recetas.",
    "Estoy pensando en apuntarme a un curso de cocina japonesa el próximo mes.",
    "Creo que mi español ha mejorado mucho desde que hablo contigo cada día.",
    "Todavía me cuesta usar el subjuntivo cuando hablo rápido con mis amigos.",
    "Ayer vi una película argentina sin subtítulos y entendí casi todo, ¡qué alegría!",
    "Mi pareja es de Valencia y su familia habla valenciano en casa, no castellano.",
    "En verano queremos viajar a Asturias porque dicen que el paisaje es increíble.",
    "Si tenemos tiempo, también me gustaría visitar Galicia y comer pulpo allí.",
    "Mi hermano pequeño acaba de empezar la universidad y está muy nervioso.",
    "Él estudia medicina, así que va a tener que estudiar muchísimo los próximos años.",
    "Últimamente duermo mal porque los vecinos hacen ruido hasta muy tarde.",
    "He decidido levantarme más temprano para correr antes de ir a la oficina.",
    "No sé si es buena idea, porque en invierno por la mañana hace mucho frío.",
    "Me gustaría leer más libros en español; ahora estoy leyendo uno de Isabel Allende.",
    "La historia es muy bonita, aunque hay muchas palabras que tengo que buscar.",
    "El mes que viene tengo una entrevista para un puesto nuevo en Madrid.",
    "Si me dan el trabajo, tendremos que mudarnos y eso me da un poco de miedo.",
    "Por otro lado, Madrid tiene muchos museos y siempre hay algo que hacer.",
)
COUNTER = TokenCounter("gpt-4o-mini")


def long_lines(count: int = 40) -> list[str]:
    """`count` learner messages of 75–110 tokens each, the same every run."""
    rng = random.Random(2026)
    lines: list[str] = []
    while len(lines) < count:
        picked = rng.sample(SENTENCES, rng.choice((5, 5, 6)))
        line = " ".join(picked)
        if 75 <= COUNTER.count(line) <= 110:
            lines.append(line)
    return lines


LINES = long_lines()

# The profile as models write it when they follow the older, looser profile formats: lists as
# comma-separated strings, the level with words around it. Its facts carry the learner's own
# words, as the profile prompt asks (a fact no message supports is dropped).
LOOSE_PROFILE = {
    "who": "A software engineer who lives with her partner from Valencia",
    "interests": "hiking (senderismo), cooking (cocinar)",
    "misc": "job interview in Madrid next month; brother studies medicine",
    "level": "B1 (intermediate)",
    "recurring_mistakes": "subjunctive after 'quiero que'",
}


def answer(task: str, body: dict[str, Any], count: int) -> str:
    """Default replies and summaries; every profile answer is the loose profile."""
    if task == "profile":
        return json.dumps(LOOSE_PROFILE)
    return default_answer(task, body, count)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def test_the_lines_are_long_like_a_b1_learners() -> None:
    tokens = [COUNTER.count(line) for line in LINES]
    assert len(LINES) == 40
    assert all(75 <= t <= 110 for t in tokens)
    assert 85 <= sum(tokens) / len(tokens) <= 100


def test_long_messages_learn_a_loose_profile_and_fold_in_batches(
    tmp_path: Path, server: OpenAIServer
) -> None:
    env = pam_env(tmp_path, server, PAM_LLM_TIMEOUT="20", PAM_SHUTDOWN_WAIT_SECONDS="60")

    process, stdout = chat(["/language Spanish English", *LINES, "/profile"], cwd=tmp_path, env=env)

    assert process.returncode == 0, process.stderr.decode()
    said = answers(stdout)
    assert len(said) == 42

    # The learned profile reaches /profile ...
    shown = said[-1]
    assert "Interests: hiking (senderismo) and cooking (cocinar)" in shown
    assert "A software engineer" in shown
    assert re.search(r"learned from \d+ of your messages", shown)

    # ... and the reply prompts after the first profile job.
    replies = server.of("reply")
    assert len(replies) == 40
    learned = [
        json.loads(section(body["messages"][0]["content"], "learner_profile"))
        for body in replies
        if "(nothing learned yet)" not in body["messages"][0]["content"]
    ]
    assert learned, "the learned profile never reached a reply prompt"
    assert learned[-1]["interests"] == ["hiking (senderismo)", "cooking (cocinar)"]
    assert learned[-1]["level"] == "B1"
    assert len(learned) >= 30  # learned within the first 10 messages, then in every prompt

    # Folds come in batches: at most 12 over 40 long messages, each folding several.
    folds = server.of("summary")
    assert 1 <= len(folds) <= 12
    engine = db.make_engine(database_url(tmp_path))
    try:
        store = Store(engine)
        learner = store.learners.find_learner(EXTERNAL_ID)
        assert learner is not None
        summary = store.memory.summary(learner.id)
        assert summary.folds == len(folds)
        conversation = store.conversation.messages(learner.id)
        assert summary.watermark < conversation[-10].id, "the last 10 stay verbatim"
        assert len(conversation) == 80  # 40 turns, each message once (commands are not kept)
        # Every reply prompt ends with at least the verbatim window, the newest message last.
        for body, line in zip(replies, LINES, strict=True):
            assert body["messages"][-1] == {"role": "user", "content": line}
        assert all(len(body["messages"]) - 1 >= 10 for body in replies[5:])
    finally:
        engine.dispose()
