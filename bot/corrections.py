"""Reading the tutor's answer (JSON, or whatever the model managed) into a reply and structured
corrections, and showing them to the learner. The format it was asked in is
bot/reply_format.py's."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

from bot.reply_format import CATEGORIES, PLACEHOLDERS, RULE_PLACEHOLDER
from memory.database.records import CorrectionRecord
from memory.grounding import dropped, echoes, quoted_in, written_in
from memory.model_output import (
    final_object,
    flat_items,
    key_name,
    looks_like_json,
    text_of,
    well_formed,
)

log = logging.getLogger(__name__)

MAX_CORRECTIONS = 5
QUOTE_CHARS = 500  # original, corrected
EXPLANATION_CHARS = 300
RULE_CHARS = 200  # the column's size
# Keys models use for the chat message, "reply" first (the one Pam asks for).
REPLY_KEYS = ("reply", "message", "response", "answer", "text", "content")
_FIELD_KEYS = {
    "original": ("original", "wrong", "mistake", "error", "incorrect", "before"),
    "corrected": ("corrected", "correction", "correct", "fixed", "after"),
    "explanation": ("explanation", "why", "reason", "note"),
    "category": ("category", "type", "kind"),
    "rule": ("rule", "pattern", "rule_name", "pattern_name", "grammar_rule"),
}
# A category written in other words: the first keyword found decides.
_CATEGORY_WORDS = (
    ("word-order", ("order",)),
    ("conjugation", ("conjugat", "verb")),
    ("gender", ("gender",)),
    ("spelling", ("spell", "typo", "orthograph", "accent")),
    ("punctuation", ("punctuat",)),
    ("vocabulary", ("vocab", "word choice", "lexic", "wrong word")),
    ("grammar", ("grammar", "grammatical", "syntax", "agreement", "preposition", "article")),
)
_REPLY_FIELD = re.compile(r'"reply"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


class NoReply(ValueError):
    """The answer looked like JSON but no chat message can be read from it: an unusable
    answer, never raw JSON for the learner."""


@dataclass(frozen=True)
class TutorAnswer:
    """The chat message and the corrections of one tutor answer, and its other fields (by
    `key_name`, as the model wrote them) for a review report to be read from."""

    reply: str
    corrections: list[CorrectionRecord] = field(default_factory=list)
    rest: dict[str, Any] = field(default_factory=dict)
    # The corrections' fields that held the format's placeholder, one entry each ("category",
    # "rule", "explanation"): dropped, and logged once the answer is taken (`checked`).
    placeholders: tuple[str, ...] = ()


def _reply_text(value: Any) -> str | None:
    """A chat message: a string (or a number, or a list of strings joined), not a placeholder."""
    text = text_of(value, " ")
    if not text or text.casefold() in PLACEHOLDERS:
        return None
    return text


def _reply_of(answer: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The chat message in `answer` and the object that holds it: under "reply" or a key
    models use instead, or inside a wrapper such as {"answer": {"reply": ...}}."""
    for _ in range(3):
        keys = {key_name(k): k for k in answer}
        for name in REPLY_KEYS:
            if name in keys:
                text = _reply_text(answer[keys[name]])
                if text is not None:
                    return text, answer
        objects = [v for v in answer.values() if isinstance(v, dict)]
        if len(objects) != 1:
            break
        answer = objects[0]
    return None, answer


def _salvaged_reply(text: str) -> str | None:
    """The reply field of broken JSON (cut off, unescaped quotes): the last one that holds
    text, since drafts come first."""
    for match in reversed(list(_REPLY_FIELD.finditer(text))):
        try:
            reply = json.loads(f'"{match.group(1)}"', strict=False)
        except json.JSONDecodeError:
            reply = match.group(1)
        reply = _reply_text(reply)
        if reply:
            return reply
    return None


def _category(value: Any, noted: list[str]) -> str:
    """One of CATEGORIES: "GRAMMAR", "Word Order" and "Verb conjugation" are read; the
    format's list copied ("grammar|vocabulary|…") and anything else is "other"."""
    text = text_of(value, " ")
    if not text:
        return "other"
    name = re.sub(r"[\s_]+", "-", text.strip().casefold())
    if name in CATEGORIES:
        return name
    lowered = text.casefold()
    named = [c for c in CATEGORIES if re.search(rf"\b{c.replace('-', '[ _-]?')}\b", lowered)]
    listed = len(named) > 2 or (len(named) == 2 and re.search(r"[,/]|\bor\b", lowered))
    if "|" in name or listed:
        noted.append("category")
        return "other"
    words = name.replace("-", " ")
    for category, keywords in _CATEGORY_WORDS:
        if any(k in words for k in keywords):
            return category
    return "other"


def _field(item: dict[str, Any], name: str) -> Any:
    keys = {key_name(k): k for k in item}
    for alias in _FIELD_KEYS[name]:
        if alias in keys:
            return item[keys[alias]]
    return None


def _correction(item: Any, noted: list[str]) -> CorrectionRecord:
    """One correction read leniently; raises ValueError (the reason, never content) for one
    that cannot be. The fields that held the format's placeholder are noted in `noted`."""
    if not isinstance(item, dict):
        raise ValueError("not an object")
    original = text_of(_field(item, "original"), " ")
    corrected = text_of(_field(item, "corrected"), " ")
    if not original:
        raise ValueError("no original")
    if not corrected:
        raise ValueError("no corrected form")
    if original == corrected:
        raise ValueError("the corrected form is the original")
    return CorrectionRecord(
        original=original[:QUOTE_CHARS],
        corrected=corrected[:QUOTE_CHARS],
        explanation=_explanation(_field(item, "explanation"), noted),
        category=_category(_field(item, "category"), noted),
        rule=_rule(_field(item, "rule"), noted),
    )


def _explanation(value: Any, noted: list[str]) -> str:
    """The one-line why, capped: "" for the format's placeholder ("...")."""
    text = (text_of(value, " ") or "").strip()
    if text.casefold() in PLACEHOLDERS:
        noted.append("explanation")
        return ""
    return text[:EXPLANATION_CHARS]


def _rule(value: Any, noted: list[str]) -> str:
    """The pattern's name on one line, capped: "" when the model named none (or gave
    something that is no text)."""
    text = " ".join((text_of(value, "; ") or "").split())
    if text.casefold() in (RULE_PLACEHOLDER.casefold(), "...", "…"):
        noted.append("rule")
        return ""
    return text[:RULE_CHARS]


def read_corrections(raw: Any, noted: list[str] | None = None) -> list[CorrectionRecord]:
    """The corrections in an answer's "corrections" value, read one by one: a single object
    stands for a list of one, lists inside it are flattened, unreadable items and repeats are
    dropped (logged with the reason, never the content), at most MAX_CORRECTIONS kept. Fields
    that held the format's placeholder are noted in `noted`."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        log.info("reply corrections dropped: %s, not a list", type(raw).__name__)
        return []
    kept: list[CorrectionRecord] = []
    seen: set[tuple[str, str]] = set()
    for number, item in enumerate(flat_items(raw), 1):
        try:
            correction = _correction(item, noted if noted is not None else [])
        except ValueError as exc:
            log.info("reply correction %s dropped: %s", number, exc)
            continue
        key = (correction.original.casefold(), correction.corrected.casefold())
        if key in seen:
            log.info("reply correction %s dropped: a repeat", number)
            continue
        seen.add(key)
        kept.append(correction)
    if len(kept) > MAX_CORRECTIONS:
        log.info(
            "reply corrections: %s past the first %s dropped",
            len(kept) - MAX_CORRECTIONS,
            MAX_CORRECTIONS,
        )
    return kept[:MAX_CORRECTIONS]


def parse_answer(text: str) -> TutorAnswer:
    """The reply and corrections in the model's answer: its final JSON object (a draft
    before it in leftover reasoning is not the answer), read leniently; of one cut off at
    the output cap, the reply and the corrections that arrived whole. Prose (a model that
    ignored the format) is the reply as it is. Raises NoReply for an answer that looks like
    JSON but holds no chat message, and for an empty one."""
    text = well_formed(text)
    found = final_object(text)
    if found is not None:
        reply, holder = _reply_of(found.value)
        raw = next((v for k, v in holder.items() if key_name(k) == "corrections"), None)
        if reply is not None and found.complete and looks_like_json(reply):
            # Encoded twice ({"reply": "{\"reply\": ...}"}): the inner answer is the answer.
            inner = final_object(reply)
            if inner is not None and inner.complete and _reply_of(inner.value)[0]:
                return parse_answer(reply)
        if not found.complete:
            log.info("reply answer cut off: reading what arrived whole")
            if found.cut_key is not None and key_name(found.cut_key) == "corrections":
                raw = list(found.cut_list)
            if reply is None:
                reply = _salvaged_reply(found.text[found.start :])
        if reply is not None:
            rest = {
                key_name(k): v
                for k, v in holder.items()
                if key_name(k) not in (*REPLY_KEYS, "corrections")
            }
            noted: list[str] = []
            return TutorAnswer(reply, read_corrections(raw, noted), rest, tuple(noted))
    # Broken JSON (unescaped quotes): salvage the reply field if it is there.
    reply = _salvaged_reply(text)
    if reply is not None:
        return TutorAnswer(reply)
    stripped = text.strip()
    attempted = found is not None and any(
        key_name(k) in (*REPLY_KEYS, "corrections") for k in found.value
    )
    if not stripped or attempted or looks_like_json(stripped):
        raise NoReply("no chat message in the answer")
    return TutorAnswer(stripped)


def answer_problem(text: str, message: str, previous: str, learner: int | None) -> str | None:
    """Why an answer is no reply to send for the learner's `message` (Pam's `previous` reply
    before it, "" for none), or None: no chat message in it (`parse_answer` raises NoReply),
    or a reply that says their message or Pam's previous reply back (an echo, once stored,
    primes the model to echo again). For the LLM edge, which asks again within its budget;
    each one turned down is logged."""
    problem, reason = None, "no_reply"
    try:
        reply = parse_answer(text).reply  # once: it is the answer's costliest read
    except NoReply as exc:
        problem = str(exc)
    else:
        if echoes(reply, message):
            problem, reason = "the reply repeats the learner's message", "echo_learner"
        elif previous and echoes(reply, previous):
            problem, reason = "the reply repeats Pam's previous reply", "echo_pam"
    if problem is not None:
        dropped("reply", reason, learner)
    return problem


def _bare(text: str) -> str:
    """`text` with its spacing collapsed and the punctuation around it left out."""
    return re.sub(r"^[\W_]+|[\W_]+$", "", " ".join(text.split()))


def checked(answer: TutorAnswer, message: str, learner: int | None) -> TutorAnswer:
    """`answer` as it is kept: its corrections `grounded` in the learner's `message`, and the
    placeholders dropped from them logged (once, here: the answer is parsed more than once)."""
    for kind in answer.placeholders:
        dropped(kind, "placeholder", learner)
    return replace(answer, corrections=grounded(answer.corrections, message, learner))


def grounded(
    found: list[CorrectionRecord], message: str, learner: int | None
) -> list[CorrectionRecord]:
    """The corrections of the learner's latest `message` that are really of it: the original
    is quoted from it (compared loosely, a few edits allowed: memory.grounding.quoted_in) and
    differs from the corrected form by more than spacing and the punctuation around it. A
    correction from an earlier turn, of words the learner never wrote, or of a sentence they
    already wrote right (only the corrected form is in the message) is dropped, logged with
    the reason, never the content."""
    kept = []
    for correction in found:
        reason = None
        if _bare(correction.original) == _bare(correction.corrected):
            reason = "unchanged"
        else:
            where = quoted_in(correction.original, message)
            if where is None:
                reason = "not_in_message"
            elif where and written_in(correction.corrected, message):
                # Accents count here: "esta → está" corrects a missing accent.
                reason = "already_right"
        if reason is None:
            kept.append(correction)
        else:
            dropped("correction", reason, learner)
    return kept


def _line(c: CorrectionRecord) -> str:
    why = f" — {c.explanation}" if c.explanation else ""
    return f"✏️ {c.original} → {c.corrected}{why}"


def render(answer: TutorAnswer) -> str:
    """The message the learner sees: the reply, then one line per correction."""
    lines = [answer.reply]
    if answer.corrections:
        lines.append("")
        lines += [_line(c) for c in answer.corrections]
    return "\n".join(lines)


def shown_in(shown: str, found: list[CorrectionRecord]) -> list[CorrectionRecord]:
    """Of the corrections `found` for a message, those the reply `shown` (made by `render`)
    showed: a reply at the "few" density shows one and stores them all. All of them when it
    shows none of them as `render` writes them (a reply kept in another form)."""
    lines = set(shown.split("\n"))
    showing = [c for c in found if _line(c) in lines]
    return showing or found


def chat_part(shown: str) -> str:
    """What Pam said in a message made by `render`, without its correction lines: the model
    needs the conversation, not its own corrections of it (they are stored apart)."""
    reply, separator, rest = shown.partition("\n\n✏️ ")
    if separator and all(line.startswith("✏️ ") for line in ("✏️ " + rest).split("\n")):
        return reply
    return shown
