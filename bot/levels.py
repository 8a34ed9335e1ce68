"""CEFR levels as learners type them: a code ("b1"), a range ("B1-B2 intermediate", the
lower end taken), or a word in English or in one of the languages Pam speaks her own words
in ("upper intermediate", "avanzado", "Anfänger", "中級")."""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

LEVELS = ("A1", "A2", "B1", "B2", "C1", "C2")

# The words people use for a level, each as `normalized` keys it. They follow the CEFR's own
# English labels (A1 beginner, A2 elementary, B1 intermediate, B2 upper intermediate, C1
# advanced, C2 proficient) and the usual course names in each language; "advanced" is C1 in
# every language (Spain's EOI call B2 "avanzado", but learners mean C1 by it, and the answer
# says which level Pam took).
LEVEL_WORDS: dict[str, str] = {
    # English
    "beginner": "A1", "absolute beginner": "A1", "novice": "A1", "starter": "A1",
    "basic": "A1", "elementary": "A2", "pre intermediate": "A2", "intermediate": "B1",
    "lower intermediate": "B1", "upper intermediate": "B2", "advanced": "C1",
    "upper advanced": "C2", "proficient": "C2", "proficiency": "C2", "mastery": "C2",
    # Spanish
    "principiante": "A1", "basico": "A1", "inicial": "A1", "elemental": "A2",
    "preintermedio": "A2", "intermedio": "B1", "intermedia": "B1", "intermedio alto": "B2",
    "intermedio avanzado": "B2", "avanzado": "C1", "avanzada": "C1", "experto": "C2",
    "experta": "C2", "dominio": "C2", "maestria": "C2",
    # Portuguese
    "iniciante": "A1", "elementar": "A2", "pre intermediario": "A2", "intermediario": "B1",
    "intermedio superior": "B2", "intermediario superior": "B2",
    "intermediario avancado": "B2", "avancado": "C1", "avancada": "C1", "proficiente": "C2",
    # French
    "debutant": "A1", "debutante": "A1", "elementaire": "A2", "pre intermediaire": "A2",
    "intermediaire": "B1", "intermediaire superieur": "B2", "avance": "C1", "avancee": "C1",
    "expert": "C2", "maitrise": "C2",
    # German
    "anfanger": "A1", "anfangerin": "A1", "anfaenger": "A1", "grundstufe": "A2",
    "mittelstufe": "B1", "obere mittelstufe": "B2", "fortgeschritten": "C1",
    "fortgeschrittene": "C1", "fortgeschrittener": "C1", "experte": "C2", "expertin": "C2",
    # Italian
    "elementare": "A2", "intermedio superiore": "B2", "avanzato": "C1", "avanzata": "C1",
    "esperto": "C2", "esperta": "C2", "padronanza": "C2",
    # Dutch
    "beginnend": "A1", "elementair": "A2", "halfgevorderd": "B1", "gemiddeld": "B1",
    "gevorderd": "C1", "zeer gevorderd": "C2",
    # Polish
    "poczatkujacy": "A1", "poczatkujaca": "A1", "podstawowy": "A2",
    "srednio zaawansowany": "B1", "srednio zaawansowana": "B1",
    "wyzszy srednio zaawansowany": "B2", "zaawansowany": "C1", "zaawansowana": "C1",
    "biegly": "C2", "biegla": "C2",
    # Russian
    "начинающий": "A1", "начинающая": "A1", "начальный": "A1", "элементарный": "A2",
    "базовый": "A2", "средний": "B1", "выше среднего": "B2", "продвинутый": "C1",
    "продвинутая": "C1", "в совершенстве": "C2",
    # Ukrainian
    "початківець": "A1", "початковий": "A1", "елементарний": "A2", "базовий": "A2",
    "середній": "B1", "вище середнього": "B2", "просунутий": "C1", "досконалий": "C2",
    # Turkish
    "baslangic": "A1", "temel": "A2", "orta": "B1", "orta ustu": "B2", "ileri": "C1",
    "ileri duzey": "C1", "uzman": "C2",
    # Japanese
    "初心者": "A1", "入門": "A1", "初級": "A1", "初中級": "A2", "中級": "B1", "中上級": "B2",
    "上級": "C1", "超級": "C2",
    # Chinese (simplified; the traditional forms are Japanese's above)
    "入门": "A1", "初级": "A1", "初中级": "A2", "中级": "B1", "中高级": "B2", "高级": "C1",
    "精通": "C2", "中高級": "B2", "高級": "C1",
    # Korean
    "초보": "A1", "초급": "A1", "초중급": "A2", "중급": "B1", "중상급": "B2", "중고급": "B2",
    "고급": "C1", "최고급": "C2",
    # Arabic
    "مبتدئ": "A1", "مبتدئة": "A1", "أساسي": "A2", "متوسط": "B1", "فوق المتوسط": "B2",
    "متقدم": "C1", "متقدمة": "C1", "متمكن": "C2",
    # Hindi
    "शुरुआती": "A1", "प्रारंभिक": "A1", "बुनियादी": "A2", "मध्यम": "B1", "उच्च मध्यम": "B2",
    "उन्नत": "C1", "निपुण": "C2",
}  # fmt: skip

# Words around a level that say nothing about it ("level B1", "nivel intermedio").
FILLERS = {"level", "nivel", "nível", "niveau", "livello", "poziom", "уровень", "рівень"}

_CODE = re.compile(r"(?<![a-z0-9])([abc][12])(?![a-z0-9])")
_SEPARATORS = re.compile(r"\s*(?:[-–—/,+]|\bto\b|\ba\b|\bbis\b|\bà\b)\s*")


class Level(NamedTuple):
    """A level read from what the learner typed: the CEFR `level` Pam takes, the `word` it
    was named by (None for a code), and the `upper` end of a range typed ("B1-B2": B2),
    when the lower end is taken."""

    level: str
    word: str | None = None
    upper: str | None = None


def normalized(text: str) -> str:
    """`text` as the level words key it: lower case, hyphens and dots as spaces, accents off
    Latin letters ("Anfänger" → "anfanger", "upper-intermediate" → "upper intermediate")."""
    text = unicodedata.normalize("NFC", text).casefold().replace("-", " ").replace(".", " ")
    text = " ".join(word for word in text.split() if word not in FILLERS)
    # Polish "ł" and Turkish "ı" have no decomposition: they are spelled out.
    decomposed = unicodedata.normalize("NFKD", text.replace("ł", "l").replace("ı", "i"))
    folded = "".join(c for c in decomposed if not unicodedata.combining(c))
    # Only where that leaves Latin letters: a mark off Cyrillic "й" or Hindi would change
    # the word.
    return folded if folded.isascii() else text


def read_level(text: str) -> Level | None:
    """The level `text` names: a CEFR code, a level word, or a range of either (the lower
    end, with the upper one said); None when it names none."""
    key = normalized(text)
    if not key:
        return None
    codes = sorted({code.upper() for code in _CODE.findall(key)})
    if codes:
        # Codes with nothing else but separators and level words ("B1–B2 intermediate"):
        # "C2 </learner_profile>" names no level, it carries something else.
        rest = " ".join(_SEPARATORS.sub(" ", _CODE.sub(" ", key)).split())
        if rest and _words_level(rest) is None:
            return None
        return Level(codes[0], upper=codes[-1] if len(codes) > 1 else None)
    return _words_level(key, text)


def _words_level(key: str, text: str | None = None) -> Level | None:
    """The level `key` (normalised) names in words, alone or as a range; None otherwise."""
    text = key if text is None else text
    if key in LEVEL_WORDS:
        return Level(LEVEL_WORDS[key], word=text.strip())
    parts = [LEVEL_WORDS.get(part) for part in _SEPARATORS.split(key) if part]
    if len(parts) > 1 and all(parts):
        found = sorted({level for level in parts if level})
        return Level(found[0], word=text.strip(), upper=found[-1] if len(found) > 1 else None)
    return None
