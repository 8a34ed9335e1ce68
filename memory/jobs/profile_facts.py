"""The learned profile kept to what the learner said and set: the settings they stated
(`/language`, `/level`, `/corrections`) win over what a model learned, a fact must have a word
of theirs behind it, and the format's own descriptions copied as values are no facts. Pure
functions over the profile's fields; each thing dropped is logged once
(memory.grounding.dropped)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from memory.database.records import ALL, DENSITIES, FEW, NORMAL, LearnerInfo
from memory.grounding import Said, dropped, fold, supported
from prompts import template

# The learned fields each of the learner's own settings covers.
SETTINGS = {
    "target_language": "target_language",
    "native_language": "native_language",
    "level": "level",
    "corrections": "corrections",
}
# Words a learner uses when they say how much they want correcting, in the languages they
# speak and practise (folded stems: "corrij" is "no me corrijas todo"). A learned density needs
# one of them in the messages it was learned from: a model's guess is no preference.
_ABOUT_CORRECTING = (
    "correct", "mistake", "error", "nitpick", "typo",  # English
    "corrig", "correg", "corrij", "correc", "fallo", "equivoc",  # Spanish
    "correç", "erro",  # Portuguese
    "faute", "erreur",  # French
    "korrig", "korrektur", "fehler", "verbesser",  # German
    "corregg", "corress", "correz", "sbagli",  # Italian
    "verbeter", "fout",  # Dutch
    "popraw", "błęd", "błąd", "koryg", "korekt",  # Polish
    "исправ", "ошиб", "поправ", "коррект",  # Russian
    "виправ", "помил", "коригу",  # Ukrainian
    "düzelt", "hata", "yanlış",  # Turkish
    "訂正", "直し", "直さ", "直す", "間違", "添削",  # Japanese
    "纠正", "改正", "错误", "纠错", "改错",  # Chinese
    "고쳐", "교정", "틀린", "실수", "지적", "수정",  # Korean
    "صحح", "تصحيح", "أخطاء", "اخطاء", "خطأ", "غلط",  # Arabic
    "सुधार", "गलत", "ग़लत", "त्रुटि",  # Hindi
)  # fmt: skip
# Facts about the learner: each must be supported by their words. "style" and "focus" are the
# model's reading of how and why they chat, and "recurring_mistakes" are led by their review
# patterns: none of them quotes the learner.
FACT_FIELDS = ("who", "interests", "misc")
_PIECES = re.compile(r"[,;:/|()]|\bor\b")
_FORMAT_LINE = re.compile(r'^- "(\w+)"(?:, "\w+")*: (.+)$', re.MULTILINE)


def _pieces(text: str) -> list[str]:
    """The parts of `text` between commas, colons, slashes, bars, brackets and "or", folded."""
    return [p for p in (fold(part) for part in _PIECES.split(text)) if p]


@cache
def format_pieces() -> frozenset[str]:
    """The parts of profile.txt's description of each field ("string ≤300 chars", "name",
    "formal", "hobbies and favourite topics" …), folded: what a model that copies the format
    writes as values."""
    pieces: set[str] = {"string", "strings", "short strings", "null", "none", "unknown"}
    for match in _FORMAT_LINE.finditer(template("profile").template):
        pieces.update(_pieces(match.group(2)))
    return frozenset(pieces)


def is_placeholder(value: str) -> bool:
    """Whether `value` is the format's description copied: every part of it one of the
    description's parts, and more than one word in all ("casual" is a style; "formal/casual"
    and "hobbies and favourite topics" are the format)."""
    pieces = _pieces(value)
    words = sum(len(p.split()) for p in pieces)
    return bool(pieces) and words > 1 and all(p in format_pieces() for p in pieces)


def chosen_density(learner: LearnerInfo | None) -> str | None:
    """The correction density the learner chose (/corrections, the Fewer corrections tap),
    None when they chose none Pam can tell: NORMAL is also what a learner who never chose has
    (the command says NORMAL over what Pam learned by forgetting that, bot/turn/density.py)."""
    if learner is None or learner.corrections not in (FEW, ALL):
        return None
    return learner.corrections


def density(learner: LearnerInfo, learned: dict[str, Any]) -> str:
    """How many of the learner's mistakes a reply points out (one of DENSITIES): the density
    they chose, else the one Pam learned they prefer (`learned`: the profile), else NORMAL."""
    found = learned.get("corrections")
    return chosen_density(learner) or (found if found in DENSITIES else NORMAL)


def _setting(learner: LearnerInfo, field: str) -> str | None:
    """What the learner set for the learned `field`, None when they set nothing."""
    if field == "corrections":
        return chosen_density(learner)
    return getattr(learner, SETTINGS[field]) if field in SETTINGS else None


def settled(data: dict[str, Any], learner: LearnerInfo | None) -> dict[str, Any]:
    """`data` without the learned fields that a setting of the learner's covers: what they
    set is what Pam goes by, and what /profile shows, never a learned value beside it."""
    if learner is None:
        return data
    covered = {field for field in SETTINGS if _setting(learner, field)}
    return {key: value for key, value in data.items() if key not in covered}


@cache
def _correcting() -> re.Pattern[str]:
    """_ABOUT_CORRECTING as one pattern over folded text: a stem in a Latin or Cyrillic script
    starts a word ("erro" is in "perro"); others may sit inside one (Arabic's article and
    Japanese's unspaced words go before them)."""
    stems = sorted({fold(stem) for stem in _ABOUT_CORRECTING})
    starts = [s for s in stems if s[0] < "\u0250" or "\u0400" <= s[0] <= "\u04ff"]
    inside = [s for s in stems if s not in starts]
    return re.compile(
        rf"(?<!\w)(?:{'|'.join(map(re.escape, starts))})|{'|'.join(map(re.escape, inside))}"
    )


def _about_correcting(messages: Sequence[str]) -> bool:
    """Whether any of `messages` talks about being corrected (compared folded)."""
    return any(_correcting().search(fold(text)) for text in messages)


def _known(old: dict[str, Any]) -> list[str]:
    """Every text the old profile holds: facts already learned support themselves."""
    texts: list[str] = []
    for value in old.values():
        texts += [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
        texts += [value] if isinstance(value, str) else []
    return texts


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in re.split(r"[,;]|\.(?:\s|$)", text) if c.strip()]


def grounded(
    new: dict[str, Any],
    old: dict[str, Any],
    messages: Sequence[str],
    learner: LearnerInfo | None,
) -> dict[str, Any]:
    """The fields of a profile answer `new` worth keeping over `old`: a language or level the
    learner set is theirs, not the model's (dropped when it says otherwise); the format's
    descriptions copied are dropped; of the facts (FACT_FIELDS), each item, or clause of
    "who", must be in `old` already or share a word with the learner's `messages` (see
    memory.grounding.supported). A field with nothing left keeps its old value."""
    learner_id = learner.id if learner is not None else None
    source = Said([*messages, *_known(old)])
    kept: dict[str, Any] = {}
    for name, value in new.items():
        setting = _setting(learner, name) if learner else None
        if setting and fold(str(value)) != fold(setting):
            dropped("profile_fact", "contradicts_settings", learner_id)
            continue
        if name == "corrections" and value != old.get(name) and not _about_correcting(messages):
            dropped("profile_fact", "unsupported", learner_id)
            continue
        if isinstance(value, str):
            value = _text(name, value, source, learner_id)
        elif isinstance(value, list):
            value = _items(name, value, old.get(name), source, learner_id)
        if value:
            kept[name] = value
    return kept


def _text(name: str, value: str, source: Said, learner: int | None) -> str | None:
    if is_placeholder(value):
        dropped("profile_fact", "placeholder", learner)
        return None
    if name not in FACT_FIELDS:
        return value
    clauses = _clauses(value)
    backed = [c for c in clauses if supported(c, source)]
    for _ in range(len(clauses) - len(backed)):
        dropped("profile_fact", "unsupported", learner)
    if len(backed) == len(clauses):
        return value
    return ", ".join(backed) or None


def _items(
    name: str, values: list[Any], before: Any, source: Said, learner: int | None
) -> list[Any] | None:
    had = {fold(v) for v in before if isinstance(v, str)} if isinstance(before, list) else set()
    kept = []
    for item in values:
        if not isinstance(item, str):
            kept.append(item)
            continue
        reason = None
        if is_placeholder(item):
            reason = "placeholder"
        elif name in FACT_FIELDS and fold(item) not in had and not supported(item, source):
            reason = "unsupported"
        if reason is None:
            kept.append(item)
        else:
            dropped("profile_fact", reason, learner)
    return kept or None
