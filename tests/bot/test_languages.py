"""Language names and codes as learners type them, and the one rule for the language Pam
explains corrections in."""

from __future__ import annotations

import functools

import langcodes
import pytest
from babel import Locale
from langcodes.registry_parser import parse_registry
from langcodes.util import data_filename

from bot.languages import explanation_language, language_name
from memory.language_names import code_for_name


def iso_639_1_codes() -> list[str]:
    """Every two-letter language subtag of the IANA registry that langcodes ships: the
    ISO 639-1 codes, the deprecated ones (iw, in, ji, jw, mo, sh) included."""
    registry = data_filename("language-subtag-registry.txt")
    codes = []
    with open(registry, encoding="utf-8") as lines:
        for record in lines.read().split("%%"):
            fields = dict(
                line.split(": ", 1) for line in record.strip().splitlines() if ": " in line
            )
            if fields.get("Type") == "language" and len(fields.get("Subtag", "")) == 2:
                codes.append(fields["Subtag"])
    return codes


@functools.cache
def registry_names() -> dict[str, str]:
    """The IANA registry's first English name of each language subtag."""
    return {
        item["Subtag"]: item["Description"][0]
        for item in parse_registry()
        if item.get("Type") == "language"
    }


def english_name(code: str) -> str:
    """What CLDR (through Babel) calls, in English, the language a code names: deprecated
    codes normalised (iw → he, sh → sr-Latn), and the registry's name for the one language
    CLDR does not name ("bh", Bihari languages)."""
    tag = langcodes.Language.get(code)
    english = Locale("en")
    name = english.languages.get(tag.language) or registry_names()[tag.language]
    return f"{name} ({english.scripts[tag.script]})" if tag.script else name


def test_the_registry_lists_the_iso_639_1_codes() -> None:
    codes = iso_639_1_codes()
    assert len(codes) >= 184 and {"en", "es", "ko", "zu"} <= set(codes)


@pytest.mark.parametrize("code", iso_639_1_codes())
def test_every_iso_639_1_code_names_its_own_language(code: str) -> None:
    name = language_name(code)

    assert name == english_name(code)
    assert language_name(code.upper()) == name


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("en", "English"),
        ("ko", "Korean"),
        ("hu", "Hungarian"),
        ("ca", "Catalan"),
        ("id", "Indonesian"),
        ("ga", "Irish"),
        ("pa", "Punjabi"),
        ("yo", "Yoruba"),
        ("so", "Somali"),
        ("pol", "Polish"),
        ("tha", "Thai"),
    ],
)
def test_a_code_wins_over_a_language_whose_name_it_spells(code: str, language: str) -> None:
    assert language_name(code) == language
    assert language_name(code.upper()) == language


@pytest.mark.parametrize(
    ("code", "not_the_one_named"),
    [
        ("en", "En"),  # the registry's English names
        ("ko", "Ko"),
        ("hu", "Hu"),
        ("tha", "Tha"),
        ("ga", "Ga"),  # CLDR's English names
        ("so", "Sô"),  # a name without its accent
    ],
)
def test_the_codes_clash_with_names_pam_knows(code: str, not_the_one_named: str) -> None:
    # Read as a name alone, the code would be that other language.
    spelled = code_for_name(code)
    assert spelled is not None
    other = language_name(spelled)
    assert other is not None and other.startswith(not_the_one_named)
    assert other != language_name(code)


@pytest.mark.parametrize("code", iso_639_1_codes())
def test_every_iso_639_1_language_is_found_by_its_english_name(code: str) -> None:
    # "Hindi" and "Ojibwa" are names some other language gives to another one: English
    # names come first.
    name = english_name(code)

    assert language_name(name) == name
    assert language_name(name.lower()) == name


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Spanish", "Spanish"),
        ("español", "Spanish"),
        ("Deutsch", "German"),
        ("brazilian portuguese", "Portuguese (Brazil)"),
        ("pt-BR", "Portuguese (Brazil)"),
        ("Ewe", "Ewe"),
    ],
)
def test_names_in_any_language_still_resolve(text: str, language: str) -> None:
    assert language_name(text) == language


# A Spanish learner whose native language is English, level by level.
EXPLAINED_IN = [
    ("A1", "English"),
    ("A2", "English"),
    ("B1", "Spanish"),
    ("B2", "Spanish"),
    ("C1", "Spanish"),
    ("C2", "Spanish"),
]


@pytest.mark.parametrize(("level", "explained_in"), [*EXPLAINED_IN, (None, "Spanish")])
def test_beginners_get_explanations_in_their_native_language(
    level: str | None, explained_in: str
) -> None:
    assert explanation_language(level, "Spanish", "English") == explained_in


def test_an_unknown_language_gives_way_to_the_known_one() -> None:
    assert explanation_language("A1", "Spanish", None) == "Spanish"
    assert explanation_language("C1", None, "English") == "English"
    assert explanation_language(None, None, None) is None
