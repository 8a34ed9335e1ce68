"""Recall's words: how free text (a learner's question in any language, a model's tool query,
a stored message) becomes the terms the index matches, and which language's stemmer and
Postgres text search configuration a learner's target language gets.

Pure functions, no database: both backends and migration 0005 use them."""

from __future__ import annotations

import functools
import re
import threading
import unicodedata

import snowballstemmer

from memory.language_names import english_name, language_of

# A query longer than this many searchable words is cut: its first ones are kept. A learner's
# question has a handful; this bounds what a pasted essay or a model's long query can cost.
MAX_QUERY_WORDS = 24

_WORD = re.compile(r"[^\W_]+")

# Postgres's built-in text search configurations with a Snowball stemmer (Postgres 12+);
# any other language gets 'simple' (lowercased words, no stems, no stopwords).
PG_CONFIGS = frozenset(
    {
        "arabic", "danish", "dutch", "english", "finnish", "french", "german", "hungarian",
        "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian", "portuguese",
        "romanian", "russian", "spanish", "swedish", "tamil", "turkish",
    }
)  # fmt: skip
_SNOWBALL = frozenset(snowballstemmer.algorithms()) - {"porter", "dutch_porter"}

# Function words dropped from queries (and not stemmed into the index), kept small and
# explicit: a word here is one no learner would search for. Written without accents (words
# are compared accent-free). They hold for every learner, whatever their languages: a query
# mixes the target language, the native one and English ("dog name"), and a word that is a
# function word in one of these and a content word in another ("son", "war", "sin", "die",
# "red") is left out of all of them.
STOPWORDS = frozenset(
    """
    a al algo como con cual cuando de del donde el ella ellas ellos en es esa ese eso esta
    estaba este esto fue ha han hay la las le les lo los me mi mis muy nos o para pero por que
    quien se si sobre su sus te ti tu tus un una uno unos y ya yo
    an and are as at be been but by can could did do does for from had has have he her him his
    how i if in is it its my of on or our she so that the their them they this to was we were
    what when where which who why will with would you your
    auch auf aus bei bist das dass dem der des dich dir du ein eine einem einen einer
    er es ich ihr im ist mich mir mit nicht noch oder sich sie sind und uns von was wer wie
    wir wo zu zum zur
    au aux ce ces dans du elle est et il ils je la le les leur ma mais mes moi mon ne nous on ou
    par pas pour qu qui sa ses ta tes toi ton tu une vous
    agli alla alle che chi cosa da dei della delle di gli ha ho il io lei lui ma mio nel nella
    non per sei sono suo tu tuo un una
    ao aos as com da das do dos ela ele em eu na nas no nos os ou um uma voce
    dat een het ik je jij mijn niet u van wat wie zijn
    """.split()  # noqa: SIM905 - a list of words reads best as words
)


# How learners ask about a fact against how they said it, for the questions recall exists for
# (names, family, birthdays, likes): a query word brings these along (accent-free keys and
# values, each list small and explicit). Added to a query's words, never to the index.
EXPANSIONS: dict[str, tuple[str, ...]] = {
    # A name is asked with the noun and said with the verb.
    "nombre": ("llama", "llamo", "llamaba"),
    "name": ("called", "named"),
    "nom": ("appelle",),
    "nome": ("chiama", "chama"),
    "heisst": ("name",),
    # Family words as said to family and about it.
    "mama": ("madre",),
    "mami": ("madre",),
    "madre": ("mama",),
    "papa": ("padre",),
    "papi": ("padre",),
    "padre": ("papa",),
    "papas": ("padres",),
    "padres": ("papas",),
    "mum": ("mother", "mom"),
    "mom": ("mother", "mum"),
    "dad": ("father",),
    # A birthday.
    "cumple": ("cumpleanos",),
    "cumpleanos": ("cumple",),
    "birthday": ("born",),
    # What someone likes.
    "gusta": ("encanta", "favorito", "favorita"),
    "encanta": ("gusta", "favorito", "favorita"),
    "favorito": ("gusta", "encanta"),
    "favorita": ("gusta", "encanta"),
    "like": ("love", "favourite", "favorite"),
    "love": ("like", "favourite", "favorite"),
}
# Spanish diminutives: "perrita" is asked about a "perra", "gatito" about a "gato".
_DIMINUTIVE = re.compile(r"^(\w{3,}?)(?:c)?it([oa]s?)$")


def plain(word: str) -> str:
    """`word` without its accents ("cómo" → "como", "Ärger" → "Arger")."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The searchable words of `text`, lowercased, in order, each once: runs of letters and
    digits, without stopwords and without single letters. Nothing of the query syntax of
    either database survives: quotes, operators and brackets are not letters."""
    found: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(unicodedata.normalize("NFKC", text).casefold()):
        word = match.group()
        key = plain(word)
        if key in seen or key in STOPWORDS or (len(key) < 2 and not key.isdigit()):
            continue
        seen.add(key)
        found.append(word)
    return found


def query_words(text: str, language: str | None = None) -> list[str]:
    """`words` of a query, at most MAX_QUERY_WORDS of them, each followed by its EXPANSIONS
    (and in Spanish, a diminutive by its base word: "perrita", "perra")."""
    found = words(text)[:MAX_QUERY_WORDS]
    spanish = snowball_language(language) == "spanish"
    expanded: list[str] = []
    for word in found:
        expanded += [word, *EXPANSIONS.get(plain(word), ())]
        if spanish and (match := _DIMINUTIVE.match(word)):
            expanded.append(match.group(1) + match.group(2))
    return list(dict.fromkeys(expanded))


@functools.cache
def _english_name(language: str) -> str | None:
    """The lowercased English name of the language `language` names, as learners' settings
    hold it ("Spanish", "spanish", "es", "español", "pt-BR"), or None."""
    key = language.strip()
    if not key or len(key) > 60:
        return None
    if key.casefold() in _SNOWBALL or key.casefold() in PG_CONFIGS:
        return key.casefold()
    tag = language_of(key)
    name = english_name("languages", tag.language or "") if tag else None
    return name.casefold() if name else None


def snowball_language(language: str | None) -> str | None:
    """The Snowball stemmer's name for `language` (a learner's target language), or None
    when it has none."""
    name = _english_name(language) if language else None
    return name if name in _SNOWBALL else None


def pg_config(language: str | None) -> str:
    """The Postgres text search configuration for `language`: its own, or 'simple'."""
    name = _english_name(language) if language else None
    return name if name in PG_CONFIGS else "simple"


_stemmers = threading.local()  # a Snowball stemmer keeps state while it stems: one a thread


def stemmer_for(language: str) -> snowballstemmer.Stemmer:
    """This thread's Snowball stemmer for `language` (a Snowball name), made once."""
    mine: dict[str, snowballstemmer.Stemmer] = _stemmers.__dict__.setdefault("by_language", {})
    if language not in mine:
        mine[language] = snowballstemmer.stemmer(language)
    return mine[language]


def stems(found: list[str], language: str | None) -> list[str]:
    """The Snowball stems of `found` (from `words`) in `language` (a Snowball name), each
    once; none without a language."""
    if language is None:
        return []
    stemmer = stemmer_for(language)
    if language == "spanish":
        found = found + [m.group(1) + m.group(2) for w in found if (m := _DIMINUTIVE.match(w))]
    return list(dict.fromkeys(stemmer.stemWords(found)))


def learner_terms(learner_id: int, found: list[str], language: str | None) -> list[str]:
    """SQLite's index terms for the words `found` of one learner: their stems in `language`
    (a Snowball name), or without one the words themselves, accent-free, prefixed with the
    learner's id and an "x" ("42xperr"). Stems alone, not the words as well: with both, a
    word said as asked counted twice and a form of it once, and the scripted recall check
    (bench/recall_quality.py) found 26 of 30 facts instead of 28. A term belongs to one
    learner, so a search reads only that learner's postings, however many other learners
    share the word; and no query can reach another learner's terms (the prefix is added
    here, never taken from the query).
    The id is digits and the separator is not, so no two learners' terms can be equal."""
    terms = [plain(stem) for stem in stems(found, language)] or [plain(word) for word in found]
    return [f"{int(learner_id)}x{term}" for term in dict.fromkeys(terms)]


def terms_of(learner_id: int, text: str, language: str | None) -> str:
    """What SQLite's FTS5 index holds for one entry: `learner_terms` of its words."""
    return " ".join(learner_terms(learner_id, words(text), language))
