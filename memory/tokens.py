"""Token counting with tiktoken, falling back to an estimate when no encoding can be loaded."""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
# Chat formats wrap every message in a few tokens of framing (role, separators).
MESSAGE_OVERHEAD = 4

_WORDISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def approximate_tokens(text: str) -> int:
    """A rough count for when tiktoken is unavailable: one token per punctuation mark, and per
    word one token for every 6 bytes of UTF-8 (about 6 Latin letters, or 2 CJK characters)."""
    count = 0
    for piece in _WORDISH.findall(text):
        count += max(1, math.ceil(len(piece.encode("utf-8")) / 6))
    return count


def _drop_pickling_copy(encoding: object) -> None:
    """Free the Python copy of an encoding's ranks (o200k: 200,000 entries, some 26 MB in
    every process that counts tokens: the worker and its memory-jobs child). tiktoken encodes
    with the ranks its Rust core copied at construction and keeps the dict only to pickle the
    encoding, which Pam never does; tests/memory/test_tokens.py checks counts still hold."""
    ranks = getattr(encoding, "_mergeable_ranks", None)
    if isinstance(ranks, dict):
        ranks.clear()


class TokenCounter:
    """Counts tokens for one model's encoding; loads it lazily and never raises."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._encode: Callable[[str], list[int]] | None = None
        self._approximate = False
        self._lock = threading.Lock()

    @property
    def approximate(self) -> bool:
        """True once the encoding failed to load and counts are estimates."""
        self._load()
        return self._approximate

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding used for this model (what the model maps to, else o200k)."""
        try:
            import tiktoken.model

            return tiktoken.model.encoding_name_for_model(self.model)
        except Exception:
            return DEFAULT_ENCODING

    def _load(self) -> None:
        if self._encode is not None or self._approximate:
            return
        with self._lock:
            if self._encode is not None or self._approximate:
                return
            try:
                import tiktoken

                encoding = tiktoken.get_encoding(self.encoding_name)
                _drop_pickling_copy(encoding)
                self._encode = lambda text: encoding.encode(text, disallowed_special=())
            except Exception as exc:  # no network, no cache, broken file: never crash
                self._approximate = True
                log.warning(
                    "tiktoken could not load %s (%s: %s); token counts are approximate. "
                    "Set TIKTOKEN_CACHE_DIR to a folder holding the encoding files, "
                    "or allow the download.",
                    self.encoding_name,
                    type(exc).__name__,
                    exc,
                )

    def count(self, text: str) -> int:
        """The number of tokens in `text`."""
        self._load()
        if self._encode is None:
            return approximate_tokens(text)
        return len(self._encode(text))

    def count_message(self, text: str) -> int:
        """Tokens `text` costs as one chat message, framing included."""
        return self.count(text) + MESSAGE_OVERHEAD

    def truncate(self, text: str, max_tokens: int) -> str:
        """`text` cut to at most `max_tokens` tokens, on a word boundary where possible."""
        if self.count(text) <= max_tokens:
            return text
        words = text.split(" ")
        fit = self._longest_fitting_prefix(len(words), lambda n: " ".join(words[:n]), max_tokens)
        if fit:
            return " ".join(words[:fit])
        # No whole word fits (e.g. CJK text without spaces): cut by characters instead.
        return text[: self._longest_fitting_prefix(len(text), lambda n: text[:n], max_tokens)]

    def _longest_fitting_prefix(
        self, size: int, prefix: Callable[[int], str], max_tokens: int
    ) -> int:
        low, high = 0, size
        while low < high:
            mid = (low + high + 1) // 2
            if self.count(prefix(mid)) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        return low
