"""The token benchmark in quick mode: its structure, and the issue's targets that 120 turns can
check. Nothing here times anything."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from bench import tokens
from bench.conversations import (
    FRENCH,
    LEARNERS,
    LOW_INFO_CHAT,
    corrections_for,
    learner_messages,
    word_count,
)
from bench.token_costs import PRICES, Bill, cached_tokens
from bench.token_report import stable_prefix
from bench.token_runs import REPLY_MODEL, Series
from memory.jobs.density import is_low_information
from memory.llm import ChatMessage
from memory.tokens import TokenCounter

QUICK_TURNS = 120


@dataclass(frozen=True)
class CommandLine:
    """One run of `python -m bench.tokens --quick`: its exit status, where it wrote, and what
    its `tokens.run` returned."""

    code: int
    out: Path
    result: dict[str, Any]


@pytest.fixture(scope="module")
def command_line(tmp_path_factory: pytest.TempPathFactory) -> CommandLine:
    """The quick benchmark run once, through its command line, for every test here (a minute
    of CPU): what `tokens.run` returned is kept as `main` hands it on."""
    out = tmp_path_factory.mktemp("bench")
    returned: list[dict[str, Any]] = []

    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        returned.append(real_run(*args, **kwargs))
        return returned[-1]

    real_run = tokens.run
    with mock.patch.object(tokens, "run", run):
        code = tokens.main(["--quick", "--no-plots", "--jobs", "1", "--out", str(out)])
    [found] = returned
    assert json.loads((out / "tokens.json").read_text()) == json.loads(json.dumps(found))
    return CommandLine(code, out, found)


@pytest.fixture(scope="module")
def result(command_line: CommandLine) -> dict[str, Any]:
    return command_line.result


def test_the_scripts_are_long_enough_realistic_and_the_same_every_run() -> None:
    for learner in LEARNERS:
        messages = learner_messages(learner, 310)
        assert messages == learner_messages(learner, 310)
        assert all(learner.min_words <= word_count(m) <= learner.max_words for m in messages)
        assert not any(is_low_information(m) for m in messages)
    assert {learner.target for learner in LEARNERS} == {"Spanish", "German", "French"}
    assert [(lr.min_words, lr.max_words) for lr in LEARNERS] == [(5, 40), (5, 40), (40, 120)]


def test_the_b2_learner_writes_paragraphs_with_the_occasional_b2_mistake() -> None:
    messages = learner_messages(FRENCH, 310)
    assert FRENCH.level == "B2"
    lengths = sorted(word_count(m) for m in messages)
    assert lengths[len(lengths) // 2] >= 70  # the median message is a paragraph
    with_mistakes = [m for m in messages if corrections_for(FRENCH, m)]
    assert 0.2 < len(with_mistakes) / len(messages) < 0.8  # some, not every message
    categories = {c["category"] for m in with_mistakes for c in corrections_for(FRENCH, m)}
    assert {"mood", "agreement", "conditional"} <= categories
    assert len(LOW_INFO_CHAT) == 50
    assert sum(rich for rich, _ in LOW_INFO_CHAT) == 10


def test_the_low_information_chat_is_labelled_as_the_filter_sees_it() -> None:
    for rich, text in LOW_INFO_CHAT:
        assert is_low_information(text) is not rich, text


def test_every_strategy_is_measured_on_every_turn(result: dict[str, Any]) -> None:
    assert set(result["per_turn"]) == {"pam", "full", "window"}
    for runs in result["per_turn"].values():
        assert set(runs) == {"Spanish", "German", "French"}
        assert all(len(prompts) == QUICK_TURNS for prompts in runs.values())
    figures = result["figures"]
    assert figures["full"]["calls_per_100"] == figures["window"]["calls_per_100"] == 100
    assert figures["pam"]["calls_per_100"] > 100  # replies plus summary and profile calls
    for key in ("pam", "full", "window"):
        assert 0 <= figures[key]["prefix_share"] <= 1
    assert "| Pam (elastic memory) |" in result["table"]
    assert "| Full replay |" in result["table"]
    for learner in result["learners"]:
        assert f"| {learner} |" in result["learner_table"]


def test_recall_is_reported_per_learner_and_costs_only_where_it_ran(
    result: dict[str, Any],
) -> None:
    """The scripted learners chat about their lives and never ask what they told Pam: the
    default auto path recalls on few of their turns, and a turn that recalls adds at most
    the section's cap."""
    recall = result["recall"]
    assert recall["mode"] == "auto"
    assert set(recall["learners"]) == set(result["learners"])
    assert recall["turns"] == 3 * QUICK_TURNS
    assert recall["recalled"] == sum(v["recalled"] for v in recall["learners"].values())
    assert recall["share"] < 0.1
    cap = result["memory"]["recall_max_tokens"]
    for learner in recall["learners"].values():
        assert learner["tokens"] <= learner["recalled"] * (cap + 20)  # the section's tags
        assert (learner["tokens"] == 0) == (learner["recalled"] == 0)


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
        "summary rewrites per turn",
    }
    assert {learner for _, learner in checked} == {"Spanish", "German", "French"}
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


def test_the_correction_density_adds_no_token_at_normal_nor_few_and_every_target_holds(
    result: dict[str, Any],
) -> None:
    """/corrections few|normal|all, each run through Pam's real code: the rule adds nothing at
    normal and few (few shows one correction of those stored), a few tokens at all; every
    economy target holds at each."""
    found = result["correction_density"]
    assert found["turns"] == QUICK_TURNS
    figures = found["densities"]
    assert list(figures) == ["few", "normal", "all"]
    assert figures["normal"]["rule_tokens"] == figures["few"]["rule_tokens"] == 0
    assert figures["normal"]["prompt_delta"] == figures["normal"]["tokens_delta"] == 0
    assert 0 < figures["all"]["rule_tokens"] <= 10
    # The same mistakes found at every density; at few one shown for each corrected turn.
    stored = figures["normal"]["stored"]
    assert stored > 0 and figures["few"]["stored"] == figures["all"]["stored"] == stored
    assert figures["normal"]["shown"] == figures["all"]["shown"] == stored
    assert 0 < figures["few"]["shown"] < stored
    assert all(f["targets_passed"] for f in figures.values()) and found["passed"]
    assert "| few | +0 tokens |" in found["table"]


def test_buttons_add_nothing_to_a_prompt_and_a_tap_is_one_call(result: dict[str, Any]) -> None:
    buttons = result["correction_density"]["buttons"]
    assert 1 <= buttons["per_reply"] <= 3  # Translate always; Explain, Fewer when corrected
    assert buttons["prompts"] == 3 * QUICK_TURNS
    assert buttons["prompts_holding_a_button"] == 0 and buttons["tokens_per_turn"] == 0
    for taps in buttons["taps"].values():
        assert set(taps) == {"translate", "explain"}  # one call each
    assert 0 < buttons["tap_tokens"]["translate"] < buttons["tap_tokens"]["explain"]


def test_the_summary_is_rewritten_at_most_once_every_three_turns_for_every_learner(
    result: dict[str, Any],
) -> None:
    rewrites = {
        t["learner"]: t for t in result["targets"] if t["name"] == "summary rewrites per turn"
    }
    assert set(rewrites) == {"Spanish", "German", "French"}
    for target in rewrites.values():
        assert 0 < target["value"] <= 1 / 3, target
    # Long messages do not fold more often than short ones by more than the batch allows.
    assert rewrites["French"]["value"] <= 1 / 3


def test_costs_per_learner_month_for_every_strategy_at_dated_prices(result: dict[str, Any]) -> None:
    costs = result["costs"]
    assert costs["messages"] == QUICK_TURNS
    assert "OpenAI" in costs["source"] and "2025" in costs["source"]
    models = {p["model"] for p in costs["prices"]}
    assert {"gpt-4o-mini", "gpt-4.1-mini"} <= models
    assert set(costs["learners"]) == {"Spanish", "German", "French"}
    for runs in costs["learners"].values():
        assert set(runs) == {"pam", "full", "window"}
        for model in models:
            for key in ("pam", "full", "window"):
                assert 0 < runs[key]["dollars"][model] <= runs[key]["dollars_uncached"][model]
            assert runs["pam"]["dollars_uncached"][model] < runs["full"]["dollars_uncached"][model]
        assert runs["full"]["tokens"]["cached"] > 0  # full replay repeats its whole past
    assert "| Pam (elastic memory) |" in result["cost_table"]
    assert "gpt-4.1-mini" in result["cost_table"]


def test_cached_input_follows_openais_1024_token_prefix_in_128_token_steps() -> None:
    assert [cached_tokens(n) for n in (0, 1023, 1024, 1151, 1152, 5000)] == [
        0,
        0,
        1024,
        1024,
        1152,
        4992,
    ]


def test_a_bill_prices_cached_input_at_the_cached_rate() -> None:
    counter = TokenCounter(REPLY_MODEL)
    system: ChatMessage = {"role": "system", "content": "Eres Pam. " * 400}
    first: list[ChatMessage] = [system, {"role": "user", "content": "hola"}]
    second: list[ChatMessage] = [
        *first,
        {"role": "assistant", "content": "¡hola!"},
        {"role": "user", "content": "¿qué tal?"},
    ]
    prompts = [sum(counter.count_message(m["content"]) for m in p) for p in (first, second)]
    series = Series(
        prompts=prompts,
        outputs=[20, 30],
        messages=[first, second],
        memory_inputs=[0, 500],
        memory_outputs=[0, 100],
    )
    bill = Bill.of(series)
    prefix = stable_prefix(first, second)
    assert 1024 < prefix < prompts[1]
    assert bill.cached == cached_tokens(prefix)
    assert bill.input == sum(prompts) - bill.cached + 500
    assert bill.output == 20 + 30 + 100
    mini = next(p for p in PRICES if p.model == "gpt-4o-mini")
    assert bill.dollars(mini) == pytest.approx(
        (bill.input * 0.15 + bill.cached * 0.075 + bill.output * 0.60) / 1e6
    )
    assert bill.dollars(mini, cache=False) > bill.dollars(mini)


def test_the_curve_recommends_a_point_it_measured(result: dict[str, Any]) -> None:
    points = {(p["trigger"], p["cap"], p["batch"]) for p in result["curve"]}
    assert points == {
        (t, c, b)
        for t in tokens.QUICK_TRIGGERS
        for c in tokens.QUICK_CAPS
        for b in tokens.QUICK_BATCHES
    }
    chosen = result["recommended"]
    if chosen is not None:
        assert (chosen["trigger"], chosen["cap"], chosen["batch"]) in points


def test_choose_defaults_takes_the_largest_passing_cap_at_its_cheapest_point() -> None:
    def point(
        trigger: int, cap: int, batch: int, total: int, folds: float, passes: bool = True
    ) -> dict[str, Any]:
        return {
            "trigger": trigger,
            "cap": cap,
            "batch": batch,
            "total": total,
            "folds_per_turn": folds,
            "passes": passes,
        }

    curve = [
        point(600, 300, 6, 900, 0.30, passes=False),  # the largest cap misses a target
        point(400, 120, 6, 1000, 0.33),
        point(600, 120, 6, 1005, 0.31),  # within 1% and fewer rewrites
        point(600, 120, 8, 1200, 0.24),  # fewer still, but dearer
        point(400, 100, 4, 800, 0.50),
    ]
    assert tokens.choose_defaults(curve) == {"trigger": 600, "cap": 120, "batch": 6}
    assert tokens.choose_defaults([curve[0]]) is None


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


def test_the_command_line_writes_the_json_and_exits_by_the_targets(
    command_line: CommandLine,
) -> None:
    data = json.loads((command_line.out / "tokens.json").read_text())
    assert data["turns"] == QUICK_TURNS
    assert command_line.code == 0
