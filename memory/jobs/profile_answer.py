"""Reading the model's profile answer field by field: the near-misses models really write are
coerced, what is still unknown or invalid is dropped with a log line naming the field and why
(never its content), and the caps are kept. One bad field never costs the others."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from memory.database.records import ALL, DENSITIES, FEW, NORMAL
from memory.grounding import dropped
from memory.jobs.plans import read_plans
from memory.model_output import (
    final_object,
    flat_items,
    key_name,
    loggable_key,
    scalar_text,
    text_of,
)

log = logging.getLogger(__name__)

MAX_PROFILE_CHARS = 4000
TEXT_CHARS = 300  # who, style, focus
ITEM_CHARS = 120  # one item of a list
LANGUAGE_CHARS = 40
MAX_ITEMS = 10
LEVELS = ("A1", "A2", "B1", "B2", "C1", "C2")

_CEFR = re.compile(r"(?<![a-z0-9])([abc])\s*-?\s*([12])(?![0-9])", re.IGNORECASE)
# Words for a level, for answers that give no code: the most specific first.
_LEVEL_WORDS = (
    ("upper intermediate", "B2"),
    ("upper-intermediate", "B2"),
    ("pre-intermediate", "A2"),
    ("pre intermediate", "A2"),
    ("intermediate", "B1"),
    ("elementary", "A2"),
    ("beginner", "A1"),
    ("advanced", "C1"),
    ("proficient", "C2"),
    ("mastery", "C2"),
)
# Words for a correction density, for answers that give none of DENSITIES as such.
_DENSITY_WORDS = (
    ("fewer", FEW),
    ("less", FEW),
    ("minimal", FEW),
    ("important", FEW),
    ("every", ALL),
    ("everything", ALL),
    ("default", NORMAL),
    ("usual", NORMAL),
    ("standard", NORMAL),
)
_WORDS = re.compile(r"[a-z]+")
# Strong separators: one item each per line, semicolon or bullet.
_LINES = re.compile(r"\s*[\n;•]\s*")
# Commas, not inside numbers ("1,5 km").
_COMMAS = re.compile(r"\s*,(?!\d)\s*")
_AND = re.compile(r"\s+(?:and|&)\s+", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*•]|\d+[.)])\s+|^(?:and|&)\s+", re.IGNORECASE)
_TRUE = ("true", "yes", "1")


class InvalidProfile(ValueError):
    """The model's profile answer had nothing usable in it; the old profile stays."""


class _Dropped(ValueError):
    """This field of the answer cannot be read: the message is the reason (never content)."""


def _text(value: Any, cap: int) -> str | None:
    """A free-text field: a string, a number as text, a list's texts joined by commas."""
    if isinstance(value, bool):
        raise _Dropped("a boolean, not text")
    if isinstance(value, dict):
        raise _Dropped("an object, not text")
    if value is None or value == []:
        return None
    text = text_of(value, ", ")
    if text is None:
        raise _Dropped("a list without text" if isinstance(value, list) else "not text")
    if not text:
        return None
    if len(text) > cap:
        # Cut, a fact would be half a fact; the old value stays instead.
        raise _Dropped(f"longer than {cap} characters")
    return text


def _level(value: Any) -> str | None:
    """A CEFR level: "b1", "B1 (intermediate)", "Intermediate (B1)", ["B1"] are all B1."""
    if isinstance(value, list):
        texts = [t for t in map(scalar_text, flat_items(value)) if t]
        value = texts[0] if texts else None
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Dropped("not a CEFR level")
    codes = {(m.group(1) + m.group(2)).upper() for m in _CEFR.finditer(value)}
    if len(codes) > 2 or (len(codes) == 2 and "|" in value):
        # The format's list ("A1", "A2", … or "A1|A2"), copied: no estimate ("A2-B1" is one).
        dropped("profile_fact", "placeholder", None)
        raise _Dropped("the format's list of levels")
    code = _CEFR.search(value)
    if code:
        return f"{code.group(1)}{code.group(2)}".upper()
    lowered = value.casefold()
    for word, level in _LEVEL_WORDS:
        if word in lowered:
            return level
    raise _Dropped("not a CEFR level")


def _density(value: Any) -> str | None:
    """How many corrections the learner asked for: "few", "Fewer", "all of them", "less
    corrections" are read; the format's list copied ("few|normal|all") is no answer."""
    if isinstance(value, list):
        texts = [t for t in map(scalar_text, flat_items(value)) if t]
        value = texts[0] if len(texts) == 1 else None
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Dropped("not a correction density")
    words: list[str] = _WORDS.findall(value.casefold())
    named = {word for word in words if word in DENSITIES}
    if len(named) > 1 or "|" in value:
        dropped("profile_fact", "placeholder", None)
        raise _Dropped("the format's list of densities")
    if named:
        return named.pop()
    for word, density in _DENSITY_WORDS:
        if word in words:
            return density
    raise _Dropped("not a correction density")


def _split(text: str, topics: bool) -> list[str]:
    """The items of a list written as one string: one per line, semicolon or bullet; if
    there is none of those, one per comma; topics also split at "and"."""
    parts = _LINES.split(text)
    if len(parts) == 1:
        parts = _COMMAS.split(text)
    if topics:
        parts = [piece for part in parts for piece in _AND.split(part)]
    return parts


def _items(value: Any, notes: list[str], topics: bool) -> list[str] | None:
    """A list field: a list (lists inside it flattened), or one string of items. Items too
    long or too many are left out, each noted in `notes`."""
    if isinstance(value, bool):
        raise _Dropped("a boolean, not a list")
    if isinstance(value, dict):
        raise _Dropped("an object, not a list")
    if isinstance(value, str):
        raw: list[Any] = _split(value, topics)
    elif isinstance(value, list):
        raw = flat_items(value)
    else:
        raw = [value]  # a number, or null
    items: list[str] = []
    seen: set[str] = set()
    skipped = 0
    for item in raw:
        text = scalar_text(item)
        text = _BULLET.sub("", text).strip() if text else text
        if not text:
            if item not in (None, ""):  # a boolean, an object: not an item
                skipped += 1
            continue
        if len(text) > ITEM_CHARS:
            notes.append(f"an item longer than {ITEM_CHARS} characters left out")
            skipped += 1
            continue
        if text.casefold() not in seen:
            seen.add(text.casefold())
            items.append(text)
    if not items and skipped:
        raise _Dropped("no item is short text")
    if len(items) > MAX_ITEMS:
        notes.append(f"{len(items) - MAX_ITEMS} items past the first {MAX_ITEMS} left out")
        items = items[:MAX_ITEMS]
    return items or None


def _plans(value: Any, notes: list[str]) -> list[dict[str, str]] | None:
    """Dated plans (memory.jobs.plans): a list with no whole plan in it is dropped."""
    plans = read_plans(value, notes)
    if plans == []:
        raise _Dropped("no plan with a short `what` and a date")
    return plans


# Each field's reader: the value as kept, None for "nothing" (null, "", []), _Dropped when
# unreadable; what it left out of a value it kept goes into the notes.
Reader = Callable[[Any, list[str]], Any]
READERS: dict[str, Reader] = {
    "who": lambda v, _: _text(v, TEXT_CHARS),
    "style": lambda v, _: _text(v, TEXT_CHARS),
    "focus": lambda v, _: _text(v, TEXT_CHARS),
    "interests": lambda v, notes: _items(v, notes, topics=True),
    "misc": lambda v, notes: _items(v, notes, topics=False),
    "native_language": lambda v, _: _text(v, LANGUAGE_CHARS),
    "target_language": lambda v, _: _text(v, LANGUAGE_CHARS),
    "level": lambda v, _: _level(v),
    "recurring_mistakes": lambda v, notes: _items(v, notes, topics=False),
    "corrections": lambda v, _: _density(v),
    "plans": _plans,
}
FIELDS = tuple(READERS)
# Names models give fields when they do not keep to Pam's.
ALIASES = {"hobbies": "interests", "mistakes": "recurring_mistakes", "cefr_level": "level"}
LIST_FIELDS = ("interests", "misc", "recurring_mistakes")


def _no_change(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().casefold() in _TRUE
    return value is True or value == 1


def _unwrapped(answer: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The answer's fields and whether it says "no change": `no_change` taken out, and a
    wrapper such as {"profile": {...}} or {"updated_profile": {...}} opened (two levels at
    most)."""
    no_change = False
    for depth in range(3):
        answer = dict(answer)
        for key in [k for k in answer if key_name(k) == "no_change"]:
            no_change = no_change or _no_change(answer.pop(key))
        if depth == 2 or any(ALIASES.get(key_name(k), key_name(k)) in READERS for k in answer):
            break
        objects = [v for v in answer.values() if isinstance(v, dict)]
        if len(objects) != 1:
            break
        answer = objects[0]
    return answer, no_change


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False))


def fit(old: dict[str, Any], new: dict[str, Any], learner: int | None = None) -> dict[str, Any]:
    """The fields of `new` that fit with `old` inside MAX_PROFILE_CHARS: while the merge is
    over, the field that grows the profile most keeps its old value (logged). Raises
    InvalidProfile when none of `new` fits."""
    kept = dict(new)
    while kept and _size({**old, **kept}) > MAX_PROFILE_CHARS:

        def growth(name: str) -> int:
            before = _size({name: old[name]}) if name in old else 0
            return _size({name: kept[name]}) - before

        name = max(kept, key=growth)
        del kept[name]
        log.info(
            "profile answer learner=%s: field %s dropped: the profile would be over the size cap",
            learner,
            name,
        )
    if new and not kept:
        raise InvalidProfile("the answer would put the profile over the size cap")
    return kept


def parse_profile_answer(
    text: str, learner: int | None = None, old: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The fields the model's answer changes, read field by field and fitted to the caps
    together with `old` (the current profile); None for "no change" (`{"no_change": true}`,
    or an answer with every field null or empty). Raises InvalidProfile when the answer is
    no JSON object or nothing in it can be read."""
    found = final_object(text)
    if found is None:
        raise InvalidProfile("no JSON object in the answer")
    if not found.complete:
        log.info(
            "profile answer learner=%s: cut off; reading the %s fields that arrived whole",
            learner,
            len(found.value),
        )
    answer, no_change = _unwrapped(found.value)
    data: dict[str, Any] = {}
    dropped = 0
    for raw_key, value in answer.items():
        name = key_name(raw_key)
        name = ALIASES.get(name, name)
        reader = READERS.get(name)
        reason = None
        if reader is None:
            reason, name = "not a profile field", loggable_key(raw_key)
        elif name in data:
            reason = "given twice"
        else:
            notes: list[str] = []
            try:
                read = reader(value, notes)
            except _Dropped as exc:
                reason = str(exc)
            else:
                if read is not None:
                    data[name] = read
            for note in notes:
                log.info("profile answer learner=%s: field %s: %s", learner, name, note)
        if reason is not None:
            dropped += 1
            log.info("profile answer learner=%s: field %s dropped: %s", learner, name, reason)
    if not data:
        if dropped or not found.complete:
            raise InvalidProfile(f"no readable field ({dropped} dropped)")
        return None
    if no_change:
        # Contradictory, as strict structured output can make it: the fields are the answer.
        log.info("profile answer learner=%s: no_change with %s fields", learner, len(data))
    return fit(old or {}, data, learner)
