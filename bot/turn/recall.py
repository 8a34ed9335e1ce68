"""Recall in the turn: when Pam searches a learner's past on its own, the `recall` tool offered
to models that call tools, and what a search found as the reply prompt's data — at most three
snippets, each dated relative to now, under one token cap for them all. The search itself is
a `memory.recall.search.Searcher`; this module only decides, asks and frames."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from bot.turn.recall_phrases import (
    ABOUT_ME,
    GERMAN_DETERMINERS,
    INTRODUCING,
    NOT_NAMES,
    PAST_PHRASES,
    TO_YOU,
)
from memory.llm import ChatMessage, Tool, ToolCall
from memory.recall.search import CORRECTION, Snippet
from memory.recall_terms import plain
from memory.tokens import TokenCounter
from prompts import as_data

# How a turn recalled: Pam searched on its own, the model called the tool, or neither.
How = Literal["auto", "tool", "none"]

TOOL_NAME = "recall"
MAX_SNIPPETS = 3
# The tag of the data section the snippets sit in; the reply prompt's rules name it.
TAG = "recalled_conversation"
# A tool call's query, at most: a model's argument is untrusted input.
MAX_QUERY_CHARS = 300
# A snippet cut to fit the cap keeps at least this many tokens of text, or is left out.
MIN_CUT_TOKENS = 8

# Offered on every reply request in tool mode, so it costs tokens every turn: kept short.
RECALL_TOOL: Tool = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search this learner's earlier conversations (older than the chat shown) "
            "when they refer to something not in view."
        ),
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "keywords"}},
            "required": ["query"],
        },
    },
}


@dataclass(frozen=True)
class RecallUse:
    """What recall did in one turn, for the log line and the token benchmark: how it ran,
    how many snippets reached the prompt, and the tokens of the data section that carried
    them (0 when none did). The tool path also costs RECALL_TOOL on every request and, when
    the model calls it, one more call (counted in the turn's usage)."""

    how: How = "none"
    snippets: int = 0
    tokens: int = 0


NO_RECALL = RecallUse()


def fold(text: str) -> str:
    """`text` for matching: accents removed, case folded, typographic apostrophes plain."""
    return plain(text.replace("’", "'").replace("ʼ", "'")).casefold()


def _phrase_pattern(phrases: Sequence[str], *, accents: bool = False) -> re.Pattern[str]:
    """Any of `phrases` as whole words, in `fold`ed text (with `accents`: in text only
    case-folded)."""
    norm = (lambda p: p.casefold()) if accents else fold
    alternatives = sorted({re.escape(norm(p)) for p in phrases}, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(?:" + "|".join(alternatives) + r")(?![\w-])")


_PAST = {language: _phrase_pattern(phrases) for language, phrases in PAST_PHRASES.items()}
_ABOUT_ME = _phrase_pattern([w for words in ABOUT_ME.values() for w in words.split()])
_TO_YOU = _phrase_pattern([w for words in TO_YOU.values() for w in words.split()], accents=True)
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_OPENERS = " \t\"'«»“”„‚‘’¿¡([-–—*_"
_SENTENCE_END = ".!?…:;\n"
# A sentence: up to and including its end mark (a question's "?" stays with it).
_SENTENCE = re.compile(r"[^.!?…\n]+[.!?…\n]*")
_NOT_NAMES = frozenset(fold(w) for w in NOT_NAMES)
_DETERMINERS = frozenset(fold(w) for w in GERMAN_DETERMINERS)
_INTRODUCING = frozenset(fold(w) for w in INTRODUCING)


def past_language(text: str) -> str | None:
    """The language of the first phrase in `text` that refers to earlier conversations
    ("te acuerdas", "last time", "weißt du noch"), None if there is none."""
    folded = fold(text)
    for language, pattern in _PAST.items():
        if pattern.search(folded):
            return language
    return None


def _in_questions(text: str) -> list[tuple[int, int]]:
    """Where `text`'s questions are: the spans of its sentences with a "?" or a "¿" (a
    Spanish question may open mid-sentence: "Me gusta el cine, ¿y a ti?")."""
    return [m.span() for m in _SENTENCE.finditer(text) if "?" in m.group(0) or "¿" in m.group(0)]


def unmentioned_names(text: str, known: str) -> list[str]:
    """The capitalised words in `text`'s questions that look like names — not at a
    sentence's start, not a day, month or language, not a German noun after its article,
    not a name being introduced ("me llamo Lena") — and that `known` (what the prompt
    already carries) never mentions.

    Only questions: a name asked about ("¿Qué tal está Luna?", "Did you like the photos of
    Annecy?") takes for granted that Pam knows it, while a name in a statement is news the
    learner is telling ("Fui a Valencia"), which needs no search — and searching on every
    place a learner mentions recalled on up to two turns in three of the token benchmark's
    conversations, for nothing the reply needed."""
    questions = _in_questions(text)
    if not questions:
        return []
    candidates: list[str] = []
    previous = ""
    for match in _WORD.finditer(text):
        word = match.group(0).strip("'-")
        before, previous = previous, fold(word)
        if not any(start <= match.start() < end for start, end in questions):
            continue
        if len(word) < 2 or not word[0].isupper() or (word.isupper() and len(word) <= 3):
            continue
        head = text[: match.start()].rstrip(_OPENERS)
        if not head or head[-1] in _SENTENCE_END:
            continue
        if previous in _NOT_NAMES or before in _DETERMINERS or before in _INTRODUCING:
            continue
        candidates.append(word)
    if not candidates:
        return []
    # Only now the whole prompt is read: most turns have no name in a question, and folding
    # every word of the window, summary and profile is most of what this check costs.
    known_words = set(_WORD.findall(fold(known)))
    return [word for word in candidates if fold(word) not in known_words]


def asks_about_themselves(text: str) -> bool:
    """Whether one of `text`'s questions is about the learner ("¿Dónde viven mis papás?",
    "When is my exam?", "Wo arbeite ich gerade?") and not to Pam ("Ich mag Krimis, und du?"):
    they ask what they told Pam."""
    for start, end in _in_questions(text):
        question = text[start:end]
        if _ABOUT_ME.search(fold(question)) and not _TO_YOU.search(question.casefold()):
            return True
    return False


def wants_recall(text: str, known: str) -> bool:
    """Whether Pam should search the learner's past for `text` on its own: it refers to
    earlier conversations, asks about the learner themselves, or names in a question
    something `known` (window, summary, profile) does not."""
    return (
        past_language(text) is not None
        or asks_about_themselves(text)
        or bool(unmentioned_names(text, known))
    )


def tool_query(call: ToolCall) -> str | None:
    """The query of a recall tool call, None when its arguments are no JSON object with a
    non-empty string `query` (untrusted: the model wrote them)."""
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else None
    except (ValueError, RecursionError):
        return None
    query = arguments.get("query") if isinstance(arguments, dict) else None
    if not isinstance(query, str) or not query.strip():
        return None
    return " ".join(query.split())[:MAX_QUERY_CHARS]


def relative_date(said_at: datetime, now: datetime) -> str:
    """When something was said, as a friend would put it: "today", "yesterday", "3 days
    ago", "2 weeks ago", "3 months ago", "2 years ago" (by calendar days, UTC)."""
    if said_at.tzinfo is None:
        said_at = said_at.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    days = (now.astimezone(UTC).date() - said_at.astimezone(UTC).date()).days
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 7:
        return f"{days} days ago"
    if days < 30:
        weeks = days // 7
        return "a week ago" if weeks == 1 else f"{weeks} weeks ago"
    if days < 365:
        months = days // 30
        return "a month ago" if months == 1 else f"{months} months ago"
    years = days // 365
    return "a year ago" if years == 1 else f"{years} years ago"


def _prefix(snippet: Snippet, now: datetime) -> str:
    who = "correction" if snippet.kind == CORRECTION else snippet.role
    if who not in ("learner", "pam", "correction"):
        who = "learner"
    return f"- {relative_date(snippet.said_at, now)}, {who}: "


def snippet_lines(
    snippets: Sequence[Snippet], now: datetime, counter: TokenCounter, max_tokens: int
) -> tuple[str, int]:
    """The snippets as dated lines, best first, at most MAX_SNIPPETS, and how many made it.
    All the lines together never exceed `max_tokens` tokens: the first that does not fit is
    cut to fit (if enough of it is left to mean something) and the rest are left out."""
    lines: list[str] = []
    for snippet in snippets[:MAX_SNIPPETS]:
        text = as_data(" ".join(snippet.text.split()), 4000)
        if not text:
            continue
        prefix = _prefix(snippet, now)
        line = prefix + text
        if counter.count("\n".join([*lines, line])) <= max_tokens:
            lines.append(line)
            continue
        budget = max_tokens - counter.count("\n".join([*lines, prefix])) - 1
        while budget >= MIN_CUT_TOKENS:
            cut = prefix + counter.truncate(text, budget).rstrip() + "…"
            if counter.count("\n".join([*lines, cut])) <= max_tokens:
                lines.append(cut)
                break
            budget -= 1
        break
    return "\n".join(lines), len(lines)


def section(lines: str) -> str:
    """The snippets' lines as the reply prompt's delimited data section."""
    return f"<{TAG}>\n{lines}\n</{TAG}>"


def tool_result(lines: str) -> str:
    """What the recall tool answers the model: the section, or that nothing was found."""
    if not lines:
        return f"<{TAG}>\n(nothing found)\n</{TAG}>"
    return section(lines)


def tool_exchange(call: ToolCall, lines: str) -> list[ChatMessage]:
    """The assistant's recall call (only the one Pam ran) and the tool's answer to it, to
    append to the reply prompt for the second request."""
    return [
        {"role": "assistant", "content": "", "tool_calls": [call.message_part()]},
        {"role": "tool", "content": tool_result(lines), "tool_call_id": call.id},
    ]


def recall_in(messages: Sequence[ChatMessage], counter: TokenCounter) -> RecallUse:
    """What recall put into a reply request's `messages` (for the token benchmark, which
    sees the requests): the section in the system prompt (auto) or a recall tool answer
    (tool), with its snippet count and tokens; NO_RECALL when there is neither."""
    for message in messages:
        content = message["content"]
        how: How | None = None
        if message["role"] == "tool":
            how = "tool"
        elif message["role"] == "system" and f"\n<{TAG}>\n" in content:
            how = "auto"
        if how is None:
            continue
        data = content.split(f"<{TAG}>\n", 1)[1].split(f"\n</{TAG}>", 1)[0]
        found = 0 if data == "(nothing found)" else data.count("\n- ") + data.startswith("- ")
        return RecallUse(how, found, counter.count(section(data)) if found else 0)
    return NO_RECALL
