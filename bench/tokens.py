"""Token benchmark: Pam's elastic memory against full replay and a last-20-messages window, on
the same scripted conversations and the same tokenizer (real tiktoken), with Pam's real code.

    python -m bench.tokens                 # 310 turns per learner, figures in bench/results/
    python -m bench.tokens --quick         # 120 turns, a small curve: what the tests run

Prints progress, the targets (PASS/FAIL) and a markdown table; writes tokens.json,
tokens.png and threshold_curve.png. Deterministic: fixed seeds, nothing depends on the clock.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.conversations import LEARNERS, LOW_INFO_CHAT, SPANISH, Learner
from bench.token_report import NAMES, Target, markdown_table, strategy_figures, targets, total
from bench.token_runs import Progress, baseline, memory_calls_bounded, run_density, run_pam
from memory.config import MemoryConfig

RESULTS = Path(__file__).resolve().parent / "results"
TRIGGERS = (400, 500, 600, 800, 1000, 1500, 2000, 3000)
CAPS = (100, 120, 150, 200, 300, 500)
QUICK_TRIGGERS, QUICK_CAPS = (800, 2000), (250,)
CURVE_TURNS = 300


def log(line: str) -> None:
    """A progress line, flushed at once (operators watch it)."""
    print(line, flush=True)


def curve_point(trigger: int, cap: int, turns: int) -> dict[str, Any]:
    """Pam's cost and targets at one summary trigger and cap (run in a worker process)."""
    memory = replace(MemoryConfig(), summary_trigger_tokens=trigger, summary_max_tokens=cap)
    run = run_pam(LEARNERS, turns, memory)
    checked: list[Target] = []
    for learner in run.series:
        checked += targets(learner, run.series[learner], baseline(run, learner, None))
    span = min(turns, CURVE_TURNS)
    return {
        "trigger": trigger,
        "cap": cap,
        "total": statistics.fmean(total(s, span) for s in run.series.values()),
        "passes": all(t.passed for t in checked),
        "worst": {
            t.name: round(max(u.value for u in checked if u.name == t.name), 4) for t in checked
        },
    }


def threshold_curve(
    triggers: Sequence[int], caps: Sequence[int], turns: int, jobs: int
) -> list[dict[str, Any]]:
    """`curve_point` for every trigger and cap, on `jobs` processes (the result is the same
    for any number)."""
    grid = [(t, c) for c in caps for t in triggers]
    log(f"threshold curve: {len(grid)} runs of {turns} turns on {jobs} process(es)")
    points: list[dict[str, Any]] = []
    if jobs <= 1:
        for trigger, cap in grid:
            points.append(curve_point(trigger, cap, turns))
            log(f"  trigger={trigger} cap={cap}: {points[-1]['total']:,.0f} tokens")
        return points
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(curve_point, t, c, turns) for t, c in grid]
        for (trigger, cap), future in zip(grid, futures, strict=True):
            points.append(future.result())
            log(f"  trigger={trigger} cap={cap}: {points[-1]['total']:,.0f} tokens")
    return points


def choose_defaults(curve: Sequence[dict[str, Any]]) -> dict[str, int] | None:
    """The largest summary cap (the most memory) that meets every target, with its cheapest
    passing trigger — of triggers within 1% of that cost, the largest (fewer summary calls);
    None if no point meets them."""
    for cap in sorted({p["cap"] for p in curve}, reverse=True):
        passing = [p for p in curve if p["cap"] == cap and p["passes"]]
        if passing:
            cheapest = min(p["total"] for p in passing)
            near = [p for p in passing if p["total"] <= cheapest * 1.01]
            return {"trigger": max(p["trigger"] for p in near), "cap": cap}
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


def run(
    turns: int,
    out: Path,
    *,
    plots: bool = True,
    triggers: Sequence[int] = TRIGGERS,
    caps: Sequence[int] = CAPS,
    jobs: int = 2,
    progress: Progress = log,
) -> dict[str, Any]:
    """The whole benchmark; writes tokens.json (and the figures) under `out`."""
    memory = MemoryConfig()
    progress(
        f"Pam with the defaults: trigger {memory.summary_trigger_tokens}, cap "
        f"{memory.summary_max_tokens}, window {memory.window_messages}; {turns} turns"
    )
    pam_run = run_pam(LEARNERS, turns, memory, progress)
    series = {
        "pam": pam_run.series,
        "full": {k: baseline(pam_run, k, None) for k in pam_run.series},
        "window": {k: baseline(pam_run, k, 20) for k in pam_run.series},
    }
    progress("baselines built; measuring stable prefixes")
    figures = {key: strategy_figures(runs) for key, runs in series.items()}
    checked: list[Target] = []
    for learner in pam_run.series:
        checked += targets(learner, series["pam"][learner], series["full"][learner])
    bounded, bounded_detail = memory_calls_bounded(pam_run)
    progress("the 50-message chat")
    density = run_density(SPANISH, memory)
    curve = threshold_curve(triggers, caps, turns, jobs)
    chosen = choose_defaults(curve)
    result: dict[str, Any] = {
        "turns": turns,
        "learners": [f"{lr.name} ({lr.target}, {lr.level})" for lr in LEARNERS],
        "memory": asdict(memory),
        "figures": figures,
        "table": markdown_table(figures),
        "targets": [t.as_dict() for t in checked],
        "memory_calls_bounded": {"passed": bounded, "detail": bounded_detail},
        "density": {
            **asdict(density),
            "reduction": density.reduction,
            "passed": density.reduction >= 0.5 and density.rich_seen == density.rich,
            "random_placement": density_sensitivity(SPANISH, memory),
        },
        "curve": curve,
        "recommended": chosen,
        "per_turn": {k: {lr: s.prompts for lr, s in v.items()} for k, v in series.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokens.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if plots:
        from bench.token_plots import plot_prompts, plot_threshold_curve

        mean_per_turn = {
            k: [statistics.fmean(values) for values in zip(*v.values(), strict=True)]
            for k, v in result["per_turn"].items()
        }
        plot_prompts(mean_per_turn, NAMES, out / "tokens.png", "mean of 2 learners")
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
    memory, chosen = result["memory"], result["recommended"]
    lines.append(
        f"Curve: recommended trigger/cap {chosen}; defaults are "
        f"{memory['summary_trigger_tokens']}/{memory['summary_max_tokens']}"
    )
    lines += ["", result["table"], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tokens", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--turns", type=int, default=310, help="learner turns per learner")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go")
    parser.add_argument("--quick", action="store_true", help="120 turns and a 2-point curve")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--jobs", type=int, default=2, help="processes for the curve")
    args = parser.parse_args(argv)
    turns: int = args.turns
    triggers: Sequence[int] = TRIGGERS
    caps: Sequence[int] = CAPS
    if args.quick:
        turns, triggers, caps = 120, QUICK_TRIGGERS, QUICK_CAPS
    result = run(
        turns, args.out, plots=not args.no_plots, triggers=triggers, caps=caps, jobs=args.jobs
    )
    print(report(result))
    everything = [t["passed"] for t in result["targets"]]
    everything += [result["memory_calls_bounded"]["passed"], result["density"]["passed"]]
    return 0 if all(everything) else 1


if __name__ == "__main__":
    sys.exit(main())
