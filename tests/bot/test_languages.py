"""Language names and codes as learners type them, and the one rule for the language Pam
explains corrections in."""

from __future__ import annotations

import langcodes
import pytest
from language_data import names as language_names

from bot.languages import _code_for_name, explanation_language, language_name

# The withdrawn "sh" stands for a language in a script, "Serbian (Latin)": no language's name.
SCRIPT_TAG = "sh"


def iso_639_1_codes() -> list[str]:
    """Every two-letter language subtag of the IANA registry that language_data ships: the
    ISO 639-1 codes, the deprecated ones (iw, in, ji, jw, mo, sh) included."""
    registry = language_names.data_filename("language-subtag-registry.txt")
    codes = []
    with open(registry, encoding="utf-8") as lines:
        for record in lines.read().split("%%"):
            fields = dict(
                line.split(": ", 1) for line in record.strip().splitlines() if ": " in line
            )
            if fields.get("Type") == "language" and len(fields.get("Subtag", "")) == 2:
                codes.append(fields["Subtag"])
    return codes


def test_the_registry_lists_the_iso_639_1_codes() -> None:
    codes = iso_639_1_codes()
    assert len(codes) >= 184 and {"en", "es", "ko", "zu"} <= set(codes)


@pytest.mark.parametrize("code", iso_639_1_codes())
def test_every_iso_639_1_code_names_its_own_language(code: str) -> None:
    own = langcodes.Language.get(code)  # deprecated codes normalised: iw → he

    name = language_name(code)

    assert name == own.display_name()
    assert language_name(code.upper()) == name


@pytest.mark.parametrize(
    ("code", "language", "not_the_one_named"),
    [
        ("en", "English", "En"),
        ("ko", "Korean", "Ko"),
        ("hu", "Hungarian", "Hu"),
        ("ca", "Catalan", "Cayuga"),
        ("id", "Indonesian", "Ladin"),
        ("ga", "Irish", "Ga"),
        ("pa", "Punjabi", "Pare"),
        ("yo", "Yoruba", "Zou"),
        ("so", "Somali", "So"),
        ("pol", "Polish", "Pomo"),
        ("tha", "Thai", "Tha"),
    ],
)
def test_a_code_wins_over_a_language_whose_name_it_spells(
    code: str, language: str, not_the_one_named: str
) -> None:
    assert language_name(code) == language
    # The clash is real: read as a name alone, the code would be that other language.
    spelled = _code_for_name(code)
    assert spelled is not None
    assert langcodes.Language.get(spelled).display_name().startswith(not_the_one_named)


@pytest.mark.parametrize("code", [code for code in iso_639_1_codes() if code != SCRIPT_TAG])
def test_every_iso_639_1_language_is_found_by_its_english_name(code: str) -> None:
    # "Hindi" and "Ojibwa" are names some other language gives to another one, so the
    # index of names in every language leaves them out.
    name = langcodes.Language.get(code).display_name()

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
