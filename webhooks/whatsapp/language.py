"""The language a WhatsApp number suggests its owner reads: the country it belongs to (the
phonenumbers library, Google's libphonenumber data: "+49 15…" is Germany, "+1 416…" Canada),
then that country's language in CLDR (through Babel): the most spoken of its official ones
(de jure or de facto), if at least half the country speaks it (counting second-language
speakers, as CLDR does).

So +49 → German, +1 → English (the United States, and Canada: 87% English), +41 → German
(76%; French 39%, Italian 15%), +32 → Dutch (55%), +34 → Spanish, +7 → Russian, +380 →
Ukrainian, +52 → Spanish. A country where no official language reaches half (India: Hindi
41%; South Africa: English 31%) gets no guess: English is then Pam's words' fallback, a
better bet than most of the country's languages. It is a guess, and /start says so: the
learner corrects it with /language <target> <native>."""

from __future__ import annotations

import functools

import phonenumbers
from babel.core import get_global

MAJORITY_PERCENT = 50.0  # of the country's people who speak it, first or second language
OFFICIAL = ("official", "de_facto_official")


@functools.cache
def country_language(territory: str) -> str | None:
    """The language a person of `territory` (a CLDR region code, "DE") most likely reads,
    as a tag ("de", "zh-Hant"), or None where no official language is spoken by half."""
    languages = get_global("territory_languages").get(territory, {})
    spoken = sorted(
        (
            (info.get("population_percent") or 0.0, code)
            for code, info in languages.items()
            if info.get("official_status") in OFFICIAL
        ),
        reverse=True,
    )
    if not spoken or spoken[0][0] < MAJORITY_PERCENT:
        return None
    return str(spoken[0][1]).replace("_", "-")


def number_language(address: str) -> str | None:
    """The language hint of a WhatsApp address ("whatsapp:+4915112345678" → "de"), or None
    when its number is no valid one or its country has no clear language."""
    number = address.removeprefix("whatsapp:").strip()
    try:
        parsed = phonenumbers.parse(number if number.startswith("+") else f"+{number}")
    except phonenumbers.NumberParseException:
        return None
    region = phonenumbers.region_code_for_number(parsed)
    return country_language(region) if region else None
