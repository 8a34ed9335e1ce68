"""Pam's message catalogs (bot/i18n): every text the code says is translated in every locale,
with the same placeholders, and the locale machinery picks and formats as CLDR says."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from bot.i18n import LOCALES, locale_of, words_for
from bot.i18n.catalogs import DOMAINS, extract, read_catalog

PLACEHOLDER = re.compile(r"\{(\w*)[^{}]*\}")
TRANSLATED = [locale for locale in LOCALES if locale != "en"]


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def _forms(message_id: str | tuple[str, ...]) -> tuple[str, ...]:
    return message_id if isinstance(message_id, tuple) else (message_id,)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_text_is_translated_with_its_placeholders(locale: str, domain: str) -> None:
    """Each text the domain's code says has a translation in `locale`, not fuzzy, in every
    plural form the language has, and with exactly the text's {placeholders}; the catalog
    holds nothing the code no longer says (`python3 dev.py i18n` keeps it so)."""
    template = extract(domain)
    catalog = read_catalog(locale, domain)
    said = {message.id for message in template if message.id}
    kept = {message.id for message in catalog if message.id}
    assert not said - kept, f"not in {locale}/{domain}.po (run `python3 dev.py i18n`)"
    assert not kept - said, f"{locale}/{domain}.po holds texts the code no longer says"
    for message in catalog:
        if not message.id:
            continue
        assert not message.fuzzy, (locale, message.id)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if isinstance(message.id, tuple):
            assert len(strings) == catalog.num_plurals, (locale, message.id)
        wanted = set().union(*(placeholders(form) for form in _forms(message.id)))
        for string in strings:
            assert string.strip(), f"untranslated in {locale}: {message.id!r}"
            # A plural form may leave out {count} ("one" said as a word); nothing else.
            assert placeholders(string) - {"count"} <= wanted, (locale, message.id, string)
            assert wanted - {"count"} <= placeholders(string), (locale, message.id, string)


@pytest.mark.parametrize(
    ("language", "locale"),
    [
        ("German", "de"),
        ("Portuguese (Brazil)", "pt"),
        ("pt-br", "pt"),
        ("Chinese (Traditional)", "zh"),
        ("Arabic", "ar"),
        ("Swahili", "en"),  # no catalog: English
        (None, "en"),
        ("", "en"),
    ],
)
def test_the_locale_follows_the_native_language(language: str | None, locale: str) -> None:
    assert locale_of(language) == locale


def test_numbers_dates_and_plurals_follow_the_locale() -> None:
    when = datetime(2026, 12, 2, 1, 5, 42, tzinfo=UTC)
    german = words_for("German", "commands")
    assert german.number(1234.5) == "1.234,5"
    assert german.date(when, "long") == "2. Dezember 2026"
    assert words_for("Japanese", "commands").date(when, "long") == "2026年12月2日"
    assert words_for("Arabic", "commands").right_to_left
    assert not german.right_to_left
    english = words_for(None, "commands")
    assert english.plural("{count} day", "{count} days", 1) == "1 day"
    assert english.plural("{count} day", "{count} days", 1200) == "1,200 days"
    assert english.list(["a", "b", "c"]) == "a, b, and c"
