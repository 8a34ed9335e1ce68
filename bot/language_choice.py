"""Which languages Pam teaches, and what she answers a name she does not take: the language a
typo was meant to be ("Spansh": Spanish?), or that a made-up language is none she teaches.

Pam teaches a language a chat model writes well enough to be a friend in it. The measure is
CLDR's (through Babel, which Pam reads her own words with anyway), not a list kept by hand:
a language CLDR has locale data for (a standard written form, with its dates and numbers:
what a language used on phones and the web has) that is official somewhere, nationally or
regionally, or spoken by a tenth of some country (Hausa, Javanese, Kurdish). That is some
170 languages, from Spanish and Japanese to Welsh, Basque and Zulu; it leaves out those
little written or little spoken (Aghem, Dogrib) and the extinct ones, where a model's
Spanish-class fluency is not there. Latin passes (a tenth of the Vatican), as it should:
schools teach it everywhere, and models read and write it well.

Constructed languages are refused by name, with one exception: Esperanto, which has a living
community (native speakers too), a large written corpus (its Wikipedia is among the 40
largest) and millions of learners, so models write it fluently. Klingon, Quenya, Lojban,
Toki Pona and the like are hobbies with little text, and Dothraki or Elvish have no code at
all: Pam says she cannot teach them, and names some she can."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from babel import localedata
from babel.core import get_global

from memory.language_names import (
    ascii_folded,
    display_name,
    english_name,
    language_of,
    names_index,
    normalize,
)

# ISO 639-3's constructed languages (type C) and the made-up languages people ask for that
# have no code; Esperanto ("eo") is taught (see above).
CONSTRUCTED_CODES = {
    "afh", "avk", "bzt", "dws", "ia", "ie", "igs", "io", "jbo", "ldn", "lfn", "neu", "nov",
    "qya", "rmv", "sjn", "tlh", "tok", "vo", "zbl", "isv",
}  # fmt: skip
CONSTRUCTED_NAMES = {
    "elvish", "dothraki", "valyrian", "high valyrian", "na'vi", "navi", "toki pona",
    "parseltongue", "newspeak", "simlish", "minionese", "huttese", "klingonese",
}  # fmt: skip
TAUGHT_CONSTRUCTED = {"eo"}

# Languages named as examples of what Pam teaches, in the learner's own words.
EXAMPLES = ("es", "fr", "de", "it", "pt", "ja")

Verdict = Literal["taught", "constructed", "not taught", "unknown"]


@dataclass(frozen=True)
class Choice:
    """What Pam makes of a language name: `verdict`, the English `name` of the language it
    names (None when unknown), its `code`, and for an unknown name the taught language it
    is closest to (`suggestion`, an English name) when one is close enough."""

    verdict: Verdict
    name: str | None = None
    code: str | None = None
    suggestion: str | None = None


@functools.cache
def taught_codes() -> frozenset[str]:
    """The language codes Pam teaches (see the module's docstring)."""
    with_locale = {locale.split("_")[0] for locale in localedata.locale_identifiers()}
    spoken = set()
    for languages in get_global("territory_languages").values():
        for code, info in languages.items():
            if info.get("official_status") or (info.get("population_percent") or 0) >= 10:
                spoken.add(code.split("_")[0])
    return frozenset((with_locale & spoken) - CONSTRUCTED_CODES | TAUGHT_CONSTRUCTED)


def _constructed_name(text: str) -> bool:
    key = normalize(text)
    return key in CONSTRUCTED_NAMES or (ascii_folded(key) or "") in CONSTRUCTED_NAMES


def names_a_language(text: str) -> bool:
    """Whether `text` names a language, taught or not (cheaper than `choose`: no suggestion
    is looked for)."""
    return _constructed_name(text) or language_of(text) is not None


def split_names(words: Sequence[str], most: int = 2) -> list[str] | None:
    """`words` as the (at most `most`) language names they are: "Português do Brasil
    Deutsch" → ["Português do Brasil", "Deutsch"]. A name of several words wins over its
    words read apart; when no split names only languages, each word is a name of its own
    (and None when they are more than `most`)."""
    if len(words) > 1 and names_a_language(" ".join(words)):
        return [" ".join(words)]
    if most > 1:
        for at in range(1, len(words)):
            first = " ".join(words[:at])
            rest = split_names(words[at:], most - 1)
            if rest is not None and names_a_language(first) and all(map(names_a_language, rest)):
                return [first, *rest]
    return list(words) if len(words) <= most else None


def choose(text: str) -> Choice:
    """What `text`, a language a learner wants to practise, names to Pam."""
    if _constructed_name(text):
        return Choice("constructed", text.strip())
    language = language_of(text)
    if language is None:
        return Choice("unknown", suggestion=suggestion(text))
    code = language.language or ""
    name = display_name(language)
    if code in CONSTRUCTED_CODES:
        return Choice("constructed", name, code)
    return Choice("taught" if code in taught_codes() else "not taught", name, code)


def distance(a: str, b: str, limit: int) -> int:
    """The edit distance of `a` and `b` (insertions, deletions, substitutions and swaps of
    neighbours, each one), or `limit + 1` once it is sure to be more than `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] | None = None
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (ca != cb))
            if before is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, row = row, current
    return min(row[-1], limit + 1)


def tolerance(key: str) -> int:
    """How many edits a name of this length may be off by and still be suggested: one in a
    short name (a slip), two from seven letters on ("Portugese", "Japaneese")."""
    return 1 if len(key) < 7 else 2


@functools.cache
def _taught_names() -> tuple[tuple[str, str], ...]:
    """(normalised name, English name) of every name of a taught language Pam knows."""
    taught = taught_codes()
    found = []
    for key, tag in names_index().items():
        code = tag.split("-")[0]
        english = english_name("languages", code)
        if code in taught and english:
            found.append((key, english))
    return tuple(found)


def suggestion(text: str) -> str | None:
    """The English name of the taught language `text` is closest to, when it is off by no
    more than a slip (`tolerance`): "Spansh" → Spanish, "Deutch" → German; None when none
    is that close, or two different ones are."""
    key = normalize(text)
    key = ascii_folded(key) or key
    if len(key) < 4:  # "spa", "gem": too short to tell a slip from another word
        return None
    limit = tolerance(key)
    best: dict[str, int] = {}
    for name, english in _taught_names():
        found = distance(key, name, limit)
        if found <= limit and found < best.get(english, limit + 1):
            best[english] = found
    if not best:
        return None
    closest = min(best.values())
    nearest = {english for english, found in best.items() if found == closest}
    return nearest.pop() if len(nearest) == 1 else None
