"""The token benchmark's figures (matplotlib, imported only when plotting)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLOURS = {"pam": "#1b9e77", "full": "#d95f02", "window": "#7570b3"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_prompts(
    per_turn: dict[str, list[float]], names: dict[str, str], path: Path, learners: str
) -> None:
    """Reply prompt tokens per turn, one line per strategy, log scale."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=120)
    for key, values in per_turn.items():
        turns = range(1, len(values) + 1)
        ax.plot(turns, values, label=names[key], color=COLOURS[key], linewidth=1.6)
    for first, last in ((91, 110), (291, 310)):
        if len(next(iter(per_turn.values()))) >= last:
            ax.axvspan(first, last, color="#cccccc", alpha=0.35, linewidth=0)
    ax.set_yscale("log")
    ax.set_xlabel("learner turn")
    ax.set_ylabel("reply prompt tokens (log scale)")
    ax.set_title(f"Reply prompt per turn ({learners}; shaded: the target spans)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_threshold_curve(
    curve: Sequence[dict[str, Any]], chosen: dict[str, int], path: Path, turns: int
) -> None:
    """All tokens over `turns` turns against the summary trigger, one line per summary cap, at
    the chosen fold batch; beside it, the chosen trigger and cap at every batch. Points that
    miss a target are hollow."""
    plt = _pyplot()
    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(11, 5), dpi=120, gridspec_kw={"width_ratios": [3, 1]}, sharey=True
    )
    at_batch = [p for p in curve if p["batch"] == chosen["batch"]]
    for cap in sorted({point["cap"] for point in at_batch}):
        points = sorted((p for p in at_batch if p["cap"] == cap), key=lambda p: p["trigger"])
        (line,) = ax.plot(
            [p["trigger"] for p in points],
            [p["total"] / 1000 for p in points],
            label=f"summary cap {cap} tokens",
        )
        for p in points:
            ax.scatter(
                [p["trigger"]],
                [p["total"] / 1000],
                color=line.get_color(),
                facecolors=line.get_color() if p["passes"] else "white",
                zorder=4,
            )
    best = next(
        p
        for p in curve
        if (p["trigger"], p["cap"], p["batch"])
        == (chosen["trigger"], chosen["cap"], chosen["batch"])
    )
    for axis, x in ((ax, best["trigger"]), (side, best["batch"])):
        axis.scatter(
            [x],
            [best["total"] / 1000],
            s=180,
            facecolors="none",
            edgecolors="black",
            linewidths=1.5,
            label="default",
            zorder=5,
        )
    ax.set_xlabel("summary trigger (unfolded tokens)")
    ax.set_ylabel(f"all LLM tokens over {turns} turns, thousands (mean per learner)")
    ax.set_title(f"Cost vs trigger and cap (fold batch {chosen['batch']} messages)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    row = sorted(
        (p for p in curve if p["trigger"] == chosen["trigger"] and p["cap"] == chosen["cap"]),
        key=lambda p: p["batch"],
    )
    side.plot([p["batch"] for p in row], [p["total"] / 1000 for p in row], color="grey")
    for p in row:
        side.scatter(
            [p["batch"]],
            [p["total"] / 1000],
            color="grey",
            facecolors="grey" if p["passes"] else "white",
            zorder=4,
        )
        side.annotate(
            f"{p['folds_per_turn']:.2f} folds/turn",
            (p["batch"], p["total"] / 1000),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            fontsize=7,
        )
    side.set_xticks([p["batch"] for p in row])
    side.set_xlabel("fold batch (messages)")
    side.set_title(f"trigger {chosen['trigger']}, cap {chosen['cap']}")
    side.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_costs(
    costs: dict[str, Any], names: dict[str, str], models: Sequence[str], path: Path
) -> None:
    """Dollars per learner-month, one panel per model, one bar per strategy and learner (log
    scale: full replay costs tens of times more)."""
    plt = _pyplot()
    from matplotlib import ticker

    learners = list(costs["learners"])
    fig, axes = plt.subplots(1, len(models), figsize=(10, 4.5), dpi=120, sharey=True)
    width = 0.8 / len(names)
    for ax, model in zip(axes, models, strict=True):
        for n, key in enumerate(names):
            values = [costs["learners"][lr][key]["dollars"][model] for lr in learners]
            xs = [i + (n - (len(names) - 1) / 2) * width for i in range(len(learners))]
            bars = ax.bar(xs, values, width, label=names[key], color=COLOURS[key])
            ax.bar_label(bars, labels=[f"${v:.2f}" for v in values], fontsize=7, padding=2)
        ax.set_xticks(range(len(learners)), learners)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.FixedLocator([0.1, 0.2, 0.5, 1, 2, 5, 10, 20]))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"${v:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(model)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel(f"dollars per learner-month ({costs['messages']} messages, log scale)")
    axes[0].legend(fontsize=8)
    fig.suptitle("What a learner-month costs, with prompt caching")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
