"""Token benchmark: Pam's elastic memory against full replay and a last-20-messages window, on
the same scripted conversations and the same tokenizer (real tiktoken), with Pam's real code.

    python -m bench.tokens                 # 310 turns per learner, figures in bench/results/
    python -m bench.tokens --quick         # 120 turns, a small curve: what the tests run

Prints progress, the targets (PASS/FAIL), markdown tables and the dollars per learner-month;
writes tokens.json, tokens.png, threshold_curve.png and costs.png. Deterministic: fixed seeds,
nothing depends on the clock.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.conversations import LEARNERS, LOW_INFO_CHAT, SPANISH, Learner
from bench.token_costs import MONTH_MESSAGES, cost_table, month_costs
from bench.token_density import correction_density, density_report
from bench.token_report import (
    NAMES,
    Target,
    learner_table,
    markdown_table,
    strategy_figures,
    targets,
    total,
)
from bench.token_runs import (
    REPLY_MODEL,
    Progress,
    Series,
    baseline,
    memory_calls_bounded,
    run_density,
    run_pam,
)
from bot.review.prompt import DUE_TAG
from bot.turn.recall import recall_in
from memory.config import MemoryConfig
from memory.llm import ChatMessage
from memory.tokens import TokenCounter

RESULTS = Path(__file__).resolve().parent / "results"
TRIGGERS = (400, 500, 600, 800, 1000, 1500, 2000, 3000)
CAPS = (100, 120, 150, 200, 300, 500)
BATCHES = (4, 6, 8)  # messages outside the window before a fold: two, three, four turns
QUICK_TRIGGERS, QUICK_CAPS, QUICK_BATCHES = (800, 2000), (250,), (6,)
CURVE_TURNS = 300
# The cost table of docs/benchmarks/tokens.md: the two small models most deployments start with.
COST_MODELS = ("gpt-4o-mini", "gpt-4.1-mini")
LABELS = {lr.target: f"{lr.name} ({lr.target} {lr.level})" for lr in LEARNERS}


def log(line: str) -> None:
    """A progress line, flushed at once (operators watch it)."""
    print(line, flush=True)


def curve_point(trigger: int, cap: int, batch: int, turns: int) -> dict[str, Any]:
    """Pam's cost and targets at one summary trigger, cap and fold batch (run in a worker
    process)."""
    memory = MemoryConfig(
        summary_trigger_tokens=trigger,
        summary_max_tokens=cap,
        fold_batch_messages=batch,
    )
    run = run_pam(LEARNERS, turns, memory)
    checked: list[Target] = []
    for learner in run.series:
        checked += targets(learner, run.series[learner], baseline(run, learner, None))
    span = min(turns, CURVE_TURNS)
    return {
        "trigger": trigger,
        "cap": cap,
        "batch": batch,
        "total": statistics.fmean(total(s, span) for s in run.series.values()),
        "folds_per_turn": statistics.fmean(sum(s.folds) / turns for s in run.series.values()),
        "passes": all(t.passed for t in checked),
        "worst": {
            t.name: round(max(u.value for u in checked if u.name == t.name), 4) for t in checked
        },
    }


Grid = Sequence[tuple[int, int, int]]


def threshold_curve(grid: Grid, turns: int, jobs: int) -> list[dict[str, Any]]:
    """`curve_point` for every (trigger, cap, batch) of `grid`, on `jobs` processes (the
    result is the same for any number)."""
    log(f"threshold curve: {len(grid)} runs of {turns} turns on {jobs} process(es)")
    points: list[dict[str, Any]] = []

    def done(point: dict[str, Any]) -> None:
        points.append(point)
        log(
            f"  trigger={point['trigger']} cap={point['cap']} batch={point['batch']}: "
            f"{point['total']:,.0f} tokens, {point['folds_per_turn']:.3f} folds a turn"
            f"{'' if point['passes'] else ' (misses a target)'}"
        )

    if jobs <= 1:
        for trigger, cap, batch in grid:
            done(curve_point(trigger, cap, batch, turns))
        return points
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(curve_point, *point, turns) for point in grid]
        for future in futures:
            done(future.result())
    return points


def curve_grid(triggers: Sequence[int], caps: Sequence[int], batches: Sequence[int]) -> Grid:
    """Every combination of trigger, cap and batch."""
    return [(t, c, b) for b in batches for c in caps for t in triggers]


def choose_defaults(curve: Sequence[dict[str, Any]]) -> dict[str, int] | None:
    """The largest summary cap (the most memory) that meets every target, with its cheapest
    passing trigger and batch — of points within 1% of that cost, the one that rewrites the
    summary least often (then the larger trigger); None if no point meets them."""
    for cap in sorted({p["cap"] for p in curve}, reverse=True):
        passing = [p for p in curve if p["cap"] == cap and p["passes"]]
        if passing:
            cheapest = min(p["total"] for p in passing)
            near = [p for p in passing if p["total"] <= cheapest * 1.01]
            best = min(near, key=lambda p: (p["folds_per_turn"], -p["trigger"]))
            return {"trigger": best["trigger"], "cap": cap, "batch": best["batch"]}
    return None


def density_sensitivity(
    learner: Learner, memory: MemoryConfig, seeds: int = 20
) -> dict[str, float]:
    """The same 50-message chat with its messages shuffled, through Pam's real code: the
    saving must not depend on the information-rich messages arriving in bursts."""
    calls, seen = [], []
    for seed in range(seeds):
        chat = list(LOW_INFO_CHAT)
        random.Random(seed).shuffle(chat)
        result = run_density(learner, memory, chat)
        calls.append(result.profile_calls)
        seen.append(result.rich_seen == result.rich)
    triggers = len(LOW_INFO_CHAT) // memory.profile_every
    return {
        "placements": seeds,
        "mean_calls": statistics.fmean(calls),
        "share_meeting_50pct": sum(c <= triggers / 2 for c in calls) / seeds,
        "share_all_rich_seen": sum(seen) / seeds,
    }


def recall_share(runs: dict[str, Series]) -> dict[str, Any]:
    """What recall added to Pam's reply prompts, per learner and for all: the turns whose
    prompt carried recalled snippets, and their tokens (the data section), also as a share of
    every reply prompt token."""
    counter = TokenCounter(REPLY_MODEL)
    learners: dict[str, dict[str, Any]] = {}
    for learner, series in runs.items():
        uses = [recall_in(messages, counter) for messages in series.messages]
        recalled = [use for use in uses if use.snippets]
        added = sum(use.tokens for use in recalled)
        learners[LABELS[learner]] = {
            "turns": len(uses),
            "recalled": len(recalled),
            "share": len(recalled) / len(uses) if uses else 0.0,
            "snippets": sum(use.snippets for use in recalled),
            "tokens": added,
            "token_share": added / sum(series.prompts) if series.prompts else 0.0,
        }
    turns = sum(v["turns"] for v in learners.values())
    recalled = sum(v["recalled"] for v in learners.values())
    tokens = sum(v["tokens"] for v in learners.values())
    prompts = sum(sum(s.prompts) for s in runs.values())
    return {
        "learners": learners,
        "turns": turns,
        "recalled": recalled,
        "share": recalled / turns if turns else 0.0,
        "tokens": tokens,
        "token_share": tokens / prompts if prompts else 0.0,
    }


def review_in(messages: Sequence[ChatMessage], counter: TokenCounter) -> tuple[int, int]:
    """The due review items a reply request carried and the tokens they added to it: all of
    the system prompt's end from their data section on (the section, what to do with it,
    what to add to the answer), counted with and without it."""
    system = messages[0]["content"]
    start, end = f"\n\n<{DUE_TAG}>\n", f"\n</{DUE_TAG}>"
    if start not in system:
        return 0, 0
    head, _, tail = system.partition(start)
    data = tail.split(end, 1)[0]
    return data.count("\n") + 1, counter.count(system) - counter.count(head)


def review_share(runs: dict[str, Series]) -> dict[str, Any]:
    """What due review items added to Pam's reply prompts, per learner and for all: the turns
    that carried any, the items, their tokens, and their share of every reply prompt token."""
    counter = TokenCounter(REPLY_MODEL)
    learners: dict[str, dict[str, Any]] = {}
    for learner, series in runs.items():
        uses = [review_in(messages, counter) for messages in series.messages]
        added = sum(tokens for _, tokens in uses)
        learners[LABELS[learner]] = {
            "turns": len(uses),
            "with_items": sum(items > 0 for items, _ in uses),
            "items": sum(items for items, _ in uses),
            "tokens": added,
            "token_share": added / sum(series.prompts) if series.prompts else 0.0,
        }
    totals = {k: sum(v[k] for v in learners.values()) for k in ("turns", "with_items", "tokens")}
    prompts = sum(sum(s.prompts) for s in runs.values())
    return {
        "learners": learners,
        **totals,
        "share": totals["with_items"] / totals["turns"] if totals["turns"] else 0.0,
        "per_item_turn": totals["tokens"] / totals["with_items"] if totals["with_items"] else 0.0,
        "token_share": totals["tokens"] / prompts if prompts else 0.0,
    }


def run(
    turns: int,
    out: Path,
    *,
    plots: bool = True,
    triggers: Sequence[int] = TRIGGERS,
    caps: Sequence[int] = CAPS,
    batches: Sequence[int] = BATCHES,
    month: int = MONTH_MESSAGES,
    jobs: int = 2,
    progress: Progress = log,
) -> dict[str, Any]:
    """The whole benchmark; writes tokens.json (and the figures) under `out`. Pam runs for
    `month` turns if that is longer, for the cost of a learner-month; everything else is
    measured on the first `turns`."""
    memory = MemoryConfig()
    progress(
        f"Pam with the defaults: trigger {memory.summary_trigger_tokens}, cap "
        f"{memory.summary_max_tokens}, batch {memory.fold_batch_messages}, window "
        f"{memory.window_messages}; {max(turns, month)} turns"
    )
    pam_run = run_pam(LEARNERS, max(turns, month), memory, progress, taps=True)
    whole = {
        "pam": pam_run.series,
        "full": {k: baseline(pam_run, k, None) for k in pam_run.series},
        "window": {k: baseline(pam_run, k, 20) for k in pam_run.series},
    }
    series = {key: {k: s.head(turns) for k, s in runs.items()} for key, runs in whole.items()}
    progress("baselines built; measuring stable prefixes and costs")
    figures = {key: strategy_figures(runs) for key, runs in series.items()}
    costs = month_costs(whole, month)
    checked: list[Target] = []
    for learner in pam_run.series:
        checked += targets(learner, series["pam"][learner], series["full"][learner])
    bounded, bounded_detail = memory_calls_bounded(pam_run)
    progress("the 50-message chat")
    density = run_density(SPANISH, memory)
    # What /corrections few|normal|all and the buttons under a reply add.
    corrections = correction_density(pam_run, series["full"], turns, memory, progress)
    curve = threshold_curve(curve_grid(triggers, caps, batches), turns, jobs)
    chosen = choose_defaults(curve)
    labelled = {LABELS[k]: s for k, s in series["pam"].items()}
    result: dict[str, Any] = {
        "turns": turns,
        "learners": list(LABELS.values()),
        # profile_max_batch is a bound of the job, not a knob, but the report has always named it
        "memory": {**memory.model_dump(), "profile_max_batch": memory.profile_max_batch},
        "figures": figures,
        "table": markdown_table(figures),
        "learner_table": learner_table(labelled, {LABELS[k]: s for k, s in series["full"].items()}),
        "targets": [t.as_dict() for t in checked],
        "memory_calls_bounded": {"passed": bounded, "detail": bounded_detail},
        "density": {
            **asdict(density),
            "reduction": density.reduction,
            "passed": density.reduction >= 0.5 and density.rich_seen == density.rich,
            "random_placement": density_sensitivity(SPANISH, memory),
        },
        "correction_density": corrections,
        "recall": {"mode": memory.recall, **recall_share(series["pam"])},
        "review": {"on": memory.review, **review_share(series["pam"])},
        "costs": costs,
        "cost_table": cost_table(
            {**costs, "learners": {LABELS[k]: v for k, v in costs["learners"].items()}},
            NAMES,
            COST_MODELS,
        ),
        "curve": curve,
        "recommended": chosen,
        "per_turn": {k: {lr: s.prompts for lr, s in v.items()} for k, v in series.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokens.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if plots:
        from bench.token_plots import plot_costs, plot_prompts, plot_threshold_curve

        mean_per_turn = {
            k: [statistics.fmean(values) for values in zip(*v.values(), strict=True)]
            for k, v in result["per_turn"].items()
        }
        plot_prompts(mean_per_turn, NAMES, out / "tokens.png", f"mean of {len(LEARNERS)} learners")
        plot_costs(costs, NAMES, COST_MODELS, out / "costs.png")
        if chosen:
            plot_threshold_curve(curve, chosen, out / "threshold_curve.png", min(turns, 300))
    return result


def report(result: dict[str, Any]) -> str:
    """The human-readable verdict: targets, density, curve choice, table."""
    lines = ["", "Targets:"]
    lines += [
        Target(**{k: v for k, v in t.items() if k != "passed"}).line() for t in result["targets"]
    ]
    bounded = result["memory_calls_bounded"]
    lines.append(f"{'PASS' if bounded['passed'] else 'FAIL'}  memory calls: {bounded['detail']}")
    d = result["density"]
    lines.append(
        f"{'PASS' if d['passed'] else 'FAIL'}  50-message chat: {d['profile_calls']} profile "
        f"calls vs {d['profile_triggers']} every {result['memory']['profile_every']} messages "
        f"({d['reduction']:.0%} fewer); information-rich seen {d['rich_seen']}/{d['rich']}"
    )
    r = d["random_placement"]
    lines.append(
        f"      (the same chat shuffled {r['placements']} times: {r['mean_calls']:.1f} calls on "
        f"average; {r['share_meeting_50pct']:.0%} meet 50% fewer; all rich messages seen in "
        f"{r['share_all_rich_seen']:.0%})"
    )
    lines += density_report(result["correction_density"])
    rc = result["recall"]
    lines.append(
        f"Recall (PAM_RECALL={rc['mode']}): {rc['recalled']} of {rc['turns']} turns "
        f"({rc['share']:.1%}) carried recalled snippets, {rc['tokens']:,} tokens in all "
        f"({rc['token_share']:.2%} of reply prompt tokens); per learner: "
        + ", ".join(
            f"{name} {v['recalled']}/{v['turns']} (+{v['tokens']:,})"
            for name, v in rc["learners"].items()
        )
    )
    rv = result["review"]
    lines.append(
        f"Review (PAM_REVIEW={'on' if rv['on'] else 'off'}): {rv['with_items']} of "
        f"{rv['turns']} turns ({rv['share']:.1%}) carried due items, {rv['tokens']:,} tokens in "
        f"all ({rv['token_share']:.2%} of reply prompt tokens, {rv['per_item_turn']:.0f} a turn "
        "that carried any); per learner: "
        + ", ".join(
            f"{name} {v['with_items']}/{v['turns']} (+{v['tokens']:,})"
            for name, v in rv["learners"].items()
        )
    )
    memory, chosen = result["memory"], result["recommended"]
    lines.append(
        f"Curve: recommended {chosen}; defaults are trigger {memory['summary_trigger_tokens']}, "
        f"cap {memory['summary_max_tokens']}, batch {memory['fold_batch_messages']}"
    )
    lines += ["", result["table"], "", result["learner_table"], ""]
    costs = result["costs"]
    lines += [
        f"Dollars per learner-month of {costs['messages']} messages, every call on the model "
        f"named ({costs['source']}):",
        "",
        result["cost_table"],
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tokens", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--turns", type=int, default=310, help="learner turns per learner")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go")
    parser.add_argument("--quick", action="store_true", help="120 turns and a 2-point curve")
    parser.add_argument(
        "--month", type=int, default=MONTH_MESSAGES, help="learner messages a month, for costs"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--jobs", type=int, default=2, help="processes for the curve")
    args = parser.parse_args(argv)
    turns: int = args.turns
    month: int = args.month
    triggers: Sequence[int] = TRIGGERS
    caps: Sequence[int] = CAPS
    batches: Sequence[int] = BATCHES
    if args.quick:
        turns, month = 120, 120
        triggers, caps, batches = QUICK_TRIGGERS, QUICK_CAPS, QUICK_BATCHES
    result = run(
        turns,
        args.out,
        plots=not args.no_plots,
        triggers=triggers,
        caps=caps,
        batches=batches,
        month=month,
        jobs=args.jobs,
    )
    print(report(result))
    everything = [t["passed"] for t in result["targets"]]
    everything += [result["memory_calls_bounded"]["passed"], result["density"]["passed"]]
    everything.append(result["correction_density"]["passed"])
    return 0 if all(everything) else 1


if __name__ == "__main__":
    sys.exit(main())
