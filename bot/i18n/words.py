"""The learner's locale and the words Pam says in it (see bot/i18n/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, tzinfo
from functools import cache

from babel import Locale
from babel.dates import format_date, format_datetime, format_skeleton, format_time
from babel.lists import format_list
from babel.numbers import format_decimal, format_percent
from babel.support import NullTranslations

from bot.i18n.catalogs import translations
from memory.database.records import LearnerInfo
from memory.language_names import language_of

# The languages Pam speaks her own words in (Babel locale identifiers), besides English, the
# language the texts are written in and the fallback for every other.
LOCALES = (
    "en",
    "es",
    "pt",
    "fr",
    "de",
    "it",
    "nl",
    "pl",
    "ru",
    "uk",
    "tr",
    "ja",
    "zh",
    "ko",
    "ar",
    "hi",
)
ENGLISH = "en"


def N_(message: str) -> str:
    """Mark `message` for the catalogs where it is defined; it is translated where it is
    said (`say(MESSAGE)`)."""
    return message


def locale_of(language: str | None) -> str:
    """The locale Pam speaks in to a learner whose native language is `language` (an English
    name as Pam stores it, "Portuguese (Brazil)", or a code, "pt-br"): one of LOCALES,
    English for a language Pam has no catalog for, or for none."""
    found = language_of(language.split(" (")[0]) if language else None
    code = found.language if found is not None else None
    return code if code in LOCALES else ENGLISH


class Words:
    """Pam's words of one concern (`domain`, a catalog) in one locale: call it with a text
    to say it, with the values of its {placeholders}."""

    def __init__(self, locale: str, domain: str) -> None:
        self.locale = locale
        self.domain = domain
        self.cldr = Locale.parse(locale)
        self.catalog: NullTranslations = translations(locale, domain)

    def __call__(self, message: str, /, **values: object) -> str:
        """`message` in this locale, its placeholders filled in with `values`."""
        text = self.catalog.gettext(message)
        return text.format(**values) if values else text

    def plural(self, singular: str, plural: str, count: int, /, **values: object) -> str:
        """The form of `singular`/`plural` this locale uses for `count` (Arabic has six,
        Japanese one); `{count}` is the number as the locale writes it."""
        text = self.catalog.ngettext(singular, plural, count)
        return text.format(count=self.number(count), **values)

    def number(self, value: float) -> str:
        """`value` as the locale writes numbers ("1.234,5" in German)."""
        return str(format_decimal(value, locale=self.cldr))

    def percent(self, value: float) -> str:
        """`value` (0.25) as a percentage ("25 %" in French)."""
        return str(format_percent(value, locale=self.cldr))

    def month(self, value: date | datetime) -> str:
        """A month of a year as this locale names it ("July 2026", "julio de 2026")."""
        return str(format_skeleton("yMMMM", value, locale=self.cldr))

    def date(self, value: date | datetime, format: str = "medium") -> str:
        """A day as a person reads it in this locale ("2 déc. 2026"); `format` is CLDR's
        "short", "medium", "long", "full" or a pattern ("MMM d")."""
        return str(format_date(value, format=format, locale=self.cldr))

    def moment(self, value: datetime, format: str = "medium", tz: tzinfo | None = None) -> str:
        """A moment as a person reads it in this locale, in `tz` (UTC when None)."""
        return str(format_datetime(value, format=format, tzinfo=tz, locale=self.cldr))

    def time(self, value: datetime, format: str = "short", tz: tzinfo | None = None) -> str:
        """A time of day in this locale ("14:05", "2:05 PM")."""
        return str(format_time(value, format=format, tzinfo=tz, locale=self.cldr))

    def list(self, items: Iterable[str]) -> str:
        """`items` joined as this locale lists things ("a, b and c", "a, b et c")."""
        return str(format_list(list(items), locale=self.cldr))

    @property
    def right_to_left(self) -> bool:
        """Whether this locale is written right to left (Arabic)."""
        return self.cldr.character_order == "right-to-left"


@cache
def _words(locale: str, domain: str) -> Words:
    return Words(locale, domain)


def native_of(learner: LearnerInfo | None) -> str | None:
    """The language Pam's own words are in for `learner`: the native language they set,
    else the one Pam guessed from their app or number (None: English)."""
    return (learner.native_language or learner.native_guess) if learner else None


def words_for(language: str | None, domain: str) -> Words:
    """Pam's words of `domain` for a learner whose native language is `language` (see
    locale_of)."""
    return _words(locale_of(language), domain)
