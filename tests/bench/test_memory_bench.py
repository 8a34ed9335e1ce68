"""The memory benchmark run tiny (1 chat turn, on a SQLite file): every step of the
conversation is answered through the real gunicorn and `pam worker`, every process is
measured, the JSON file holds what the run returned and the report names each process and
budget. Tests time nothing; the bench exits 1 when a process's peak is over its budget, so the
tiny runs also hold both worker shapes to the docs' budgets: memory jobs on the worker's
threads (PAM_MEMORY_PROCESS=off) and the default, the deploy files' (in a child forked from
it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import memory

pytestmark = pytest.mark.slow

CHAT_TURNS = 1


@pytest.fixture(scope="module", params=["off", "on"])
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], str]:
    out = tmp_path_factory.mktemp("bench") / "memory.json"
    code = memory.main(
        [
            *("--chat-turns", str(CHAT_TURNS), "--help-runs", "1", "--out", str(out)),
            *("--memory-process", request.param),
        ]
    )
    assert code == 0
    found = json.loads(out.read_text())
    return found, memory.report(found)


def test_every_step_of_the_conversation_is_answered(
    run: tuple[dict[str, Any], str],
) -> None:
    found, _ = run
    # /start, six /language, /level, the chat, /profile /review /progress /voice on, a voice
    # note, /forget and its confirm button.
    assert found["steps"] == 1 + len(memory.LANGUAGES) + 1 + CHAT_TURNS + 4 + 1 + 1 + 1
    assert found["llm_requests"]["reply"] == CHAT_TURNS + 1  # the voice note's too
    assert found["audio_requests"] == 2  # its transcription, and its spoken reply


def test_every_process_is_measured(run: tuple[dict[str, Any], str]) -> None:
    found, _ = run
    measured = found["memory"]
    child_process = found["memory_process"] == "on"
    assert measured["memory_jobs_children"] == int(child_process)
    assert measured["web_workers"] == 2  # the Procfile's WEB_CONCURRENCY default
    names = set(measured["processes"])
    assert {"worker", "web master", "web worker 1", "web worker 2"} <= names
    for sizes in measured["processes"].values():
        assert 0 < sizes["pss_mb"] <= sizes["rss_mb"] <= sizes["peak_mb"]
        assert 0 < sizes["private_mb"] <= sizes["rss_mb"]
    # A forked child's pages shared with its worker are counted once: in the worker's.
    worker = measured["processes"]["worker"]
    children = [s for n, s in measured["processes"].items() if n.startswith("memory jobs")]
    extra = {key: sum(child[key] for child in children) for key in ("private_mb", "pss_mb")}
    assert all(child["private_mb"] < child["rss_mb"] for child in children)
    pair = measured["worker + memory jobs"]
    assert pair["rss_mb"] == pytest.approx(worker["rss_mb"] + extra["private_mb"])
    assert pair["peak_mb"] == pytest.approx(worker["peak_mb"] + extra["private_mb"])
    assert pair["pss_mb"] == pytest.approx(worker["pss_mb"] + extra["pss_mb"])
    assert measured["one web worker"]["rss_mb"] == max(
        s["rss_mb"] for n, s in measured["processes"].items() if n.startswith("web worker")
    )


def test_cold_starts_are_reported(run: tuple[dict[str, Any], str]) -> None:
    found, _ = run
    assert set(found["cold_start_seconds"]) == {
        "pam --help",
        "web: first /healthz",
        "worker: first reply",
    }
    assert all(seconds > 0 for seconds in found["cold_start_seconds"].values())


def test_the_report_names_every_process_and_budget(
    run: tuple[dict[str, Any], str],
) -> None:
    found, report = run
    for name in [*found["memory"]["processes"], *found["budget_mb"]]:
        assert f"| {name} |" in report or f"| **{name}** |" in report
    pair = "≤ 400 MB" if found["memory_process"] == "on" else "≤ 340 MB"
    assert pair in report and "≤ 150 MB" in report
