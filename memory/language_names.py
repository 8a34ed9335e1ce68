"""The names Pam knows languages by, and the languages a learner's words name.

The names are CLDR's (English names, each language's own name, names in the major
languages) and the IANA registry's, built into `language_names.json` by
`memory/language_names_cldr.py`; tags are parsed and validated by langcodes, whose own tables
hold no names. The whole file costs a few MB once read, where the name tables of
`language_data` cost a process some 270 MB."""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import langcodes

PATH = Path(__file__).with_name("language_names.json")

# Codes that name no language a person could practise: undetermined, multiple, missing, no
# linguistic content, and artificial-language groups.
NOT_LANGUAGES = {"und", "mul", "mis", "zxx", "art"}
MAX_TEXT_CHARS = 40  # longer than any language's name or tag a learner would type
_QUALIFIED = re.compile(r"(.+?) \((.+)\)")  # "Portuguese (Brazil)", as display_name writes


def normalize(name: str) -> str:
    """A name as the index keys it: case, curly apostrophes, hyphens, brackets and commas do
    not matter ("Chinese (Traditional)", "chinese traditional")."""
    name = name.casefold().replace("’", "'").replace("-", " ")
    for mark in "(),":
        name = name.replace(mark, "")
    return " ".join(name.split())


def ascii_folded(key: str) -> str | None:
    """`key` without its accents ("español" → "espanol") when that leaves plain ASCII, else
    None: stripping marks off other scripts would leave a different word, not a spelling."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", key) if not unicodedata.combining(c))
    return folded if folded != key and folded.isascii() else None


@functools.cache
def _tables() -> dict[str, Any]:
    tables: dict[str, Any] = json.loads(PATH.read_text(encoding="utf-8"))
    return tables


@functools.cache
def _codes(kind: str) -> dict[str, str]:
    """Normalised English name → code, of scripts or territories."""
    return {normalize(name): code for code, name in _tables()[kind].items()}


def names_index() -> dict[str, str]:
    """Every name Pam knows a language by, normalised, with the tag it names."""
    names: dict[str, str] = _tables()["names"]
    return names


def english_name(kind: str, code: str) -> str | None:
    """CLDR's English name of a language, script or territory code (`kind`: "languages",
    "scripts", "territories"), or None."""
    name = _tables()[kind].get(code)
    return str(name) if name else None


def code_for_name(text: str) -> str | None:
    """The tag of the language `text` is an exact name of, in any language Pam indexes
    ("Spanish", "español", "espanol", "brazilian portuguese"), or None. Exact: a word that
    merely starts like a name ("frenchfries") is none."""
    names = _tables()["names"]
    key = normalize(text)
    tag = names.get(key) or names.get(ascii_folded(key) or "")
    if tag is None and (qualified := _QUALIFIED.fullmatch(text.strip())):
        return _qualified_code(qualified.group(1), qualified.group(2).split(", "))
    return str(tag) if tag else None


def _qualified_code(name: str, qualifiers: list[str]) -> str | None:
    """The tag of a name display_name wrote ("Portuguese (Brazil)" → "pt-BR"), so that Pam's
    own names read back as what they name."""
    tag = code_for_name(name)
    if tag is None:
        return None
    subtags = []
    for qualifier in qualifiers:
        key = normalize(qualifier)
        subtag = _codes("scripts").get(key) or _codes("territories").get(key)
        if subtag is None:
            return None
        subtags.append(subtag)
    return "-".join([tag, *subtags])


def _as_code(text: str) -> langcodes.Language | None:
    """`text` read as a language code or tag with a name ("es", "pol", "pt-BR"), or None."""
    try:
        language = langcodes.Language.get(text)
    except (LookupError, ValueError):
        return None
    base = language.language
    return language if language.is_valid() and base and english_name("languages", base) else None


def language_of(text: str) -> langcodes.Language | None:
    """The language `text` names, as a code or a name, normalised ("iw" → he, "pol" → pl);
    None when it names none, or nothing a person could practise. A code wins over a name it
    also spells: "ga" is Irish, not the Ga language of Ghana."""
    text = text.strip()
    if not text or len(text) > MAX_TEXT_CHARS:
        return None
    language = _as_code(text)
    if language is None:
        tag = code_for_name(text)
        try:
            language = langcodes.Language.get(tag) if tag else None
        except (LookupError, ValueError):
            return None
    if language is None:
        return None
    base = language.language or ""
    if (
        not language.is_valid()
        or not (base.isascii() and base.isalpha() and 2 <= len(base) <= 3)  # not "x-…", "i-…"
        or base in NOT_LANGUAGES
        or "qaa" <= base <= "qtz"
        or language.private is not None
        or not english_name("languages", base)
    ):
        return None
    return language


def display_name(language: langcodes.Language) -> str:
    """The English name of a tag: the language's, with its script and territory where it
    has them ("Portuguese (Brazil)", "Chinese (Traditional)"; a language's usual script
    goes unsaid)."""
    language = language.simplify_script()
    name = english_name("languages", language.language or "") or str(language.language)
    parts = [
        english_name(kind, code) or code
        for kind, code in (("scripts", language.script), ("territories", language.territory))
        if code
    ]
    return f"{name} ({', '.join(parts)})" if parts else name
