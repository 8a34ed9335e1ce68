"""The fonts a chart's words are drawn in. DejaVu Sans, matplotlib's own, covers the Latin,
Cyrillic and Greek alphabets; Arabic, Devanagari and the CJK scripts come from Noto fonts
installed from PyPI with Pam (pyproject.toml), so a fresh clone or image has them without a
system font package. matplotlib (3.11 on) lays text out with libraqm: Arabic is joined and
runs right to left, Devanagari's vowel signs and conjuncts are shaped.

A script's font is registered with matplotlib the first time a chart needs it, then named
first in the text's family list, DejaVu Sans after it for what it lacks (✓, Latin digits)."""

from __future__ import annotations

import dataclasses
import threading
from importlib.resources import files

LATIN = "DejaVu Sans"
# locale → (the package that ships the font, its file in the package, the family it names)
SCRIPT_FONTS = {
    "ar": ("fontpkg_noto_sans_arabic", "files/NotoSansArabic[wdth,wght].ttf", "Noto Sans Arabic"),
    "hi": (
        "fontpkg_noto_sans_devanagari",
        "files/NotoSansDevanagari[wdth,wght].ttf",
        "Noto Sans Devanagari",
    ),
    "ja": ("justmytype_intl_cjk", "fonts/ofl/notosansjp/NotoSansJP[wght].ttf", "Noto Sans JP"),
    "zh": ("justmytype_intl_cjk", "fonts/ofl/notosanssc/NotoSansSC[wght].ttf", "Noto Sans SC"),
    "ko": ("justmytype_intl_cjk", "fonts/ofl/notosanskr/NotoSansKR[wght].ttf", "Noto Sans KR"),
}
REGULAR = 400
# The locales whose font draws thin (a variable font whose default instance is Thin), and the
# outline, per point of text size, that brings its letters to a regular weight.
THIN_FONTS = frozenset({"ja", "zh", "ko"})
THIN_FONT_STROKE = 0.045

_registered: set[str] = set()
_lock = threading.Lock()


def families(locale: str) -> list[str]:
    """The font families, in order of preference, a chart in `locale` is drawn with."""
    found = SCRIPT_FONTS.get(locale)
    if found is None:
        return [LATIN]
    package, path, family = found
    with _lock:
        if family not in _registered:
            _register(str(files(package) / path))
            _registered.add(family)
    return [family, LATIN]


def _register(path: str) -> None:
    """Add the font at `path` to matplotlib's list as a regular weight: these are variable
    fonts, some of which (Noto Sans JP, SC, KR) give their weight as Thin, so matplotlib would
    log that it found no regular weight each time it looks for one."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    manager.addfont(path)
    manager.ttflist = [
        dataclasses.replace(entry, weight=REGULAR) if entry.fname == path else entry
        for entry in manager.ttflist
    ]
