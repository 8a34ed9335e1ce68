"""Builds `memory/language_names.json`, the names Pam knows languages by, from CLDR (through
Babel) and the IANA language subtag registry (the copy langcodes ships). Babel is a dev
dependency: Pam itself only reads the built file, a few MB in memory, where loading every
locale's CLDR data would take hundreds.

After upgrading Babel or langcodes, rebuild it and commit the result:

    .venv/bin/python -m memory.language_names_cldr

tests/memory/test_language_names.py checks the shipped file is what this builds."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from memory.language_names import PATH, ascii_folded, normalize

# Languages whose names for other languages a learner may type ("Spanisch", "espagnol"): the
# most spoken ones and those of Pam's learners so far. Every language's own name (autonym)
# is indexed besides, from each locale CLDR has.
MAJOR_LOCALES = (
    "es", "fr", "de", "pt", "it", "nl", "ru", "uk", "pl", "cs", "sk", "sv", "nb", "da", "fi",
    "el", "tr", "ro", "hu", "bg", "hr", "sr", "ca", "ar", "fa", "he", "hi", "bn", "ur", "id",
    "ms", "vi", "th", "fil", "sw", "zh", "ja", "ko",
)  # fmt: skip

# English names learners use that CLDR's English table does not hold (it keeps them as "alt"
# names Babel does not read, or not at all); the registry calls Mandarin "cmn", a code
# speech-to-text APIs do not take, where Pam means Chinese.
COMMON_ENGLISH_NAMES = {
    "Mandarin": "zh", "Mandarin Chinese": "zh", "Farsi": "fa", "Modern Greek": "el",
    "Myanmar": "my", "Panjabi": "pa", "Gaelic": "gd", "Irish Gaelic": "ga", "Bengali": "bn",
}  # fmt: skip

# Names people type for their language, or a regional form of it, that CLDR holds under no
# locale's names: regional and native names ("Castellano", "Português do Brasil"), the
# demonyms used as language names ("brasileiro"), the usual names of Chinese in Chinese
# ("普通话", "國語"), and romanised autonyms ("Nihongo", "Ivrit").
REGIONAL_AND_NATIVE_NAMES = {
    "Castellano": "es", "Español de España": "es-ES", "Español latino": "es-419",
    "Español latinoamericano": "es-419", "Español mexicano": "es-MX",
    "Português do Brasil": "pt-BR", "Português brasileiro": "pt-BR", "Brasileiro": "pt-BR",
    "Brazilian": "pt-BR", "Português de Portugal": "pt-PT", "Português europeu": "pt-PT",
    "Hochdeutsch": "de", "Schweizerdeutsch": "gsw", "Vlaams": "nl-BE",
    "Français de France": "fr-FR", "Québécois": "fr-CA", "Français québécois": "fr-CA",
    "普通话": "zh", "普通話": "zh", "國語": "zh-Hant", "国语": "zh", "华语": "zh",
    "華語": "zh-Hant",
    "汉语": "zh", "漢語": "zh-Hant", "中国话": "zh", "中文简体": "zh-Hans", "简体中文": "zh-Hans",
    "繁體中文": "zh-Hant", "廣東話": "yue", "广东话": "yue", "粵語": "yue", "Putonghua": "zh",
    "Nihongo": "ja", "Hangugeo": "ko", "Hanguk-eo": "ko", "Ivrit": "he", "Parsi": "fa",
    "Bahasa": "id", "Hindustani": "hi", "Al-arabiya": "ar", "عربي": "ar", "Русский язык": "ru",
    "Українська мова": "uk", "Deutsche Sprache": "de",
}  # fmt: skip


def _tag(key: str) -> str:
    """A CLDR locale key as a language tag ("pt_BR" → "pt-BR")."""
    return key.replace("_", "-")


def _english_tables() -> dict[str, dict[str, str]]:
    from babel import Locale

    english = Locale("en")
    languages = {code: name for code, name in english.languages.items() if "_" not in code}
    # Codes CLDR leaves unnamed ("bh", Bihari languages) keep the registry's English name.
    for code, descriptions in _registry_languages():
        languages.setdefault(code, descriptions[0])
    return {
        "languages": dict(sorted(languages.items())),
        "scripts": dict(sorted(english.scripts.items())),
        "territories": dict(sorted(english.territories.items())),
    }


def _registry_languages() -> Iterator[tuple[str, list[str]]]:
    """(code, English descriptions) of every language the IANA registry lists as current."""
    from langcodes.registry_parser import parse_registry

    for item in parse_registry():
        if (
            item.get("Type") == "language"
            and "Deprecated" not in item
            and ".." not in item.get("Subtag", "..")
        ):
            yield item["Subtag"], item["Description"]


def _named(locale: str, own_only: bool = False) -> Iterator[tuple[str, str]]:
    """(name, tag) of the languages `locale` names; with `own_only`, only its own."""
    from babel import Locale

    names = Locale.parse(locale).languages
    if own_only:
        if locale in names:
            yield names[locale], locale
        return
    yield from ((name, _tag(code)) for code, name in names.items())


def _autonyms() -> Iterator[tuple[str, str]]:
    from babel import localedata

    for locale in sorted(localedata.locale_identifiers()):
        if "_" not in locale:
            yield from _named(locale, own_only=True)


def _index(sources: Iterable[Iterable[tuple[str, str]]]) -> dict[str, str]:
    """Normalised name → tag. An earlier source wins a name two spell: English names (CLDR's,
    then the common ones it lacks), then autonyms, then names in the major languages, then
    the registry's; then the same names without their accents ("espanol", "portugues"),
    where no name already reads so."""
    pairs = [pair for source in sources for pair in source]
    index: dict[str, str] = {}
    for name, tag in pairs:
        index.setdefault(normalize(name), tag)
    for name, tag in pairs:
        folded = ascii_folded(normalize(name))
        if folded:
            index.setdefault(folded, tag)
    index.pop("", None)
    return dict(sorted(index.items()))


def build() -> dict[str, Any]:
    """The contents of language_names.json, from the installed Babel and langcodes."""
    import babel

    registry_names = (
        (description, code)
        for code, descriptions in _registry_languages()
        for description in descriptions
    )
    sources = [
        _named("en"),
        COMMON_ENGLISH_NAMES.items(),
        REGIONAL_AND_NATIVE_NAMES.items(),
        _autonyms(),
        *(_named(locale) for locale in MAJOR_LOCALES),
        registry_names,
    ]
    return {
        "source": f"CLDR through Babel {babel.__version__}; IANA registry through langcodes",
        **_english_tables(),
        "names": _index(sources),
    }


def dumps(data: dict[str, Any]) -> str:
    """The file's text: one entry a line, so that a rebuild's diff reads name by name."""
    return json.dumps(data, ensure_ascii=False, indent=0, sort_keys=False) + "\n"


if __name__ == "__main__":
    PATH.write_text(dumps(build()), encoding="utf-8")
    sys.stdout.write(f"wrote {PATH}\n")
