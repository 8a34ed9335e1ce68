"""Language names and CEFR levels as learners type them."""

from __future__ import annotations

from typing import Any, NamedTuple

from bot.levels import LEVELS as LEVELS  # where callers have always found it
from memory.language_names import code_for_name, display_name, language_of

LEVEL_DESCRIPTIONS = {
    "A1": "A1, beginner: very common words, present tense, very short sentences",
    "A2": "A2, elementary: everyday words, simple past and future, short sentences",
    "B1": "B1, intermediate: everyday topics, main tenses, some connectors",
    "B2": "B2, upper intermediate: natural everyday language, some idioms",
    "C1": "C1, advanced: natural and idiomatic, like with a fluent friend",
    "C2": "C2, proficient: exactly as with a native-speaking friend",
}

MAX_NAME_CHARS = 60  # the width of the learner settings columns


def language_name(text: str) -> str | None:
    """The English name of the language `text` names ("español", "es", "German"), or None.
    A code wins over a name it also spells: "ca" is Catalan, not the Cayuga language some
    call "Ca"; "en" English, not the En language of Vietnam."""
    language = language_of(text)
    if language is None:
        return None
    name = display_name(language)
    if len(name) > MAX_NAME_CHARS:  # "Chinese (Traditional, …)": keep the language
        name = display_name(language.update_dict({"script": None, "territory": None}))
    return name if len(name) <= MAX_NAME_CHARS else None


def iso_code(name: str | None) -> str | None:
    """The ISO 639-1 code of a language Pam names ("Spanish", "Portuguese (Brazil)" → "es",
    "pt"), as audio APIs take a language hint; None when it has none (or no language)."""
    tag = code_for_name(name.split(" (")[0]) if name else None
    language = language_of(tag) if tag else None
    code = (language.language or "") if language else ""
    return code if len(code) == 2 else None


def explains_in_native(level: str | None) -> bool:
    """Beginners (A1–A2) get their corrections explained in their native language."""
    return level in ("A1", "A2")


def explanation_language(level: str | None, target: str | None, native: str | None) -> str | None:
    """The language Pam explains corrections in: the native language at A1–A2, the target
    language from B1 up and while the level is unknown; whichever is known when the other is
    not. The one rule behind both the reply prompt and what the settings line tells the
    learner."""
    return (native if explains_in_native(level) else target) or native or target


class Languages(NamedTuple):
    """What Pam goes by for a learner: what they set, else what the profile learned."""

    target: str | None
    native: str | None
    level: str | None


def languages_of(
    target: str | None, native: str | None, level: str | None, learned: dict[str, Any]
) -> Languages:
    """The learner's settings (`target`, `native`, `level`), each filled in from the learned
    profile where they set none. Learned languages come from a model's answer: only a
    language's canonical name stands in for one."""

    def learned_language(key: str) -> str | None:
        value = learned.get(key)
        return language_name(value) if isinstance(value, str) else None

    return Languages(
        target or learned_language("target_language"),
        native or learned_language("native_language"),
        level or learned.get("level"),
    )
