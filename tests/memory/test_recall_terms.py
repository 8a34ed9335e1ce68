"""Recall's stems come from Snowball's C stemmers (PyStemmer), which snowballstemmer uses when
it can import them: the same algorithms as its pure-Python ones, about 90 times faster (0.9
against 80 µs a French word on this project's machine), and stemming was a fifth of the
memory process's indexing time. Stems are stored (SQLite's recall index), so the two must
agree word for word: a stem that changed with the package would leave old entries unfound."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import snowballstemmer

from memory.recall_terms import stemmer_for, stems

LOCALES = Path(__file__).resolve().parents[2] / "bot" / "i18n" / "locales"
# Pam's catalogs by the Snowball algorithm of their language.
CATALOGS = {
    "arabic": "ar", "dutch": "nl", "french": "fr", "german": "de", "hindi": "hi",
    "italian": "it", "polish": "pl", "portuguese": "pt", "russian": "ru", "spanish": "es",
    "turkish": "tr",
}  # fmt: skip
SAMPLE = 400  # words from every catalog, for the algorithms with no catalog of their own


def catalog_words(locale: str | None) -> list[str]:
    """The words of Pam's catalogs in `locale` (every locale's with None), lowercased, once,
    in order."""
    found: dict[str, None] = {}
    for path in sorted(LOCALES.glob(f"{locale or '*'}/LC_MESSAGES/*.po")):
        text = path.read_text(encoding="utf-8")
        found.update(dict.fromkeys(w.lower() for w in re.findall(r"[^\W_\d]+", text)))
    return list(found)


def pure_python(algorithm: str) -> snowballstemmer.Stemmer:
    """snowballstemmer's own (pure-Python) stemmer for `algorithm`."""
    module = importlib.import_module(f"snowballstemmer.{algorithm}_stemmer")
    name = next(n for n in dir(module) if n.endswith("Stemmer") and n != "BaseStemmer")
    return getattr(module, name)()


def test_recall_stems_with_the_c_stemmers() -> None:
    import Stemmer  # PyStemmer: a dependency, so every install has it

    assert isinstance(stemmer_for("spanish"), Stemmer.Stemmer)
    assert stems(["perros", "corriendo"], "spanish") == ["perr", "corr"]


@pytest.mark.parametrize("algorithm", sorted(snowballstemmer.algorithms()))
def test_the_c_stemmers_give_the_pure_python_ones_stems(algorithm: str) -> None:
    everything = catalog_words(None)
    words = catalog_words(CATALOGS[algorithm]) if algorithm in CATALOGS else []
    words += everything[:: max(1, len(everything) // SAMPLE)]
    assert len(words) >= SAMPLE
    assert stemmer_for(algorithm).stemWords(words) == pure_python(algorithm).stemWords(words)
