"""What the correction density (/corrections few|normal|all) and the buttons under a reply add to
Pam's tokens, on the token benchmark's scripted learners and scripted model.

The learners run again at `few` and at `all` (every one of them set by the command before their
first message) and are compared turn by turn with the run at `normal`: what the density's rule
adds to a reply prompt (the first turn's prompts differ in nothing else), what every turn costs
on average, how many corrections the replies showed of those stored, and whether every economy
target still holds. The scripted model finds the same mistakes whatever the prompt asks: what
`all` adds in output depends on the model, and is counted per correction instead.

The buttons never enter a prompt: each reply prompt is searched for every button's label and
command. A tap is a turn of its own, one call when it is made: each learner taps Translate and
Explain under their last corrected reply after the normal run."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from bench.conversations import LEARNERS
from bench.token_report import Target, targets
from bench.token_runs import REPLY_MODEL, PamRun, Progress, Series, baseline, run_pam
from memory.config import MemoryConfig
from memory.database.records import ALL, FEW, NORMAL
from memory.tokens import TokenCounter

ORDER = (FEW, NORMAL, ALL)


def _mean_per_turn(runs: dict[str, Series], values: str) -> float:
    """The mean over learners and turns of one per-turn list of the series."""
    return statistics.fmean(v for s in runs.values() for v in getattr(s, values))


def _rule_tokens(run: PamRun, normal: PamRun, counter: TokenCounter) -> int:
    """What the density's rule adds to a reply prompt: the first turn's system prompt against
    the normal run's (the same learner, message, settings and empty memory), the largest
    difference over the learners."""

    def first_system(series: Series) -> str:
        return series.messages[0][0]["content"]

    return max(
        counter.count(first_system(run.series[k])) - counter.count(first_system(s))
        for k, s in normal.series.items()
    )


def density_figures(
    run: PamRun, normal: PamRun, turns: int, full: dict[str, Series] | None = None
) -> dict[str, Any]:
    """One density's figures over the first `turns` turns, against the normal run; the
    targets against full replay (`full`, when the caller built it already)."""
    counter = TokenCounter(REPLY_MODEL)
    ours = {k: s.head(turns) for k, s in run.series.items()}
    base = {k: s.head(turns) for k, s in normal.series.items()}
    checked: list[Target] = []
    for learner in ours:
        replay = full[learner] if full else baseline(run, learner, None)
        checked += targets(learner, ours[learner], replay.head(turns))
    stored = sum(sum(s.stored) for s in ours.values())
    shown = sum(sum(s.shown) for s in ours.values())
    correction_outputs = _correction_output_tokens(run, counter)
    return {
        "rule_tokens": _rule_tokens(run, normal, counter),
        "prompt_per_turn": _mean_per_turn(ours, "prompts"),
        "prompt_delta": _mean_per_turn(ours, "prompts") - _mean_per_turn(base, "prompts"),
        "tokens_per_turn": _mean_per_turn(ours, "tokens"),
        "tokens_delta": _mean_per_turn(ours, "tokens") - _mean_per_turn(base, "tokens"),
        "stored": stored,
        "shown": shown,
        "output_tokens_per_correction": correction_outputs,
        "targets_passed": all(t.passed for t in checked),
        "failed": [t.as_dict() for t in checked if not t.passed],
    }


def _correction_output_tokens(run: PamRun, counter: TokenCounter) -> float:
    """The output tokens one correction costs in a reply answer, on average: what each slip
    more that `all` finds costs (the scripted model finds the same ones at every density)."""
    sizes = []
    for call in run.calls:
        if call.purpose != "reply":
            continue
        found = json.loads(call.text).get("corrections") or []
        sizes += [counter.count(json.dumps(c, ensure_ascii=False)) for c in found]
    return statistics.fmean(sizes) if sizes else 0.0


def button_figures(normal: PamRun, turns: int) -> dict[str, Any]:
    """The buttons under the normal run's replies: how many, how many reply prompts hold any
    button's label or command (none should), and what the taps after the run cost."""
    series = {k: s.head(turns) for k, s in normal.series.items()}
    prompts = [
        "\n".join(m["content"] for m in messages)
        for s in series.values()
        for messages in s.messages
    ]
    texts = sorted(normal.button_texts)
    holding = sum(any(text in prompt for text in texts) for prompt in prompts)
    taps: dict[str, dict[str, int]] = {}
    for learner, calls in normal.taps.items():
        taps[learner] = {c.purpose: c.tokens for c in calls}
    purposes = sorted({p for t in taps.values() for p in t})
    return {
        "per_reply": _mean_per_turn(series, "buttons"),
        "prompts": len(prompts),
        "prompts_holding_a_button": holding,
        "tokens_per_turn": 0 if not holding else None,
        "taps": taps,
        "tap_tokens": {
            p: statistics.fmean(t[p] for t in taps.values() if p in t) for p in purposes
        },
    }


def correction_density(
    normal: PamRun,
    full: dict[str, Series],
    turns: int,
    memory: MemoryConfig,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every density's figures (the learners run again at few and all for `turns` turns) and
    the buttons'; `full`: full replay of the normal run, built already."""
    runs = {NORMAL: normal}
    for density in (FEW, ALL):
        if progress:
            progress(f"the learners at /corrections {density}")
        runs[density] = run_pam(LEARNERS, turns, memory, density=density)
    figures = {
        d: density_figures(runs[d], normal, turns, full if d == NORMAL else None) for d in ORDER
    }
    return {
        "turns": turns,
        "densities": figures,
        "buttons": button_figures(normal, turns),
        "passed": all(f["targets_passed"] for f in figures.values()),
        "table": density_table(figures),
    }


def density_table(figures: dict[str, dict[str, Any]]) -> str:
    """The docs table: one row per density."""
    lines = [
        "| density | rule in the reply prompt | reply prompt per turn | all tokens per turn "
        "| corrections shown / stored | every target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for density in ORDER:
        f = figures[density]
        # Rounded first, so that a difference of -0.001 reads +0.0.
        prompt, tokens = round(f["prompt_delta"], 1) + 0.0, round(f["tokens_delta"], 1) + 0.0
        lines.append(
            f"| {density} | {f['rule_tokens']:+d} tokens | {f['prompt_per_turn']:,.0f} "
            f"({prompt:+.1f}) | {f['tokens_per_turn']:,.0f} ({tokens:+.1f}) "
            f"| {f['shown']:,} / {f['stored']:,} | {'holds' if f['targets_passed'] else 'FAILS'} |"
        )
    return "\n".join(lines)


def density_report(result: dict[str, Any]) -> Sequence[str]:
    """The report's lines on the density and the buttons."""
    d = result
    lines = [
        f"{'PASS' if d['passed'] else 'FAIL'}  every target at /corrections few, normal and all "
        f"({d['turns']} turns):",
        d["table"],
    ]
    b = d["buttons"]
    taps = ", ".join(f"{p} {n:,.0f} tokens" for p, n in b["tap_tokens"].items())
    lines.append(
        f"Buttons: {b['per_reply']:.2f} under a reply on average; "
        f"{b['prompts_holding_a_button']} of {b['prompts']} reply prompts hold a button's label "
        f"or command; a tap, one call when made: {taps}"
    )
    per = d["densities"][ALL]["output_tokens_per_correction"]
    lines.append(f"A correction in a reply answer: {per:.0f} output tokens on average")
    return lines
