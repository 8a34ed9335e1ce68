"""What the token benchmark concludes: per-strategy figures, the issue's targets, the stable
prefix of consecutive reply prompts, and the markdown table for the docs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from bench.token_runs import REPLY_MODEL, Series
from memory.llm import ChatMessage
from memory.tokens import MESSAGE_OVERHEAD, TokenCounter

CACHE_MIN_TOKENS = 1024  # providers discount a cached prompt prefix from this length on
# The summary is rewritten at most once every three turns on average, for any learner.
MAX_FOLDS_PER_TURN = 1 / 3
STRATEGIES = ("pam", "full", "window")
NAMES = {"pam": "Pam (elastic memory)", "full": "Full replay", "window": "Last 20 messages"}


@cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(TokenCounter(REPLY_MODEL).encoding_name)


@cache
def _content_tokens(text: str) -> tuple[int, ...]:
    return tuple(_encoding().encode(text, disallowed_special=()))


def stable_prefix(previous: Sequence[ChatMessage], current: Sequence[ChatMessage]) -> int:
    """Tokens at the start of `current` identical to the start of `previous` (per message: its
    framing, then its content's tokens), as a provider's prompt cache sees them."""
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before["role"] != now["role"]:
            return shared
        shared += MESSAGE_OVERHEAD
        if before["content"] == now["content"]:
            shared += len(_content_tokens(now["content"]))
            continue
        a, b = _content_tokens(before["content"]), _content_tokens(now["content"])
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        return shared + (min(len(a), len(b)) if same is None else same)
    return shared


def prefixes(series: Series) -> list[int]:
    """The stable prefix of each reply prompt from turn 2 on, against the turn before."""
    return [
        stable_prefix(series.messages[turn - 1], series.messages[turn])
        for turn in range(1, len(series.messages))
    ]


@dataclass(frozen=True)
class PrefixStats:
    """How much of each reply prompt repeats the start of the previous one."""

    mean_share: float  # mean over turns 2… of stable prefix / prompt tokens
    cacheable_prompts: int  # prompts whose stable prefix is at least CACHE_MIN_TOKENS
    cacheable_share: float  # tokens in such prefixes / all reply prompt tokens

    @classmethod
    def of(cls, series: Series) -> PrefixStats:
        found = prefixes(series)
        shares = [prefix / prompt for prefix, prompt in zip(found, series.prompts[1:], strict=True)]
        cacheable = [prefix for prefix in found if prefix >= CACHE_MIN_TOKENS]
        return cls(
            statistics.fmean(shares) if shares else 0.0,
            len(cacheable),
            sum(cacheable) / sum(series.prompts),
        )


def mean_prompt(series: Series, first: int, last: int) -> float:
    """The mean reply prompt over turns `first`…`last` (1-based, inclusive)."""
    return statistics.fmean(series.prompts[first - 1 : last])


def total(series: Series, turns: int) -> int:
    """Every token of every call over the first `turns` turns."""
    return sum(series.tokens[:turns])


@dataclass(frozen=True)
class Target:
    """One of the issue's targets, checked on one learner's conversation."""

    name: str
    learner: str
    value: float
    limit: float
    detail: str

    @property
    def passed(self) -> bool:
        return self.value <= self.limit

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        measured = f"{self.value:.3f} ≤ {self.limit:.3g} ({self.detail})"
        return f"{verdict}  {self.name} [{self.learner}]: {measured}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def targets(learner: str, pam: Series, full: Series) -> list[Target]:
    """The issue's targets that this many turns can check."""
    turns, found = len(pam.prompts), []
    for first, last, limit in ((91, 110, 0.20), (291, 310, 0.07)):
        if turns >= last:
            ours, theirs = mean_prompt(pam, first, last), mean_prompt(full, first, last)
            found.append(
                Target(
                    f"mean reply prompt, turns {first}–{last}, vs full replay",
                    learner,
                    ours / theirs,
                    limit,
                    f"{ours:.0f} vs {theirs:.0f} tokens",
                )
            )
    if turns >= 300:
        later, early = max(pam.prompts[99:300]), max(pam.prompts[49:100])
        found.append(
            Target(
                "largest reply prompt in turns 100–300 vs in turns 50–100",
                learner,
                later / early,
                1.10,
                f"{later} vs {early} tokens",
            )
        )
    for span, limit in ((100, 0.35), (300, 0.15)):
        if turns >= span:
            ours, theirs = total(pam, span), total(full, span)
            found.append(
                Target(
                    f"all tokens over {span} turns vs full replay",
                    learner,
                    ours / theirs,
                    limit,
                    f"{ours:,} vs {theirs:,} tokens",
                )
            )
    folds = sum(pam.folds)
    found.append(
        Target(
            "summary rewrites per turn",
            learner,
            folds / turns,
            MAX_FOLDS_PER_TURN,
            f"{folds} folds in {turns} turns",
        )
    )
    return found


def learner_table(pam: dict[str, Series], full: dict[str, Series]) -> str:
    """The per-learner table (docs/benchmarks/tokens.md): each target's measure, LLM calls per
    message and summary rewrites per turn, for Pam."""
    turns = len(next(iter(pam.values())).prompts)
    columns = [(a, b) for a, b in ((91, 110), (291, 310)) if turns >= b]
    spans = [n for n in (100, 300) if turns >= n]
    lines = [
        "| learner | "
        + "".join(f"reply prompt {a}–{b} vs full | " for a, b in columns)
        + "".join(f"all tokens {n} turns vs full | " for n in spans)
        + "LLM calls per message | summary rewrites per turn |",
        "|---|" + "---:|" * (len(columns) + len(spans) + 2),
    ]
    for learner, ours in pam.items():
        theirs = full[learner]
        cells = [f"{mean_prompt(ours, a, b) / mean_prompt(theirs, a, b):.1%}" for a, b in columns]
        cells += [f"{total(ours, n) / total(theirs, n):.1%}" for n in spans]
        cells.append(f"{sum(ours.calls) / turns:.2f}")
        cells.append(f"{sum(ours.folds) / turns:.3f} (1 in {turns / max(1, sum(ours.folds)):.1f})")
        lines.append(f"| {learner} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def strategy_figures(runs: dict[str, Series]) -> dict[str, Any]:
    """One strategy's figures over its learners: means of the per-learner values."""
    first = next(iter(runs.values()))
    turns = len(first.prompts)

    def mean(f: Any) -> float:
        return statistics.fmean(f(s) for s in runs.values())

    figures: dict[str, Any] = {
        "turns": turns,
        "largest_prompt": mean(lambda s: max(s.prompts)),
        "calls_per_100": mean(lambda s: 100 * sum(s.calls) / turns),
        "folds_per_100": mean(lambda s: 100 * sum(s.folds) / turns),
    }
    for first_turn, last_turn in ((91, 110), (291, 310)):
        if turns >= last_turn:
            figures[f"prompt_{first_turn}_{last_turn}"] = mean(
                lambda s, a=first_turn, b=last_turn: mean_prompt(s, a, b)
            )
    for span in (100, 300):
        if turns >= span:
            figures[f"total_{span}"] = mean(lambda s, n=span: total(s, n))
    prefixes = [PrefixStats.of(s) for s in runs.values()]
    figures["prefix_share"] = statistics.fmean(p.mean_share for p in prefixes)
    figures["cacheable_prompts"] = sum(p.cacheable_prompts for p in prefixes) / len(prefixes)
    figures["cacheable_share"] = statistics.fmean(p.cacheable_share for p in prefixes)
    return figures


def markdown_table(figures: dict[str, dict[str, Any]]) -> str:
    """The docs table: one row per strategy, shares of full replay in brackets."""
    full = figures["full"]
    columns: list[tuple[str, str, bool]] = [
        ("prompt_91_110", "reply prompt, turns 91–110", True),
        ("prompt_291_310", "reply prompt, turns 291–310", True),
        ("largest_prompt", "largest reply prompt", False),
        ("total_100", "all tokens, 100 turns", True),
        ("total_300", "all tokens, 300 turns", True),
        ("calls_per_100", "LLM calls per 100 messages", False),
        ("prefix_share", "stable prefix (mean)", False),
    ]
    columns = [c for c in columns if c[0] in full]
    lines = [
        "| strategy | " + " | ".join(title for _, title, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for key in STRATEGIES:
        cells = []
        for column, _, relative in columns:
            value = figures[key][column]
            if column == "prefix_share":
                cells.append(f"{value:.0%}")
            elif column == "calls_per_100":
                cells.append(f"{value:.0f}")
            elif relative and key != "full":
                cells.append(f"{value:,.0f} ({value / full[column]:.0%})")
            else:
                cells.append(f"{value:,.0f}")
        lines.append(f"| {NAMES[key]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
