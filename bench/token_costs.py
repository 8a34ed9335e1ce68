"""What the token benchmark's conversations cost in dollars a learner-month, at OpenAI's
published prices (input, cached input and output per 1M tokens), with OpenAI's automatic prompt
caching modelled from the stable prefix of consecutive reply prompts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.token_report import CACHE_MIN_TOKENS, STRATEGIES, prefixes
from bench.token_runs import Series
from memory.prices import PRICES, PRICES_SOURCE, Price

# OpenAI bills a cache hit in steps of this many tokens past the first 1,024.
CACHE_STEP_TOKENS = 128
# A learner who writes 20 messages a day.
MONTH_MESSAGES = 600


def cached_tokens(prefix: int) -> int:
    """The input tokens billed at the cached rate when a prompt's first `prefix` tokens repeat
    the previous prompt: none under 1,024, else 1,024 plus whole steps of 128."""
    if prefix < CACHE_MIN_TOKENS:
        return 0
    return prefix - (prefix - CACHE_MIN_TOKENS) % CACHE_STEP_TOKENS


@dataclass(frozen=True)
class Bill:
    """The tokens of one conversation as OpenAI bills them."""

    input: int  # input tokens at the full rate
    cached: int  # input tokens at the cached rate
    output: int

    @classmethod
    def of(cls, series: Series) -> Bill:
        """Every call of `series`: reply prompts cached from the previous turn's (the learner
        is chatting, so it is minutes old), memory calls never cached (they run rarely and their
        prompts start with what changed)."""
        cached = sum(
            min(cached_tokens(p), prompt)
            for p, prompt in zip(prefixes(series), series.prompts[1:], strict=True)
        )
        return cls(
            sum(series.prompts) - cached + sum(series.memory_inputs),
            cached,
            sum(series.outputs) + sum(series.memory_outputs),
        )

    def dollars(self, price: Price, *, cache: bool = True) -> float:
        """What these tokens cost at `price` (with `cache` False: as if nothing were cached)."""
        cached_rate = price.cached_input if cache else price.input
        return (
            self.input * price.input + self.cached * cached_rate + self.output * price.output
        ) / 1_000_000


def month_costs(
    series: dict[str, dict[str, Series]], messages: int, prices: Sequence[Price] = PRICES
) -> dict[str, Any]:
    """Dollars per learner-month of `messages` learner messages, for every strategy, learner
    and price, with and without prompt caching; every model answering every call."""
    learners: dict[str, Any] = {}
    for learner in series["pam"]:
        learners[learner] = {}
        for key in STRATEGIES:
            bill = Bill.of(series[key][learner].head(messages))
            learners[learner][key] = {
                "tokens": asdict(bill),
                "dollars": {p.model: round(bill.dollars(p), 4) for p in prices},
                "dollars_uncached": {
                    p.model: round(bill.dollars(p, cache=False), 4) for p in prices
                },
            }
    mean = {
        key: {
            p.model: round(
                sum(learners[lr][key]["dollars"][p.model] for lr in learners) / len(learners), 4
            )
            for p in prices
        }
        for key in STRATEGIES
    }
    return {
        "messages": messages,
        "source": PRICES_SOURCE,
        "prices": [asdict(p) for p in prices],
        "learners": learners,
        "mean": mean,
    }


def cost_table(costs: dict[str, Any], names: dict[str, str], models: Sequence[str]) -> str:
    """The docs table: dollars per learner-month, one row per strategy and learner."""
    header = " | ".join(f"{m} (cached / uncached)" for m in models)
    lines = [f"| strategy | learner | {header} |", "|---|---|" + "---:|" * len(models)]
    for key in STRATEGIES:
        for learner, runs in costs["learners"].items():
            cells = [
                f"${runs[key]['dollars'][m]:.3f} / ${runs[key]['dollars_uncached'][m]:.3f}"
                for m in models
            ]
            lines.append(f"| {names[key]} | {learner} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
