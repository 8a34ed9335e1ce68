"""Token counting with real tiktoken, its offline fallback, and truncation to a token cap."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tiktoken
import tiktoken.registry
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.tokens import DEFAULT_ENCODING, MESSAGE_OVERHEAD, TokenCounter, approximate_tokens

SAMPLES = [
    "Hello, how are you doing today? I went to the market yesterday.",
    "Ayer fui al mercado y compré muchas frutas deliciosas.",
    "你好世界，我今天去了市场买了很多水果。",
    "こんにちは、元気ですか？今日はいい天気ですね。",
    "Привет, как дела? Я вчера ходил в магазин.",
    "مرحبا، كيف حالك؟ 🙂 <|endoftext|>",
]
CJK = "我昨天和朋友一起去公园散步然后我们在湖边喝咖啡聊了很久关于工作和旅行的计划" * 3


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tiktoken with an empty cache, no encodings loaded in-process and downloads refused."""
    empty = tmp_path / "empty-tiktoken-cache"
    empty.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(empty))
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: refused at once
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4o", "o200k_base"),
        ("llama3.1:8b", DEFAULT_ENCODING),
        ("some-unknown-local-model", DEFAULT_ENCODING),
    ],
)
def test_encoding_follows_the_model_and_defaults_to_o200k(model: str, encoding: str) -> None:
    assert DEFAULT_ENCODING == "o200k_base"
    assert TokenCounter(model).encoding_name == encoding


@pytest.mark.parametrize("model", ["gpt-4o-mini", "an-unknown-model"])
@pytest.mark.parametrize("text", SAMPLES)
def test_counts_are_tiktoken_counts(model: str, text: str) -> None:
    counter = TokenCounter(model)
    expected = len(tiktoken.get_encoding("o200k_base").encode(text, disallowed_special=()))
    assert counter.count(text) == expected
    assert counter.count_message(text) == expected + MESSAGE_OVERHEAD
    assert not counter.approximate


def test_counts_hold_once_the_encodings_python_copy_of_its_ranks_is_freed() -> None:
    """The counter frees the 200,000-entry dict tiktoken keeps only to pickle an encoding;
    counts come from tiktoken's Rust core, as before: o200k's own counts of SAMPLES."""
    counter = TokenCounter("gpt-4o-mini")

    counts = [counter.count(text) for text in SAMPLES]

    assert counts == [15, 13, 11, 13, 13, 15]
    assert not tiktoken.get_encoding("o200k_base")._mergeable_ranks


def test_empty_text_counts_zero(counter: TokenCounter) -> None:
    assert counter.count("") == 0
    assert counter.count_message("") == MESSAGE_OVERHEAD


def test_special_token_text_is_counted_as_ordinary_text(counter: TokenCounter) -> None:
    """A learner typing `<|endoftext|>` must not crash counting (tiktoken refuses by default)."""
    assert counter.count("<|endoftext|>") > 1


def test_without_the_encoding_counts_are_approximate_and_warn_once(
    offline: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memory.tokens")
    counter = TokenCounter("gpt-4o-mini")
    counts = [counter.count(text) for text in SAMPLES]
    assert counter.approximate
    assert counts == [approximate_tokens(text) for text in SAMPLES]
    assert counter.count_message("hola") == approximate_tokens("hola") + MESSAGE_OVERHEAD
    assert counter.truncate(CJK, 10) == CJK[: len(counter.truncate(CJK, 10))]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "approximate" in warnings[0].getMessage()
    assert "o200k_base" in warnings[0].getMessage()


def test_concurrent_first_counts_warn_once(offline: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="memory.tokens")
    counter = TokenCounter("gpt-4o-mini")
    start = threading.Barrier(6)

    def count(text: str) -> int:
        start.wait()
        return counter.count(text)

    with ThreadPoolExecutor(max_workers=6) as pool:
        counts = list(pool.map(count, SAMPLES))
    assert counts == [approximate_tokens(text) for text in SAMPLES]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_fallback_is_not_taken_when_the_cache_is_present(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="memory.tokens")
    counter = TokenCounter("some-unknown-model")
    assert counter.count("hola") > 0
    assert not counter.approximate
    assert not caplog.records


@pytest.mark.parametrize("text", SAMPLES)
def test_approximate_counts_are_in_the_right_range(counter: TokenCounter, text: str) -> None:
    real = counter.count(text)
    assert real / 2 <= approximate_tokens(text) <= real * 2


def test_approximate_counts_never_fail_on_odd_text() -> None:
    for text in ["", " ", "\n\t", "🙂" * 50, "a" * 10_000, "\u200f\u200e", "\x00"]:
        assert approximate_tokens(text) >= 0


# -- truncate -----------------------------------------------------------------------------


def test_truncate_keeps_text_that_fits(counter: TokenCounter) -> None:
    text = SAMPLES[0]
    assert counter.truncate(text, counter.count(text)) == text


def test_truncate_cuts_on_a_word_boundary(counter: TokenCounter) -> None:
    text = " ".join(f"word{n}" for n in range(200))
    cut = counter.truncate(text, 50)
    assert text.startswith(cut)
    assert 0 < counter.count(cut) <= 50
    assert text[len(cut)] == " "  # the next character starts a new word


def test_truncate_cjk_without_spaces_respects_the_cap(counter: TokenCounter) -> None:
    assert " " not in CJK
    assert counter.count(CJK) > 40
    cut = counter.truncate(CJK, 40)
    assert CJK.startswith(cut)
    assert 30 <= counter.count(cut) <= 40  # cut by characters, not emptied


def test_truncate_to_zero_is_empty(counter: TokenCounter) -> None:
    assert counter.truncate(SAMPLES[0], 0) == ""
    assert counter.truncate(CJK, 0) == ""


TEXTS = st.one_of(
    st.text(max_size=300),
    # Words, spaces, accents, CJK and emoji: exercises both the word and the character cut.
    st.text(alphabet="ab  éñ你好世界こんにちは🙂\n.,", max_size=300),
)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(min_value=0, max_value=60))
def test_truncate_is_a_prefix_within_the_cap(text: str, limit: int) -> None:
    counter = TokenCounter("gpt-4o-mini")
    cut = counter.truncate(text, limit)
    assert text.startswith(cut)
    assert counter.count(cut) <= limit
    if counter.count(text) <= limit:
        assert cut == text
