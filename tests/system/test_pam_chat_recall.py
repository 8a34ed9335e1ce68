"""Recall end to end through the real `pam chat` process, the loopback OpenAI server and the
real search (`Store.recall`): a fact said once and folded out of the window reaches the
prompt of the turn that asks about it — through the recall tool (the server answers with a
tool call) and through Pam's own search — another learner's matching words never do, and
after /forget nothing is found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.turn.recall import TAG
from loopback.openai_server import OpenAIServer, default_answer, recall_call
from memory.database import db
from memory.store.message_store import Store
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

TIMEOUT = 120
FACT = "Mi perro se llama Toby y le encanta correr en la playa."
OTHERS_FACT = "Mi perro se llama Rex y duerme todo el día en el sofá."
FILLER = [
    "Hoy hace sol en Berlín y voy a pasear.",
    "Después del trabajo cocino una sopa de lentejas.",
    "Los martes practico español con mi compañera.",
    "Mañana tengo que trabajar temprano.",
]
ASKS = "¿Te acuerdas de cómo se llama mi perro?"
# Folds as soon as two messages lie beyond a window of two: the fact is folded out after the
# second filler, long before the question.
KNOBS = {
    "PAM_WINDOW_MESSAGES": "2",
    "PAM_SUMMARY_TRIGGER_TOKENS": "1",
    "PAM_FOLD_BATCH_MESSAGES": "2",
    "PAM_LLM_TIMEOUT": "20",
    "PAM_SHUTDOWN_WAIT_SECONDS": "60",
}


def answer(task: str, body: dict[str, Any], count: int) -> str | dict[str, Any]:
    """The default answers; a reply request that offers tools for a question about the dog
    gets a recall call instead (its second request, without tools, the default reply)."""
    last = body["messages"][-1]
    if task == "reply" and "tools" in body and last["role"] == "user" and last["content"] == ASKS:
        return recall_call("perro nombre")
    return default_answer(task, body, count)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


def pam_env(tmp_path: Path, server: OpenAIServer, **knobs: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'pam.db'}"
    env["OPENAI_BASE_URL"] = server.base_url
    env["OPENAI_API_KEY"] = "test"
    env.update(KNOBS)
    env.update(knobs)
    return env


def chat(user: str, lines: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    """`pam chat --user USER` with `lines` on stdin, to completion; its stdout."""
    process = subprocess.run(
        [sys.executable, "-m", "webhooks.cli", "chat", "--user", user],
        input="".join(f"{line}\n" for line in lines).encode(),
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    stderr = process.stderr.decode(errors="replace")
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    return process.stdout.decode()


def folded_out(tmp_path: Path, user: str, text: str) -> bool:
    """Whether `user`'s message `text` lies in their summary, out of the window."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    try:
        store = Store(engine)
        learner = store.learners.find_learner(f"terminal:{user}")
        assert learner is not None
        said = [m for m in store.conversation.messages(learner.id) if m.content == text]
        return bool(said) and store.memory.summary(learner.id).watermark >= said[0].id
    finally:
        engine.dispose()


def reply_requests_after(server: OpenAIServer, first: int) -> list[dict[str, Any]]:
    return server.of("reply")[first:]


def recalled(request: dict[str, Any]) -> str:
    """Everything recall put into one reply request: the section of its system prompt, and
    its tool messages."""
    parts = []
    system = request["messages"][0]["content"]
    if f"<{TAG}>" in system:
        parts.append(system.split(f"<{TAG}>", 1)[1])
    parts += [m["content"] for m in request["messages"] if m["role"] == "tool"]
    return "\n".join(parts)


@pytest.mark.parametrize("mode", ["auto", "tool"])
def test_a_folded_out_fact_reaches_the_turn_that_asks_and_nothing_after_forget(
    tmp_path: Path, server: OpenAIServer, mode: str
) -> None:
    env = pam_env(tmp_path, server, PAM_RECALL=mode)
    chat("lena", ["/language Spanish English", FACT, *FILLER], cwd=tmp_path, env=env)
    chat("bob", ["/language Spanish English", OTHERS_FACT, *FILLER], cwd=tmp_path, env=env)
    assert folded_out(tmp_path, "lena", FACT) and folded_out(tmp_path, "bob", OTHERS_FACT)

    first = len(server.of("reply"))
    chat("lena", [ASKS], cwd=tmp_path, env=env)

    asked = reply_requests_after(server, first)
    everything = json.dumps(asked, ensure_ascii=False)
    assert "Rex" not in everything, "another learner's matching words never reach the prompt"
    if mode == "tool":
        offered, answered = asked
        assert offered["tools"][0]["function"]["name"] == "recall"
        assert "tools" not in answered
        assert [m["role"] for m in answered["messages"][-2:]] == ["assistant", "tool"]
        final = answered
    else:
        (final,) = asked
        assert "tools" not in final
    assert FACT in recalled(final)
    assert FACT not in final["messages"][0]["content"].split(f"<{TAG}>", 1)[0]
    assert "ago, learner: " in recalled(final) or "today, learner: " in recalled(final)

    # After /forget, the same question finds nothing.
    chat("lena", ["/forget", "yes"], cwd=tmp_path, env=env)
    first = len(server.of("reply"))
    chat("lena", ["/language Spanish English", ASKS], cwd=tmp_path, env=env)
    after = json.dumps(reply_requests_after(server, first), ensure_ascii=False)
    assert "Toby" not in after and "Rex" not in after
