"""The token benchmark in quick mode: its structure, and the issue's targets that 120 turns can
check. Nothing here times anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import tokens
from bench.conversations import LEARNERS, LOW_INFO_CHAT, learner_messages, word_count
from bench.token_report import stable_prefix
from memory.density import is_low_information

QUICK_TURNS = 120


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    found = tokens.run(
        QUICK_TURNS,
        out,
        plots=False,
        triggers=tokens.QUICK_TRIGGERS,
        caps=tokens.QUICK_CAPS,
        jobs=1,
        progress=lambda line: None,
    )
    assert json.loads((out / "tokens.json").read_text()) == json.loads(json.dumps(found))
    return found


def test_the_scripts_are_long_enough_realistic_and_the_same_every_run() -> None:
    for learner in LEARNERS:
        messages = learner_messages(learner, 310)
        assert messages == learner_messages(learner, 310)
        assert all(5 <= word_count(m) <= 40 for m in messages)
        assert not any(is_low_information(m) for m in messages)
    assert {learner.target for learner in LEARNERS} == {"Spanish", "German"}
    assert len(LOW_INFO_CHAT) == 50
    assert sum(rich for rich, _ in LOW_INFO_CHAT) == 10


def test_the_low_information_chat_is_labelled_as_the_filter_sees_it() -> None:
    for rich, text in LOW_INFO_CHAT:
        assert is_low_information(text) is not rich, text


def test_every_strategy_is_measured_on_every_turn(result: dict[str, Any]) -> None:
    assert set(result["per_turn"]) == {"pam", "full", "window"}
    for runs in result["per_turn"].values():
        assert set(runs) == {"Spanish", "German"}
        assert all(len(prompts) == QUICK_TURNS for prompts in runs.values())
    figures = result["figures"]
    assert figures["full"]["calls_per_100"] == figures["window"]["calls_per_100"] == 100
    assert figures["pam"]["calls_per_100"] > 100  # replies plus summary and profile calls
    for key in ("pam", "full", "window"):
        assert 0 <= figures[key]["prefix_share"] <= 1
    assert "| Pam (elastic memory) |" in result["table"]
    assert "| Full replay |" in result["table"]


def test_full_replay_grows_and_the_window_stays_bounded(result: dict[str, Any]) -> None:
    for learner, full in result["per_turn"]["full"].items():
        assert full == sorted(full)
        window = result["per_turn"]["window"][learner]
        assert max(window[20:]) < 2 * min(window[20:])


def test_the_targets_that_120_turns_can_check_pass(result: dict[str, Any]) -> None:
    checked = {(t["name"], t["learner"]): t for t in result["targets"]}
    names = {name for name, _ in checked}
    assert names == {
        "mean reply prompt, turns 91–110, vs full replay",
        "all tokens over 100 turns vs full replay",
    }
    failed = [t for t in checked.values() if not t["passed"]]
    assert not failed, failed


def test_memory_calls_use_the_memory_model_with_bounded_outputs(result: dict[str, Any]) -> None:
    assert result["memory_calls_bounded"]["passed"], result["memory_calls_bounded"]


def test_the_density_filter_halves_profile_calls_and_sees_every_rich_message(
    result: dict[str, Any],
) -> None:
    density = result["density"]
    assert density["profile_triggers"] == 10  # learning every 5 of 50 messages
    assert density["profile_calls"] <= density["profile_triggers"] / 2
    assert density["rich_seen"] == density["rich"] == 10
    assert density["passed"]
    shuffled = density["random_placement"]  # not thanks to the chat's order
    assert shuffled["share_meeting_50pct"] == shuffled["share_all_rich_seen"] == 1.0, shuffled


def test_the_curve_recommends_a_point_it_measured(result: dict[str, Any]) -> None:
    points = {(p["trigger"], p["cap"]) for p in result["curve"]}
    assert points == {(t, c) for t in tokens.QUICK_TRIGGERS for c in tokens.QUICK_CAPS}
    chosen = result["recommended"]
    if chosen is not None:
        assert (chosen["trigger"], chosen["cap"]) in points


def test_stable_prefix_counts_framing_and_the_shared_start_of_a_changed_message() -> None:
    before = [
        {"role": "system", "content": "You are Pam. Profile: climbing"},
        {"role": "user", "content": "hola"},
    ]
    same = stable_prefix(before, before)
    assert same == stable_prefix(before, [*before, {"role": "assistant", "content": "¡hola!"}])
    changed = [{"role": "system", "content": "You are Pam. Profile: cooking"}, before[1]]
    assert 4 < stable_prefix(before, changed) < same
    assert stable_prefix(before, [{"role": "user", "content": "x"}]) == 0


def test_the_command_line_writes_the_json_and_exits_by_the_targets(tmp_path: Path) -> None:
    code = tokens.main(["--quick", "--no-plots", "--jobs", "1", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "tokens.json").read_text())
    assert data["turns"] == QUICK_TURNS
    assert code == 0
