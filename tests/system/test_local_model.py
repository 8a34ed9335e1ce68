"""`pam chat` on a real small model: llama-cpp-python's OpenAI-compatible server (0.3.36) on
Qwen2.5-Coder 1.5B Instruct, unmodified, started as a subprocess on 127.0.0.1.

Optional and slow (a 1.5B model on two CPU cores takes tens of seconds a turn), so it runs only
with PAM_TEST_LOCAL_MODEL=1 and the server set up outside Pam's venv
(`python3 dev.py bench local_model --setup`; see loopback/local_model.py for the paths):

    PAM_TEST_LOCAL_MODEL=1 python3 dev.py test -m local_model -s
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback.local_model import (
    STEP_DOWN,
    ChatRun,
    configured,
    is_reply,
    llama_server,
    missing,
    scripted_chat,
    settled_mode,
)
from memory.database import db
from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store

ENABLED = os.environ.get("PAM_TEST_LOCAL_MODEL") == "1"
LOCAL = configured()
# Asked only when enabled: it starts the server's Python once.
WHY_NOT = missing(LOCAL) if ENABLED else None

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.slow,
    pytest.mark.skipif(
        not ENABLED,
        reason="a real 1.5B model on the CPU takes minutes: set PAM_TEST_LOCAL_MODEL=1",
    ),
    pytest.mark.skipif(WHY_NOT is not None, reason=f"no local model: {WHY_NOT}"),
]

# A learner's first lines, each with a typical mistake.
LINES = [
    "Hola Pam, me llamo Lena y yo es de Berlín.",
    "Ayer yo cociné una paella, pero el arroz estaba muy dura.",
    "Mañana voy a visitar a mi hermano en Múnich.",
]
# Memory jobs off: the test is about replies, and each job would take the one slot the
# server has for a minute. No retry of a slow call: it would queue behind itself.
KNOBS = {
    "PAM_LLM_TIMEOUT": "600",
    "PAM_LLM_MAX_RETRIES": "0",
    "PAM_PROFILE_EVERY": "1000",
    "PAM_SUMMARY_TRIGGER_TOKENS": "1000000",
}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server, loaded once for the module's cases."""
    with llama_server(LOCAL, tmp_path_factory.mktemp("llama")) as url:
        yield url


def assert_every_line_answered(run: ChatRun) -> None:
    """Each learner line got a reply of the model's (no apology), printed and stored."""
    assert run.returncode == 0, "\n".join(run.log[-30:])
    assert not any("Traceback" in line for line in run.log), "\n".join(run.log)
    answers = run.answers()
    assert len(answers) == len(LINES), run.stdout
    unanswered = [line for line, said in zip(LINES, answers, strict=True) if not is_reply(said)]
    assert unanswered == [], f"answered with an apology: {unanswered}\n" + "\n".join(run.log)
    assert sum(" turn learner=" in line for line in run.log) == len(LINES)
    engine = db.make_engine(run.database_url)
    try:
        store = Store(engine)
        learner = store.learners.find_learner("terminal:lena")
        assert learner is not None
        stored = [(m.role, m.content) for m in store.conversation.messages(learner.id)]
    finally:
        engine.dispose()
    said = [
        pair
        for line, answer in zip(LINES, answers, strict=True)
        for pair in (
            (LEARNER, line),
            (PAM, answer),
        )
    ]
    assert stored == said, "what Pam printed is what it stored"


def test_at_pams_default_settings_every_line_gets_a_reply_and_the_mode_is_logged(
    base_url: str, tmp_path: Path
) -> None:
    run = scripted_chat(LINES, base_url, tmp_path, timeout=1200, knobs=KNOBS)

    assert_every_line_answered(run)
    steps = [line for line in run.log if STEP_DOWN.search(line)]
    assert len(steps) == 1, "one step-down, logged once, for the whole run"
    # The server refuses json_schema with a 500 and takes the schema inside JSON mode
    # (llama_cpp/llama_types.py's ChatCompletionRequestResponseFormat).
    assert settled_mode(run.log, "auto") == "json_object_schema"


def test_pinned_to_json_object_every_line_gets_a_reply(base_url: str, tmp_path: Path) -> None:
    run = scripted_chat(
        LINES,
        base_url,
        tmp_path,
        timeout=1200,
        knobs={**KNOBS, "PAM_STRUCTURED_OUTPUT": "json_object"},
    )

    assert_every_line_answered(run)
    assert not any(STEP_DOWN.search(line) for line in run.log), "a pinned mode stays"
    assert settled_mode(run.log, "json_object") == "json_object"
