"""Pam's message catalogs: GNU gettext `.po` files, one per concern (a domain) and locale,
under bot/i18n/locales/<locale>/LC_MESSAGES/<domain>.po. They are read as they are written,
compiled in memory on first use (no `.mo` files to forget to rebuild), and kept in sync with
the code by `python3 dev.py i18n` (update_catalogs)."""

from __future__ import annotations

from functools import cache
from io import BytesIO
from pathlib import Path

from babel import Locale
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po
from babel.support import NullTranslations, Translations

LOCALE_DIR = Path(__file__).resolve().parent / "locales"
PROJECT = Path(__file__).resolve().parents[2]

# Each domain and the modules whose texts it holds (paths from the project's root). A module
# says the words of its own domain only.
DOMAINS: dict[str, tuple[str, ...]] = {
    "commands": ("bot/phrases.py", "bot/turn/commands.py"),
    "taps": ("bot/turn/taps.py",),
    "density": ("bot/turn/density.py",),
    "chart": ("bot/review/chart.py", "bot/review/progress.py"),
    "settings": ("bot/turn/settings_commands.py",),
    "review": ("bot/review/exercises.py", "bot/review/reviewing.py"),
    "forget": ("bot/turn/forgetting.py",),
    "checkins": ("bot/turn/checkin_commands.py",),
}

# How the code marks its texts: say("…"), say.plural("…", "…", n), N_("…").
KEYWORDS = {"say": None, "plural": (1, 2), "N_": None}


def catalog_path(locale: str, domain: str) -> Path:
    return LOCALE_DIR / locale / "LC_MESSAGES" / f"{domain}.po"


@cache
def translations(locale: str, domain: str) -> NullTranslations:
    """The compiled catalog of `domain` in `locale`; English (the texts as written) and a
    catalog not written yet say each text as it is."""
    path = catalog_path(locale, domain)
    if locale == "en" or not path.exists():
        return NullTranslations()
    with path.open("rb") as po:
        catalog = read_po(po, locale=locale, domain=domain)
    compiled = BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    return Translations(compiled, domain=domain)


def read_catalog(locale: str, domain: str) -> Catalog:
    """The catalog of `domain` in `locale` as written (empty when there is none yet)."""
    path = catalog_path(locale, domain)
    if not path.exists():
        return Catalog(locale=locale, domain=domain)
    with path.open("rb") as po:
        return read_po(po, locale=locale, domain=domain)


def extract(domain: str) -> Catalog:
    """The texts the code of `domain` says, as a template (msgids only)."""
    template = Catalog(domain=domain, project="Pam", fuzzy=False)
    for module in DOMAINS[domain]:
        found = extract_from_file(
            "python", PROJECT / module, keywords=KEYWORDS, comment_tags=("Translators:",)
        )
        for line, message, comments, context in found:
            template.add(
                message,
                locations=[(module, line)],
                auto_comments=comments,
                context=context,
                flags=("python-brace-format",),
            )
    return template


def update_catalogs(locales: tuple[str, ...]) -> list[Path]:
    """Bring every domain's catalog in every locale (but English) in line with the code:
    new texts added untranslated, texts no longer said dropped. The catalogs written."""
    written = []
    for domain in DOMAINS:
        template = extract(domain)
        for locale in locales:
            if locale == "en":
                continue
            catalog = read_catalog(locale, domain)
            created = catalog.creation_date  # kept: a run that changes no text changes no file
            catalog.update(template, no_fuzzy_matching=True, update_header_comment=False)
            catalog.obsolete.clear()
            catalog.creation_date = created
            catalog.plural_forms  # noqa: B018 (read from CLDR's rules when the header lacks it)
            catalog.language_team = f"{Locale.parse(locale).english_name} <pam>"
            path = catalog_path(locale, domain)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as po:
                write_po(po, catalog, width=100, omit_header=False, no_location=True)
            written.append(path)
    return written
