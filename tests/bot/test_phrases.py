"""Pam's own words (bot/phrases.py, the "commands" catalog) in every language: the commands
they name typed as in English, one persona — a woman — and a menu Telegram accepts."""

from __future__ import annotations

import re

import pytest

from bot import phrases
from bot.i18n import LOCALES
from bot.i18n.catalogs import read_catalog

COMMAND = re.compile(r"(?<![\w/])/[a-z]+(?![\w])")
TRANSLATED = [locale for locale in LOCALES if locale != "en"]


def commands_in(text: str) -> set[str]:
    return set(COMMAND.findall(text))


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_translation_names_the_same_commands(locale: str) -> None:
    """A learner types commands in English: a translation keeps each /command of its text
    (and adds none), whatever else it says."""
    for message in read_catalog(locale, "commands"):
        if not message.id:
            continue
        english = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        wanted = set().union(*(commands_in(text) for text in english))
        for string in strings:
            assert commands_in(string) == wanted, (locale, message.id, string)


@pytest.mark.parametrize(
    ("language", "said", "as_a_woman"),
    [
        ("Spanish", phrases.APOLOGY, "espesa"),
        ("French", phrases.APOLOGY, "Désolée"),
        ("Italian", phrases.VOICE_UNREADABLE, "riuscita"),
        ("Portuguese", phrases.APOLOGY, "confusa"),
        ("Polish", phrases.FORGOTTEN, "usunęłam"),
        ("Russian", phrases.FORGOTTEN, "стёрла"),
        ("Ukrainian", phrases.FORGOTTEN, "стерла"),
        ("Arabic", phrases.APOLOGY, "آسفة"),
        ("Hindi", phrases.VOICE_UNREADABLE, "पाई"),
    ],
)
def test_pam_is_a_woman_in_every_language(language: str, said: str, as_a_woman: str) -> None:
    assert as_a_woman in phrases.said(said, language)


@pytest.mark.parametrize("locale", LOCALES)
def test_the_command_menu_is_one_telegram_accepts(locale: str) -> None:
    """The same commands in every language, each described in 1–256 characters (Bot API's
    BotCommand)."""
    menu = phrases.menu(locale)
    assert [command for command, _ in menu] == [command for command, _ in phrases.MENU]
    assert all(1 <= len(description) <= 256 for _, description in menu)
    if locale != "en":
        assert menu != phrases.menu("en")


def test_help_is_said_in_the_native_language_with_english_as_the_fallback() -> None:
    assert phrases.help_text("German").startswith("Das verstehe ich:")
    assert phrases.help_text("Portuguese (Brazil)").startswith("Olha o que eu entendo:")
    assert phrases.help_text("Swahili") == phrases.help_text(None)
    assert phrases.help_text(None).startswith("Here's what I understand:")
