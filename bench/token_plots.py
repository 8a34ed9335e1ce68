"""The token benchmark's two figures (matplotlib, imported only when plotting)."""

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
    """All tokens over `turns` turns against the summary trigger, one line per summary cap."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=120)
    caps = sorted({point["cap"] for point in curve})
    for cap in caps:
        points = sorted((p for p in curve if p["cap"] == cap), key=lambda p: p["trigger"])
        ax.plot(
            [p["trigger"] for p in points],
            [p["total"] / 1000 for p in points],
            marker="o",
            label=f"summary cap {cap} tokens",
        )
    best = next(p for p in curve if p["trigger"] == chosen["trigger"] and p["cap"] == chosen["cap"])
    ax.scatter(
        [best["trigger"]],
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
    ax.set_title("Pam's cost vs summary trigger and cap")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
