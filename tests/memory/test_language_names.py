"""The names Pam knows languages by: built from CLDR (through Babel), read back cheaply."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bot.languages import iso_code, language_name
from memory.language_names import PATH, code_for_name


@pytest.mark.slow
def test_the_shipped_names_are_what_babel_builds() -> None:
    # In a child: building reads every CLDR locale, and Babel keeps each one it has read.
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from memory.language_names_cldr import build, dumps; "
            "sys.stdout.write(dumps(build()))",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    ).stdout
    assert built == PATH.read_text(encoding="utf-8"), (
        "memory/language_names.json is stale: run .venv/bin/python -m memory.language_names_cldr"
    )


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Spanisch", "Spanish"),  # German
        ("espagnol", "Spanish"),  # French
        ("spagnolo", "Spanish"),  # Italian
        ("испанский", "Spanish"),  # Russian
        ("スペイン語", "Spanish"),  # Japanese
        ("Deutsch", "German"),  # autonyms
        ("français", "French"),
        ("português", "Portuguese"),
        ("日本語", "Japanese"),
        ("Kiswahili", "Swahili"),
        ("Mandarin", "Chinese"),  # common English names CLDR's table lacks
        ("Farsi", "Persian"),
    ],
)
def test_names_in_other_languages_and_autonyms(text: str, language: str) -> None:
    assert language_name(text) == language


@pytest.mark.parametrize(
    ("text", "language"),
    [("espanol", "Spanish"), ("portugues", "Portuguese"), ("francais", "French")],
)
def test_a_name_typed_without_its_accents(text: str, language: str) -> None:
    assert language_name(text) == language


@pytest.mark.parametrize(
    "tag", ["pt-BR", "zh-Hant", "sh", "en-GB", "es-419", "fr-CA", "zh-TW", "ar-001"]
)
def test_pams_own_names_read_back_as_what_they_name(tag: str) -> None:
    """A learned profile holds the names Pam gave ("Portuguese (Brazil)"): they name the same
    language again, and the audio APIs get its ISO code."""
    name = language_name(tag)
    assert name is not None and "(" in name
    assert language_name(name) == name
    assert language_name(name.lower()) == name
    assert iso_code(name) == tag.split("-")[0].replace("sh", "sr")


@pytest.mark.parametrize("text", ["Portuguese (Atlantis)", "Klingonese (Brazil)", "(Brazil)", ""])
def test_a_qualified_name_with_an_unknown_part_names_nothing(text: str) -> None:
    assert code_for_name(text) is None
    assert language_name(text) is None


def test_a_first_lookup_costs_a_few_megabytes_not_hundreds() -> None:
    """The old name tables (language_data) took a fresh process from 22 MB to 293 MB."""
    script = textwrap.dedent(
        """
        def rss_kb():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
        import bot.languages
        before = rss_kb()
        assert bot.languages.language_name("Spanish") == "Spanish"
        assert bot.languages.language_name("português") == "Portuguese"
        print(rss_kb() - before)
        """
    )
    grown_kb = int(
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
    )
    assert grown_kb < 30_000
