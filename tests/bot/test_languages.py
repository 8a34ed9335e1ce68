"""Language names and codes as learners type them, and the one rule for the language Pam
explains corrections in."""

from __future__ import annotations

import functools

import langcodes
import pytest
from babel import Locale
from hypothesis import given
from hypothesis import strategies as st
from langcodes.registry_parser import parse_registry
from langcodes.util import data_filename

from bot.i18n import LOCALES
from bot.language_choice import choose, distance, split_names, taught_codes
from bot.languages import explanation_language, language_name
from bot.levels import LEVEL_WORDS, read_level
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


# -- names as people type them, and which languages Pam teaches ------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Castellano", "Spanish"),
        ("castellano", "Spanish"),
        ("Português do Brasil", "Portuguese (Brazil)"),
        ("portugues do brasil", "Portuguese (Brazil)"),
        ("brasileiro", "Portuguese (Brazil)"),
        ("Deutsch", "German"),
        ("DEUTSCH", "German"),
        ("Nederlands", "Dutch"),
        ("日本語", "Japanese"),
        ("العربية", "Arabic"),
        ("Mandarin", "Chinese"),
        ("普通话", "Chinese"),
        ("Farsi", "Persian"),
        ("français", "French"),
        ("francais", "French"),
        ("Español de México", "Spanish (Mexico)"),
        ("Vlaams", "Dutch (Belgium)"),
        ("pt-br", "Portuguese (Brazil)"),
        ("de", "German"),
    ],
)
def test_regional_and_native_names_resolve(text: str, language: str) -> None:
    assert language_name(text) == language
    assert choose(text).verdict == "taught"


@pytest.mark.parametrize(
    ("text", "verdict", "suggested"),
    [
        ("Klingon", "constructed", None),
        ("tlh", "constructed", None),
        ("Elvish", "constructed", None),
        ("Dothraki", "constructed", None),
        ("High Valyrian", "constructed", None),
        ("Quenya", "constructed", None),
        ("Lojban", "constructed", None),
        ("Toki Pona", "constructed", None),
        ("Volapük", "constructed", None),
        ("Esperanto", "taught", None),  # the one constructed language Pam teaches
        ("Latin", "taught", None),
        ("Welsh", "taught", None),
        ("Hausa", "taught", None),
        ("Aghem", "not taught", None),
        ("Spansh", "unknown", "Spanish"),
        ("Germn", "unknown", "German"),
        ("Portugese", "unknown", "Portuguese"),
        ("Japaneese", "unknown", "Japanese"),
        ("Ukranian", "unknown", "Ukrainian"),
        ("Frnch", "unknown", "French"),
        ("asdfgh", "unknown", None),
        ("klingonx123", "unknown", None),
        ("frenchfries", "unknown", None),
    ],
)
def test_what_pam_makes_of_a_language_name(text: str, verdict: str, suggested: str | None) -> None:
    choice = choose(text)
    assert choice.verdict == verdict
    assert choice.suggestion == suggested


def test_pam_teaches_the_languages_she_speaks_her_own_words_in() -> None:
    assert set(LOCALES) <= taught_codes()
    assert {"eo", "la", "cy", "eu", "ca", "sw", "yo", "zu", "ha"} <= taught_codes()
    assert not {"tlh", "jbo", "qya", "sjn", "tok", "vo", "ia", "agq"} & taught_codes()
    assert 150 < len(taught_codes()) < 250


@pytest.mark.parametrize(
    ("a", "b", "edits"),
    [
        ("spanish", "spanish", 0),
        ("spansh", "spanish", 1),
        ("sapnish", "spanish", 1),  # two neighbours swapped: one slip
        ("germn", "german", 1),
        ("elvish", "english", 3),
        ("", "abc", 3),
    ],
)
def test_edit_distance(a: str, b: str, edits: int) -> None:
    assert distance(a, b, 5) == edits
    assert distance(b, a, 5) == edits
    assert distance(a, b, 0) == min(edits, 1)


@given(st.text(alphabet="abcdé", max_size=8), st.text(alphabet="abcdé", max_size=8))
def test_edit_distance_is_bounded_by_the_longer_word(a: str, b: str) -> None:
    found = distance(a, b, 10)
    assert abs(len(a) - len(b)) <= found <= max(len(a), len(b))
    assert (found == 0) == (a == b)


# -- levels as people type them ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "level", "upper"),
    [
        ("b1", "B1", None),
        ("B1", "B1", None),
        ("level B2", "B2", None),
        ("beginner", "A1", None),
        ("Beginner", "A1", None),
        ("elementary", "A2", None),
        ("intermediate", "B1", None),
        ("upper intermediate", "B2", None),
        ("Upper-Intermediate", "B2", None),
        ("advanced", "C1", None),
        ("proficient", "C2", None),
        ("principiante", "A1", None),
        ("intermedio", "B1", None),
        ("avanzado", "C1", None),
        ("nivel intermedio", "B1", None),
        ("débutant", "A1", None),
        ("debutante", "A1", None),
        ("intermédiaire", "B1", None),
        ("avancé", "C1", None),
        ("Anfänger", "A1", None),
        ("fortgeschritten", "C1", None),
        ("Mittelstufe", "B1", None),
        ("intermediário", "B1", None),
        ("avançado", "C1", None),
        ("avanzato", "C1", None),
        ("halfgevorderd", "B1", None),
        ("początkujący", "A1", None),
        ("średnio zaawansowany", "B1", None),
        ("начинающий", "A1", None),
        ("продвинутый", "C1", None),
        ("початківець", "A1", None),
        ("başlangıç", "A1", None),
        ("ileri düzey", "C1", None),
        ("中級", "B1", None),
        ("高级", "C1", None),
        ("중급", "B1", None),
        ("متوسط", "B1", None),
        ("उन्नत", "C1", None),
        ("B1-B2 intermediate", "B1", "B2"),
        ("B1–B2", "B1", "B2"),
        ("b1 b2", "B1", "B2"),
        ("C1/C2", "C1", "C2"),
        ("beginner/intermediate", "A1", "B1"),
    ],
)
def test_levels_in_words_and_ranges_resolve(text: str, level: str, upper: str | None) -> None:
    found = read_level(text)
    assert found is not None
    assert (found.level, found.upper) == (level, upper)


@pytest.mark.parametrize("text", ["", "Z9", "B7", "whatever", "very good", "b12", "A1x"])
def test_what_names_no_level_is_none(text: str) -> None:
    assert read_level(text) is None


def test_every_level_word_reads_as_its_level() -> None:
    for word, level in LEVEL_WORDS.items():
        found = read_level(word)
        assert found is not None and found.level == level, word


@pytest.mark.parametrize(
    ("words", "names"),
    [
        ("Spanish", ["Spanish"]),
        ("Spanish English", ["Spanish", "English"]),
        ("Português do Brasil", ["Português do Brasil"]),
        ("Português do Brasil Deutsch", ["Português do Brasil", "Deutsch"]),
        ("English Português do Brasil", ["English", "Português do Brasil"]),
        ("Toki Pona English", ["Toki Pona", "English"]),
        ("Spansh English", ["Spansh", "English"]),  # the typo is answered as such
        ("Spanish English French", None),
    ],
)
def test_language_names_of_several_words(words: str, names: list[str] | None) -> None:
    assert split_names(words.split()) == names
