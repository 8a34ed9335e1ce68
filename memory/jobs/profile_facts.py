"""The learned profile kept to what the learner said and set: the settings they stated
(`/language`, `/level`) win over what a model learned, a fact must have a word of theirs behind
it, and the format's own descriptions copied as values are no facts. Pure functions over the
profile's fields; each thing dropped is logged once (memory.grounding.dropped)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from memory.database.records import LearnerInfo
from memory.grounding import dropped, fold, supported
from prompts import template

# The learned fields each of the learner's own settings covers.
SETTINGS = {
    "target_language": "target_language",
    "native_language": "native_language",
    "level": "level",
}
# Facts about the learner: each must be supported by their words. "style" and "focus" are the
# model's reading of how and why they chat, and "recurring_mistakes" are led by their review
# patterns: none of them quotes the learner.
FACT_FIELDS = ("who", "interests", "misc")
_PIECES = re.compile(r"[,;:/|()]|\bor\b")
_FORMAT_LINE = re.compile(r'^- "(\w+)"(?:, "\w+")*: (.+)$', re.MULTILINE)


def _pieces(text: str) -> list[str]:
    """The parts of `text` between commas, colons, slashes, bars, brackets and "or", folded."""
    return [p for p in (fold(part) for part in _PIECES.split(text)) if p]


@cache
def format_pieces() -> frozenset[str]:
    """The parts of profile.txt's description of each field ("string ≤300 chars", "name",
    "formal", "hobbies and favourite topics" …), folded: what a model that copies the format
    writes as values."""
    pieces: set[str] = {"string", "strings", "short strings", "null", "none", "unknown"}
    for match in _FORMAT_LINE.finditer(template("profile").template):
        pieces.update(_pieces(match.group(2)))
    return frozenset(pieces)


def is_placeholder(value: str) -> bool:
    """Whether `value` is the format's description copied: every part of it one of the
    description's parts, and more than one word in all ("casual" is a style; "formal/casual"
    and "hobbies and favourite topics" are the format)."""
    pieces = _pieces(value)
    words = sum(len(p.split()) for p in pieces)
    return bool(pieces) and words > 1 and all(p in format_pieces() for p in pieces)


def settled(data: dict[str, Any], learner: LearnerInfo | None) -> dict[str, Any]:
    """`data` without the learned fields that a setting of the learner's covers: what they
    set is what Pam goes by, and what /profile shows, never a learned value beside it."""
    if learner is None:
        return data
    covered = {field for field, setting in SETTINGS.items() if getattr(learner, setting)}
    return {key: value for key, value in data.items() if key not in covered}


def _known(old: dict[str, Any]) -> list[str]:
    """Every text the old profile holds: facts already learned support themselves."""
    texts: list[str] = []
    for value in old.values():
        texts += [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
        texts += [value] if isinstance(value, str) else []
    return texts


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in re.split(r"[,;]|\.(?:\s|$)", text) if c.strip()]


def grounded(
    new: dict[str, Any],
    old: dict[str, Any],
    messages: Sequence[str],
    learner: LearnerInfo | None,
) -> dict[str, Any]:
    """The fields of a profile answer `new` worth keeping over `old`: a language or level the
    learner set is theirs, not the model's (dropped when it says otherwise); the format's
    descriptions copied are dropped; of the facts (FACT_FIELDS), each item, or clause of
    "who", must be in `old` already or share a word with the learner's `messages` (see
    memory.grounding.supported). A field with nothing left keeps its old value."""
    learner_id = learner.id if learner is not None else None
    source = [*messages, *_known(old)]
    kept: dict[str, Any] = {}
    for name, value in new.items():
        setting = getattr(learner, SETTINGS[name]) if learner and name in SETTINGS else None
        if setting and fold(str(value)) != fold(setting):
            dropped("profile_fact", "contradicts_settings", learner_id)
            continue
        if isinstance(value, str):
            value = _text(name, value, source, learner_id)
        elif isinstance(value, list):
            value = _items(name, value, old.get(name), source, learner_id)
        if value:
            kept[name] = value
    return kept


def _text(name: str, value: str, source: list[str], learner: int | None) -> str | None:
    if is_placeholder(value):
        dropped("profile_fact", "placeholder", learner)
        return None
    if name not in FACT_FIELDS:
        return value
    clauses = _clauses(value)
    backed = [c for c in clauses if supported(c, source)]
    for _ in range(len(clauses) - len(backed)):
        dropped("profile_fact", "unsupported", learner)
    if len(backed) == len(clauses):
        return value
    return ", ".join(backed) or None


def _items(
    name: str, values: list[Any], before: Any, source: list[str], learner: int | None
) -> list[Any] | None:
    had = {fold(v) for v in before if isinstance(v, str)} if isinstance(before, list) else set()
    kept = []
    for item in values:
        if not isinstance(item, str):
            kept.append(item)
            continue
        reason = None
        if is_placeholder(item):
            reason = "placeholder"
        elif name in FACT_FIELDS and fold(item) not in had and not supported(item, source):
            reason = "unsupported"
        if reason is None:
            kept.append(item)
        else:
            dropped("profile_fact", reason, learner)
    return kept or None
