"""Mistake patterns: how the rule a model names for a correction ("bueno → buen before a
masculine singular noun") becomes a key and a set of terms, so that the same pattern worded a
little differently next time still finds its review item, and a different rule does not.

Pure functions, no database: memory/review/reviews.py matches corrections to items with them."""

from __future__ import annotations

import difflib
import itertools
import re
import unicodedata

from memory.recall_terms import stemmer_for

# The column review_items.rule_key is this long.
MAX_KEY = 200
# How much of each side a rule derived from a correction keeps ("bueno → buen").
MAX_SIDE_WORDS = 6
MAX_SIDE_CHARS = 90

# English words that carry a rule's frame, not its content: dropped, so "use buen instead of
# bueno before masculine nouns" and "bueno becomes buen before a masculine noun" come out
# alike. Short on purpose: a word here can never tell two rules apart (except where the rule
# quotes it or puts it at an arrow, see `_words`: "a → an before a vowel" keeps its "a").
FILLER = frozenset(
    """
    a an the of to in on for with before after when use used using not no instead rather
    than become becomes should must be is are vs versus and or
    """.split()  # noqa: SIM905 - a list of words reads best as words
)
# Grammar abbreviations models write for the words, spelled out before stemming. Only ones
# that are no other English word ("sing" is, so it stays).
ABBREVIATIONS = {
    "masc": "masculine",
    "fem": "feminine",
    "sg": "singular",
    "pl": "plural",
    "adj": "adjective",
    "adv": "adverb",
    "prep": "preposition",
}
# A term that is also one of the words the correction changed is marked with this prefix
# (see `pattern_terms`); the mark is no letter, so no word can carry it.
CHANGED = "="

_WORD = re.compile(r"[^\W_]+")
_EDGES = re.compile(r"^[\W_]+|[\W_]+$")
_ARROW = re.compile(r"\s*(?:→|⟶|⇒|➔|➜|->|=>|>)\s*")
_QUOTED = re.compile(r"(?<!\w)['‘\"“«„`]([^'’\"”»`]{1,60})['’\"”»`](?!\w)")


def _stem(word: str) -> str:
    """The English Snowball stem of `word` (rule names are English)."""
    stem: str = stemmer_for("english").stemWord(word)
    return stem


def _tokens(text: str) -> list[str]:
    """The words of `text`, NFKC-normalised and casefolded, in order."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _words(rule: str) -> list[tuple[str, bool]]:
    """The rule's words, each with whether the rule singles it out as a changing word (it is
    quoted, or stands next to an arrow): those are kept even when they are filler words."""
    rule = unicodedata.normalize("NFKC", rule)
    named = {word for match in _QUOTED.finditer(rule) for word in _tokens(match.group(1))}
    sides = _ARROW.split(rule)
    for before, after in itertools.pairwise(sides):
        named.update(_tokens(before)[-1:] + _tokens(after)[:1])
    return [(word, word in named) for word in _tokens(rule)]


def _terms(rule: str, changed: frozenset[str] = frozenset()) -> frozenset[str]:
    """The stems of the rule's words but its filler words, those it names as the change and
    those among `changed` (stems of the words a correction changed) kept all the same."""
    return frozenset(
        _stem(ABBREVIATIONS.get(word, word))
        for word, named in _words(rule)
        if named or word not in FILLER or _stem(word) in changed
    )


def rule_terms(rule: str) -> frozenset[str]:
    """The rule's terms: its words casefolded, filler words dropped (unless the rule names
    them as the change), abbreviations spelled out, each stemmed (English Snowball)."""
    return _terms(rule)


def rule_key(rule: str) -> str:
    """The rule's normalised name: its terms, sorted, joined by a space (cut to MAX_KEY)."""
    return " ".join(sorted(rule_terms(rule)))[:MAX_KEY].strip()


def _changes(original: str, corrected: str) -> tuple[list[str], list[str]]:
    """The words of `original` the correction changed, and what it changed them to, in order,
    without the punctuation around them (words compared casefolded; those on both sides
    unchanged are left out)."""
    before = original.split()
    after = corrected.split()
    matcher = difflib.SequenceMatcher(
        a=[" ".join(_tokens(w)) for w in before],
        b=[" ".join(_tokens(w)) for w in after],
        autojunk=False,
    )
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += _bare(before[i1:i2])
            added += _bare(after[j1:j2])
    return removed, added


def _bare(words: list[str]) -> list[str]:
    """`words` without the punctuation at their ends ("¿es" → "es"), none left empty."""
    return [bare for bare in (_EDGES.sub("", word) for word in words) if bare]


def _side(words: list[str]) -> str:
    text = " ".join(words[:MAX_SIDE_WORDS])[:MAX_SIDE_CHARS].strip()
    return text or "…"


def derived_rule(original: str, corrected: str) -> str:
    """A rule for a correction the model named none for: the changed words and their
    correction ("bueno → buen"); "…" for a side with no words (a word added or dropped)."""
    removed, added = _changes(original, corrected)
    if not removed and not added:  # only case or punctuation changed: the whole thing
        removed, added = original.split(), corrected.split()
    return f"{_side(removed)} → {_side(added)}"


def pattern_terms(rule: str, original: str, corrected: str) -> frozenset[str]:
    """`rule_terms`, with each term that is also a word the correction changed marked
    (CHANGED + term): those words are what tells "bueno → buen before a masculine singular
    noun" from "malo → mal before a masculine singular noun", and `same_pattern` makes them
    agree. A rule that names no changed word ("adjectives agree with feminine nouns") has no
    marks, and matches on its words alone."""
    removed, added = _changes(original, corrected)
    changed = frozenset(_stem(word) for word in _tokens(" ".join(removed + added)))
    return frozenset(CHANGED + t if t in changed else t for t in _terms(rule, changed))


def _marked(terms: frozenset[str]) -> frozenset[str]:
    return frozenset(term for term in terms if term.startswith(CHANGED))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """How alike two term sets are: their Jaccard index (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


# Near-equal wordings: Jaccard of at least SAME, or the smaller set inside the larger with at
# least CONTAINED terms. A rule is four to six terms; 0.6 lets each wording have about one
# term the other lacks (4 of 5 shared: 0.67; 3 of 4 and 4: 0.6), but not two frames that
# share only half ("masculine singular noun" and "singular noun": 0.67, yet with different
# changed words, which are held apart before this). Containment covers a wording that adds
# several words to the other ("… masculine singular noun (apocope)"), but needs three terms,
# so that one or two shared generic words ("verb tense") never swallow a longer rule.
SAME = 0.6
CONTAINED = 3


def same_pattern(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two term sets (`rule_terms` or `pattern_terms`) name the same pattern: the
    changed words they mark must be the same; a bare change ("bueno → buen", every term
    marked) is the pattern of any rule naming that change; otherwise near-equal wordings
    (SAME, CONTAINED)."""
    marked_a, marked_b = _marked(a), _marked(b)
    if marked_a != marked_b:
        return False
    if marked_a and (a == marked_a or b == marked_b):
        return True
    small, large = sorted((a, b), key=len)
    if len(small) >= CONTAINED and small <= large:
        return True
    return similarity(a, b) >= SAME
