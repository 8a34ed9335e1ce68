"""Language names and CEFR levels as learners type them."""

from __future__ import annotations

import langcodes

LEVELS = ("A1", "A2", "B1", "B2", "C1", "C2")

LEVEL_DESCRIPTIONS = {
    "A1": "A1, beginner: very common words, present tense, very short sentences",
    "A2": "A2, elementary: everyday words, simple past and future, short sentences",
    "B1": "B1, intermediate: everyday topics, main tenses, some connectors",
    "B2": "B2, upper intermediate: natural everyday language, some idioms",
    "C1": "C1, advanced: natural and idiomatic, like with a fluent friend",
    "C2": "C2, proficient: exactly as with a native-speaking friend",
}


def language_name(text: str) -> str | None:
    """The English name of the language `text` names ("español", "es", "German"), or None."""
    text = text.strip()
    if not text or len(text) > 40:
        return None
    try:
        return str(langcodes.find(text).display_name())
    except LookupError:
        pass
    try:
        language = langcodes.Language.get(text)
    except (LookupError, ValueError):
        return None
    return str(language.display_name()) if language.is_valid() else None


def normalize_level(text: str) -> str | None:
    """ "b1" → "B1"; None for anything that is not a CEFR level."""
    level = text.strip().upper()
    return level if level in LEVELS else None


def explains_in_native(level: str | None) -> bool:
    """Beginners (A1–A2) get their corrections explained in their native language."""
    return level in ("A1", "A2")
