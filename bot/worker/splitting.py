"""Splitting a long reply into messages a platform accepts (Telegram: 4,096 characters,
WhatsApp through Twilio: 1,600), at the most natural boundary that fits."""

from __future__ import annotations

import re
from collections.abc import Callable

# Boundaries, best first: a paragraph break, a line break, the end of a sentence, a space.
BOUNDARIES = (
    re.compile(r"\n\s*\n"),
    re.compile(r"\n"),
    # After . ! ? … and a space; after CJK full stops, which take no space.
    re.compile(r"(?<=[.!?…])[\"'»”)]*\s+|(?<=[。！？])[」』）\"'»”)]*\s*"),
    re.compile(r"\s+"),
)


def _cut(text: str, limit: int, length: Callable[[str], int]) -> int:
    """Where to end the first part of `text` (longer than `limit`): just after the last
    boundary that keeps the part within `limit`, trying the best kind of boundary first."""
    fits = limit
    while fits > 1 and length(text[:fits]) > limit:  # e.g. emoji count double for Twilio
        fits -= max(1, (length(text[:fits]) - limit) // 2)
    window = text[: fits + 1]
    for boundary in BOUNDARIES:
        ends = [m.end() for m in boundary.finditer(window) if 0 < m.end() <= fits]
        # A boundary in the first third would leave a stub; prefer a finer boundary instead.
        good = [end for end in ends if end > fits // 3]
        if good:
            return good[-1]
    return fits  # one unbroken run of text: cut it hard


def split_message(text: str, limit: int, length: Callable[[str], int] = len) -> list[str]:
    """`text` as consecutive parts of at most `limit` (as `length` measures: characters by
    default) that join back to `text` exactly; parts end at paragraph, line, sentence or word
    boundaries where possible."""
    if limit < 1:
        raise ValueError("limit must be positive")
    parts: list[str] = []
    rest = text
    while length(rest) > limit:
        cut = _cut(rest, limit, length)
        parts.append(rest[:cut])
        rest = rest[cut:]
    if rest or not parts:
        parts.append(rest)
    return parts


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, as SMS/WhatsApp gateways count: an emoji counts 2."""
    return len(text.encode("utf-16-le")) // 2
