"""Language names and CEFR levels as learners type them."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import langcodes
from language_data import names as language_names

LEVELS = ("A1", "A2", "B1", "B2", "C1", "C2")

LEVEL_DESCRIPTIONS = {
    "A1": "A1, beginner: very common words, present tense, very short sentences",
    "A2": "A2, elementary: everyday words, simple past and future, short sentences",
    "B1": "B1, intermediate: everyday topics, main tenses, some connectors",
    "B2": "B2, upper intermediate: natural everyday language, some idioms",
    "C1": "C1, advanced: natural and idiomatic, like with a fluent friend",
    "C2": "C2, proficient: exactly as with a native-speaking friend",
}

# Codes that name no language a person could practise: undetermined, multiple, missing, no
# linguistic content, and artificial-language groups.
NOT_LANGUAGES = {"und", "mul", "mis", "zxx", "art"}
MAX_NAME_CHARS = 60  # the width of the learner settings columns


@functools.cache
def _name_index(language: str) -> object:
    """The names of languages as written in `language` ("und": in every language at once)."""
    return language_names.load_trie(
        language_names.data_filename(f"trie/{language}/name_to_language.marisa")
    )


def _code_for_name(text: str) -> str | None:
    # An exact match on a name in any language ("Spanish", "español", "brazilian portuguese").
    # langcodes.find would also accept any word that merely starts like one ("frenchfries").
    # The all-languages index leaves out names that some language spells for another one
    # ("Hindi", "Ojibwa"): their English names are looked up on their own.
    key = language_names.normalize_name(text)
    for language in ("und", "en"):
        index = _name_index(language)
        if key in index:  # type: ignore[operator]
            return str(language_names.get_trie_value(index, key))
    return None


def _is_code(text: str) -> bool:
    """Whether `text` is a language code or tag with a name ("es", "pol", "pt-BR")."""
    try:
        language = langcodes.Language.get(text)
    except (LookupError, ValueError):
        return False
    base = language.language
    return bool(language.is_valid() and base and language_names.code_to_names(base))


def language_name(text: str) -> str | None:
    """The English name of the language `text` names ("español", "es", "German"), or None.
    A code wins over a name it also spells: "ca" is Catalan, not the Cayuga language some
    call "Ca"; "en" English, not the En language of Vietnam."""
    text = text.strip()
    if not text or len(text) > 40:
        return None
    try:
        code = text if _is_code(text) else (_code_for_name(text) or text)
        language = langcodes.Language.get(code)
    except (LookupError, ValueError):
        return None
    base = language.language or ""
    if (
        not language.is_valid()
        or not (base.isascii() and base.isalpha() and 2 <= len(base) <= 3)  # not "x-…", "i-…"
        or base in NOT_LANGUAGES
        or "qaa" <= base <= "qtz"
        or language.private is not None
    ):
        return None
    name = str(language.display_name())
    if len(name) > MAX_NAME_CHARS:  # "Chinese (Traditional, …, Pinyin)": keep the language
        name = str(langcodes.Language.get(base).display_name())
    return name if len(name) <= MAX_NAME_CHARS else None


def iso_code(name: str | None) -> str | None:
    """The ISO 639-1 code of a language Pam names ("Spanish", "Portuguese (Brazil)" → "es",
    "pt"), as audio APIs take a language hint; None when it has none (or no language)."""
    if not name:
        return None
    try:
        code = langcodes.find(name.split(" (")[0]).language or ""
    except LookupError:
        return None
    return code if len(code) == 2 else None


def normalize_level(text: str) -> str | None:
    """ "b1" → "B1"; None for anything that is not a CEFR level."""
    level = text.strip().upper()
    return level if level in LEVELS else None


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
