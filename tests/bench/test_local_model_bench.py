"""The local-model benchmark's run and report, on the loopback fake server instead of the real
model (the real one is optional and slow: tests/system/test_local_model.py): the script goes
through a real `pam chat` subprocess, and what the report counts — turns, the mode, answers
that were no reply, echoes, corrections quoting words not in their message, what Pam's checks
dropped, what memory learned — is what the fake served. Benchmarks report; tests do not time
anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import local_model
from bench.local_model import LINES, drops, measure, script, troubles
from bot.corrections import chat_part
from loopback.local_model import is_reply, settled_mode
from loopback.openai_server import OpenAIServer, default_answer

pytestmark = pytest.mark.slow


def reply(body: dict[str, Any], count: int) -> str:
    """The fake's replies: the first echoes the learner's line (which Pam takes for no reply
    and asks again), the second carries a fair correction, one of a word the learner never
    wrote and one that is no object (Pam keeps the first only), the rest are plain and long."""
    said = body["messages"][-1]["content"]
    if count == 1:
        return json.dumps({"reply": said, "corrections": []}, ensure_ascii=False)
    if count == 2:
        fair = {"original": "yo es", "corrected": "yo soy", "category": "conjugation"}
        invented = {"original": "ruidosa", "corrected": "ruidoso", "category": "agreement"}
        answer = {"reply": "¡Qué bien!", "corrections": [fair, invented, "ruidosa"]}
        return json.dumps(answer, ensure_ascii=False)
    # As long as a small model's replies are, so the conversation passes the fold threshold;
    # never its previous reply again (Pam would take that for no reply).
    return json.dumps({"reply": CHATTY[count % 2], "corrections": []}, ensure_ascii=False)


CHATTY = (
    "¡Qué interesante! Cuéntame más: ¿qué hiciste después, con quién estabas, qué comisteis y "
    "qué tal lo pasasteis? Yo el fin de semana fui a la playa con unos amigos.",
    "¡No me digas! A mí también me pasa a veces. ¿Y cómo te sentiste luego? Seguro que tu "
    "familia estaba contenta; la mía siempre quiere saber todo lo que hago en el trabajo.",
)


def answer(task: str, body: dict[str, Any], count: int) -> str:
    return reply(body, count) if task == "reply" else default_answer(task, body, count)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        result = measure(server.base_url, tmp_path_factory.mktemp("run"), "json_object")
    return result, server


def test_every_line_is_a_turn_with_a_reply_in_the_mode_asked(
    found: tuple[dict[str, Any], OpenAIServer],
) -> None:
    result, server = found
    assert result["exit_status"] == 0
    assert result["turns_logged"] == len(LINES) == len(result["replies"])
    assert result["no_reply"] == 0
    assert result["structured_output_used"] == "json_object"
    formats = {json.dumps(body.get("response_format")) for body in server.of("reply")}
    assert formats == {'{"type": "json_object"}'}
    assert result["calls_per_turn"] == [2] + [1] * (len(LINES) - 1)  # the echo, asked again
    assert result["asked_again_or_failed"] == {
        "reply answer unusable: the reply repeats the learner's message": 1
    }
    latency = result["latency_ms"]
    assert 0 < latency["p50"] <= latency["p95"] <= latency["max"]


def test_an_echo_an_invented_correction_and_drops_are_counted(
    found: tuple[dict[str, Any], OpenAIServer],
) -> None:
    result, _ = found
    assert result["echoes"] == 0  # the echo was asked again, never shown
    assert [c["original"] for c in result["corrections"]] == ["yo es"]
    assert result["corrections_not_in_their_line"] == 0
    dropped = result["dropped_by_checks"]
    assert dropped["reply: echo_learner"] == 1
    assert dropped["correction: not_in_message"] == 1  # "ruidosa"
    assert dropped["correction: not an object"] == 1


def test_what_memory_learned_is_reported(found: tuple[dict[str, Any], OpenAIServer]) -> None:
    result, server = found
    assert result["profile"]["who"] == "Lena, a nurse from Berlin"
    assert result["summary"].startswith("Summary #")
    assert result["folds"] == len(server.of("summary")) >= 1
    assert result["usage"]["reply"]["calls"] == len(LINES) + 1
    assert "Lena, a nurse from Berlin" in result["profile_command_said"]
    assert script(len(LINES))[-1] == "/profile"
    assert "| structured output | json_object (asked: json_object) |" in result["table"]


def test_log_lines_are_read_as_pam_writes_them() -> None:
    log = [
        "2026-12-02 04:00:00,000 INFO bot.corrections reply correction 2 dropped: no original",
        "2026-12-02 04:00:01,000 INFO bot.corrections reply correction 2 dropped: no original",
        "2026-12-02 04:00:00,000 INFO memory.jobs.profile_answer profile answer learner=1: field "
        "interests dropped: not a list",
        "2026-12-02 04:00:00,000 INFO bot.turn.tutor turn for learner 1 dropped: forgotten "
        "mid-turn",
        "2026-12-02 04:00:02,000 INFO memory.grounding dropped correction "
        "reason=not_in_message learner=1",
        "2026-12-02 04:00:03,000 INFO memory.grounding dropped reply reason=echo_learner learner=1",
        "2026-12-02 04:00:00,000 WARNING bot.llm.openai_chat LLM reply call failed: 500 "
        "InternalServerError",
        "2026-12-02 04:00:00,000 WARNING bot.llm.openai_chat LLM model m cannot do json_schema; "
        "asking in json_object mode (learned once per process; the server said: …)",
    ]
    assert drops(log) == {
        "correction: no original": 1,
        "profile: not a list": 1,
        "correction: not_in_message": 1,
        "reply: echo_learner": 1,
    }
    assert troubles(log) == {"reply call failed: 500 InternalServerError": 1}
    assert settled_mode(log, "auto") == "json_object"
    assert settled_mode(log[:2], "auto") == "json_schema"
    assert settled_mode([], "off") == "off"


def test_an_echo_is_a_reply_that_repeats_the_line_not_a_correction_quoting_it() -> None:
    line = "En el hospital hay mucho trabajo, muchas personas están enfermos."
    near = "En el hospital, hay mucha trabajo y muchas personas están enfermas."
    corrected = f"¡Qué duro!\n\n✏️ {line} → enfermas"
    assert local_model.echoes(line, line)
    assert local_model.echoes(line, near)
    assert not local_model.echoes(line, "¡Qué duro! ¿Trabajas de noche también?")
    assert not local_model.echoes(line, chat_part(corrected))


def test_an_apology_is_no_reply() -> None:
    assert not is_reply(
        "Perdona, ahora mismo estoy un poco espesa 😅 ¿Me escribes otra vez en un minuto?"
    )
    assert not is_reply("  ")
    assert is_reply("¡Hola Lena! ¿De dónde eres?")


def test_without_the_set_up_the_run_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PAM_LOCAL_LLM_PYTHON", str(tmp_path / "none" / "bin" / "python"))

    assert local_model.main(["--out", str(tmp_path)]) == 2

    said = capsys.readouterr().err
    assert "python3 dev.py bench local_model --setup" in said
    assert not (tmp_path / "local_model.json").exists()
