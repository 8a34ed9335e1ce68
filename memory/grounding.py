"""Whether what a model said is grounded in what the learner wrote: a correction's original
quoted from their message, a reply that is not their message (or Pam's last one) said back, a
profile fact with a word of theirs behind it. Pure functions over text, compared loosely (case,
accents, punctuation and spacing aside; a small edit distance allowed where a quote may be
slightly off), and one log line per dropped thing, with a stable reason word (never content),
so a run can count what each check dropped:

    dropped <kind> reason=<reason> learner=<id>

e.g. `dropped correction reason=not_in_message learner=7`."""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable

from rapidfuzz import process
from rapidfuzz.distance import Indel, Levenshtein

log = logging.getLogger(__name__)

# A reply this alike to the learner's message says it back, with a word or two changed at most
# ("yo es cansado" → "yo estoy cansado": 0.9). Alike: twice the longest common subsequence of
# the folded texts over their two lengths (rapidfuzz's normalized InDel similarity: in C, a
# few microseconds where difflib's ratio took 0.3 ms a reply, twice a turn).
ECHO_RATIO = 0.85
# Shorter texts are said back by friends too ("Hola" → "¡Hola!").
ECHO_WORDS = 3
# Or its words are nearly all theirs and cover nearly all of theirs: the same words reordered.
ECHO_SHARE = 0.8
# The shortest word a fact's word may share only its start with ("London" and "Londres",
# "novels" and "novelas"): facts are in English, learners write in the language they learn.
STEM_CHARS = 4
# English words that carry no fact ("plans a trip to London": "plans", "trip", "london").
FILLER = frozenset(
    """
    a an the of to in on at for with from by about and or but not no is are was were be been
    has have had he she they them their his her its it this that these those who which
    likes like loves love enjoys enjoy wants want plans planning learner user some very
    """.split()  # noqa: SIM905 - a list of words reads best as words
)

_KEPT = "LN"  # letters and numbers; every other character (punctuation, symbols) is a space


def fold(text: str, *, accents: bool = False) -> str:
    """`text` compared loosely: casefolded, accents removed (kept with `accents`),
    punctuation and symbols as spaces, spaces collapsed ("¿Dónde  ESTÁ?" → "donde esta")."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    kept = (
        ch if unicodedata.category(ch)[0] in _KEPT or unicodedata.combining(ch) else " "
        for ch in decomposed
        if accents or not unicodedata.combining(ch)
    )
    return unicodedata.normalize("NFC", " ".join("".join(kept).split()))


def written_in(phrase: str, text: str) -> bool:
    """Whether `phrase` stands in `text` as written, accents and all (case, punctuation and
    spacing aside): "está" is not in "esta"."""
    wanted = fold(phrase, accents=True)
    return bool(wanted) and f" {wanted} " in f" {fold(text, accents=True)} "


def allowed_edits(length: int) -> int:
    """The edits a quote of `length` folded characters may be off by: none for a word of up
    to four letters (one edit turns "buen" into "bueno"), then one per ten characters, at most
    three."""
    if length <= STEM_CHARS:
        return 0
    return min(3, 1 + length // 10)


def distance(a: str, b: str, limit: int) -> int:
    """The edit distance (Levenshtein) of `a` and `b`, or `limit` + 1 once it is surely more
    than `limit` (so a long text costs little to turn down)."""
    return int(Levenshtein.distance(a, b, score_cutoff=limit))


def quoted_in(phrase: str, text: str) -> int | None:
    """How far `phrase` is from the closest run of whole words of `text` (0: it is there,
    compared loosely); None when no run is within `allowed_edits` of it."""
    wanted, words = fold(phrase), fold(text).split()
    if not wanted or not words:
        return None
    if f" {wanted} " in f" {' '.join(words)} ":
        return 0
    limit = allowed_edits(len(wanted))
    if limit == 0:
        return None
    size = len(wanted.split())
    best: int | None = None
    for width in {max(1, size - 1), size, size + 1}:
        for start in range(len(words) - width + 1):
            found = distance(wanted, " ".join(words[start : start + width]), limit)
            if found <= limit and (best is None or found < best):
                best = found
    return best


def echoes(reply: str, earlier: str) -> bool:
    """Whether `reply` says `earlier` back (the learner's message, or Pam's previous reply):
    the same text compared loosely, nearly the same (ECHO_RATIO), or the same words
    reordered (ECHO_SHARE each way). An `earlier` of fewer than ECHO_WORDS words is never
    echoed."""
    said, before = fold(reply), fold(earlier)
    if len(before.split()) < ECHO_WORDS:
        return False  # "Hola" → "¡Hola! 👋": a greeting said back is a friend's reply
    if said == before or Indel.normalized_similarity(said, before) >= ECHO_RATIO:
        return True
    mine, theirs = set(said.split()), set(before.split())
    shared = len(mine & theirs)
    return shared >= ECHO_SHARE * len(mine) and shared >= ECHO_SHARE * len(theirs)


def content_words(text: str) -> set[str]:
    """The words of `text` that can carry a fact: folded, without FILLER."""
    return {w for w in fold(text).split() if w not in FILLER}


class Said:
    """The folded words of some texts, and their first STEM_CHARS letters, worked out once
    for the many facts checked against them."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.words = frozenset(w for text in texts for w in fold(text).split())
        self.starts = frozenset(w[:STEM_CHARS] for w in self.words if len(w) >= STEM_CHARS)
        self._long = [w for w in self.words if len(w) >= STEM_CHARS]

    def matches(self, word: str) -> bool:
        """Whether `word` (folded) is one of these words, or shares its first STEM_CHARS
        letters with one, or (longer than that) is one edit from one."""
        if word in self.words:
            return True
        if len(word) < STEM_CHARS or word.isdigit():
            return False
        if word[:STEM_CHARS] in self.starts:
            return True
        if len(word) == STEM_CHARS:
            return False
        near = process.extractOne(word, self._long, scorer=Levenshtein.distance, score_cutoff=1)
        return near is not None


def supported(fact: str, source: Iterable[str] | Said) -> bool:
    """Whether one of `fact`'s content words is among `source`'s words (folded), or shares
    its first STEM_CHARS letters with one ("London" and "Londres"). A fact with no content
    word claims nothing: supported."""
    words = content_words(fact)
    if not words:
        return True
    said = source if isinstance(source, Said) else Said(source)
    return any(said.matches(word) for word in words)


def overlap(text: str, source: Iterable[str]) -> float:
    """The share of `text`'s words that are among `source`'s words (folded), or share their
    first STEM_CHARS letters with one, or are one edit from one: 0 for a text without words."""
    words = fold(text).split()
    if not words:
        return 0.0
    said = Said(source)
    return sum(said.matches(word) for word in words) / len(words)


def dropped(kind: str, reason: str, learner: int | None) -> None:
    """Log one dropped `kind` (correction, reply, profile_fact, …) with its `reason`, a stable
    word: never what the model or the learner wrote."""
    log.info("dropped %s reason=%s learner=%s", kind, reason, learner)


def sentence_end(text: str) -> str:
    """`text` up to its last full sentence (or line), for a summary cut off at its cap;
    failing any, up to its last whole word; "" for no whole word at all."""
    text = text.rstrip()
    ends = list(_SENTENCE_END.finditer(text))
    if ends:
        return text[: ends[-1].end()].rstrip()
    space = text.rfind(" ")
    return text[:space].rstrip(" ,;:—-") + "…" if space > 0 else ""


# A sentence ends at . ! ? … (and closing quotes or brackets after them), or a line ends.
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]]*(?=\s|$)|\n")
