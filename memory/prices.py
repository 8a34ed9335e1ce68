"""What LLM calls cost in dollars, at OpenAI's published list prices: the one price table, read
by the cost benchmarks (bench/token_costs.py, bench/voice.py) and by the estimated-dollars
metric (memory/metrics.py). A model not listed here has no estimate (its calls and tokens are
still counted)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PRICES_SOURCE = (
    "OpenAI API pricing (platform.openai.com/docs/pricing), standard tier, USD per 1M tokens, "
    "as published on 2025-06-03"
)


@dataclass(frozen=True)
class Price:
    """One model's published price, dollars per 1M tokens."""

    model: str
    input: float
    cached_input: float
    output: float


PRICES = (
    Price("gpt-4o-mini", 0.15, 0.075, 0.60),
    Price("gpt-4.1-mini", 0.40, 0.10, 1.60),
    Price("gpt-4.1-nano", 0.10, 0.025, 0.40),
    Price("gpt-4.1", 2.00, 0.50, 8.00),
    Price("gpt-4o", 2.50, 1.25, 10.00),
)

# Audio list prices, USD, from the same page (as of 2026); an operator should check them
# before budgeting. gpt-4o-mini-tts is billed by text input and audio output tokens, which
# comes to about $0.015 per minute of speech, spoken at about 15 characters a second.
TRANSCRIPTION_PER_MINUTE = {"gpt-4o-mini-transcribe": 0.003}
SPEECH_PER_MINUTE = {"gpt-4o-mini-tts": 0.015}
SPEECH_CHARS_PER_SECOND = 15.0

_BY_MODEL = {price.model: price for price in PRICES}
# A dated snapshot ("gpt-4o-mini-2024-07-18", as servers name the model that answered) is
# priced as its model.
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def _listed(model: str, table: dict[str, float] | dict[str, Price]) -> str | None:
    """The name `model` is listed under in `table` (itself, or without a snapshot date)."""
    for name in (model, _SNAPSHOT.sub("", model)):
        if name in table:
            return name
    return None


def chat_dollars(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """A chat call's list price, every input token at the uncached rate (what is cached is
    not reported back, so this is the most it cost); None for a model without a price."""
    name = _listed(model, _BY_MODEL)
    if name is None:
        return None
    price = _BY_MODEL[name]
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


def audio_dollars(model: str, *, seconds: float = 0.0, chars: int = 0) -> float | None:
    """An audio call's list price: a transcription by the seconds heard, speech by the
    characters spoken; None for a model without a price."""
    if seconds:
        name = _listed(model, TRANSCRIPTION_PER_MINUTE)
        return seconds / 60 * TRANSCRIPTION_PER_MINUTE[name] if name else None
    name = _listed(model, SPEECH_PER_MINUTE)
    if name is None:
        return None
    return chars / SPEECH_CHARS_PER_SECOND / 60 * SPEECH_PER_MINUTE[name]
