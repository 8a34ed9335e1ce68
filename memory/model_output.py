"""A model's answer read the way a webhook payload is: the final JSON object in it (not a draft
quoted before it), what arrived whole of one cut off at the output cap, and the lenient
readings of text and lists that the profile and the reply's corrections share."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```\s*$")
_SPACE = re.compile(r"\s*")
# strict=False: a raw newline inside a string is the commonest near-miss of small models.
_DECODER = json.JSONDecoder(strict=False)
# Lists inside lists are flattened this deep; a looping model nests far deeper.
_MAX_DEPTH = 4


@dataclass(frozen=True)
class FoundObject:
    """The answer's final JSON object. `complete`: False when the text ends before it closes
    (cut off at the output cap); `value` then holds the pairs that arrived whole, and
    `cut_list` the whole items of a list value the end cut short (under `cut_key`). `start`:
    where it begins in the unfenced text (`text`)."""

    value: dict[str, Any]
    complete: bool
    start: int
    text: str
    cut_key: str | None = None
    cut_list: tuple[Any, ...] = ()


@dataclass
class _Cut:
    """Where the end of the text cut an object short: under which key, and the whole items
    of the list there, if it was a list."""

    key: str | None = None
    items: list[Any] = field(default_factory=list)


class _Malformed(ValueError):
    """Not a JSON object here (as opposed to one the end of the text cut short)."""


class _TooDeep(ValueError):
    """Nested past Python's recursion limit: a looping model, nothing more to read."""


def unfenced(text: str) -> str:
    """`text` without surrounding whitespace and a Markdown code fence around it."""
    return _FENCE.sub("", text.strip())


def _list_prefix(text: str, start: int) -> list[Any]:
    """The items of the list at `start` that are whole before the text ends."""
    items: list[Any] = []
    pos = start + 1
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        try:
            item, pos = _DECODER.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return items
        items.append(item)


def _read_object(text: str, start: int, cut: _Cut) -> tuple[dict[str, Any], int | None]:
    """The object at `start` read pair by pair: (pairs, end), end None when the text ends
    before the object closes (`cut` then says where). Raises _Malformed when it is no
    object."""
    pairs: dict[str, Any] = {}
    pos = start + 1
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return pairs, None
        if text[pos] == "}":
            return pairs, pos + 1
        if text[pos] == ",":
            pos += 1
            continue
        if text[pos] != '"':
            raise _Malformed("expected a key")
        try:
            key, pos = _DECODER.raw_decode(text, pos)  # a string: text[pos] is a quote
        except json.JSONDecodeError as exc:
            if exc.msg.startswith("Unterminated string"):
                return pairs, None
            raise _Malformed(exc.msg) from None
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return pairs, None
        if text[pos] != ":":
            raise _Malformed("expected a colon")
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            # A string with no closing quote anywhere, or a value the text ends inside of.
            if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
                cut.key = key
                if text.startswith("[", pos):
                    cut.items = _list_prefix(text, pos)
                return pairs, None
            raise _Malformed(exc.msg) from None
        except RecursionError:
            raise _TooDeep from None
        pairs[key] = value


def final_object(text: str) -> FoundObject | None:
    """The last JSON object in `text` (code fences and chatter around it tolerated): the
    answer comes after any draft of it in leftover reasoning. An object that the end of the
    text cuts short ends the search, since everything after its start is inside it. None when
    the text holds no object."""
    text = unfenced(text)
    found: FoundObject | None = None
    pos = 0
    while (start := text.find("{", pos)) != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except RecursionError:
            break  # every later start is as deep inside it: stop, rather than take seconds
        except json.JSONDecodeError:
            cut = _Cut()
            try:
                pairs, cut_at = _read_object(text, start, cut)
            except _Malformed:
                pos = start + 1
                continue
            except _TooDeep:
                break
            if cut_at is None:
                return FoundObject(pairs, False, start, text, cut.key, tuple(cut.items))
            value, end = pairs, cut_at
        if isinstance(value, dict):
            found = FoundObject(value, True, start, text)
        pos = end
    return found


def looks_like_json(text: str) -> bool:
    """Whether `text` is (the start of) JSON rather than prose."""
    return unfenced(text)[:1] in ("{", "[")


def well_formed(text: str) -> str:
    """`text` as it can be stored and sent: surrogates that pair joined into their character,
    a lone one (half an emoji, as a JSON escape such as "\\ud83d" can carry) replaced by
    U+FFFD, and NUL characters (which Postgres text cannot hold) left out."""
    paired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return paired.replace("\x00", "")


def scalar_text(value: Any) -> str | None:
    """A string, stripped and well formed, or a number written as text; None for anything
    else (booleans, null, lists, objects, NaN)."""
    if isinstance(value, str):
        return well_formed(value).strip()
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else str(value)
    return None


def flat_items(value: list[Any]) -> list[Any]:
    """The items of `value` with lists inside it flattened (a few levels deep; deeper
    lists are dropped)."""
    items: list[Any] = []

    def add(values: list[Any], depth: int) -> None:
        for item in values:
            if isinstance(item, list):
                if depth < _MAX_DEPTH:
                    add(item, depth + 1)
            else:
                items.append(item)

    add(value, 1)
    return items


def text_of(value: Any, separator: str) -> str | None:
    """`value` as one text: a string or number as it is, a list's texts joined with
    `separator`. None for anything else, or when there is no text in it."""
    if isinstance(value, list):
        texts = [t for t in map(scalar_text, flat_items(value)) if t]
        return separator.join(texts) if texts else None
    return scalar_text(value)


def key_name(raw: str) -> str:
    """A key as the schemas spell theirs: "Native Language", "nativeLanguage" and
    "native-language" are all "native_language"."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", raw.strip())
    return re.sub(r"[\s\-]+", "_", snake).lower()


def loggable_key(raw: str) -> str:
    """A key the model made up, safe to log: a short identifier as `key_name` spells it,
    anything else (with spaces or long, it could carry what the learner wrote) as "a key"."""
    return key_name(raw) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]{0,29}", raw) else "a key"
