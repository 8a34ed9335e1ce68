"""Reading the tutor's answer (JSON, or whatever the model managed) into a reply and structured
corrections, and showing them to the learner."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from memory.profile import extract_json_object
from memory.store import CorrectionRecord

CATEGORIES = (
    "grammar",
    "vocabulary",
    "spelling",
    "word-order",
    "gender",
    "conjugation",
    "punctuation",
    "other",
)
MAX_CORRECTIONS = 5
_REPLY_FIELD = re.compile(r'"reply"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


@dataclass(frozen=True)
class TutorAnswer:
    """The chat message and the corrections of one tutor answer."""

    reply: str
    corrections: list[CorrectionRecord] = field(default_factory=list)


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _correction(item: Any) -> CorrectionRecord | None:
    if not isinstance(item, dict):
        return None
    original = _text(item.get("original"), 500)
    corrected = _text(item.get("corrected"), 500)
    if not original or not corrected or original == corrected:
        return None
    category = _text(item.get("category"), 40).lower().replace(" ", "-")
    return CorrectionRecord(
        original=original,
        corrected=corrected,
        explanation=_text(item.get("explanation"), 300),
        category=category if category in CATEGORIES else "other",
    )


def parse_answer(text: str) -> TutorAnswer:
    """The reply and corrections in the model's answer. Never fails: an answer whose structure
    cannot be read is still the reply, without corrections."""
    try:
        value = extract_json_object(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("reply"), str) and value["reply"].strip():
        raw = value.get("corrections")
        items = raw if isinstance(raw, list) else []
        corrections = [c for c in map(_correction, items) if c is not None]
        return TutorAnswer(value["reply"].strip(), corrections[:MAX_CORRECTIONS])
    # Broken JSON (cut off, unescaped quotes): salvage the reply field if it is there.
    match = _REPLY_FIELD.search(text)
    if match:
        try:
            reply = json.loads(f'"{match.group(1)}"')
        except json.JSONDecodeError:
            reply = match.group(1)
        if reply.strip():
            return TutorAnswer(reply.strip())
    return TutorAnswer(text.strip())


def render(answer: TutorAnswer) -> str:
    """The message the learner sees: the reply, then one line per correction."""
    lines = [answer.reply]
    if answer.corrections:
        lines.append("")
        for c in answer.corrections:
            why = f" — {c.explanation}" if c.explanation else ""
            lines.append(f"✏️ {c.original} → {c.corrected}{why}")
    return "\n".join(lines)


def chat_part(shown: str) -> str:
    """What Pam said in a message made by `render`, without its correction lines: the model
    needs the conversation, not its own corrections of it (they are stored apart)."""
    reply, separator, rest = shown.partition("\n\n✏️ ")
    if separator and all(line.startswith("✏️ ") for line in ("✏️ " + rest).split("\n")):
        return reply
    return shown
