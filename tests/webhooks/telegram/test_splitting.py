"""Splitting long replies (bot.worker.splitting.split_message) and Telegram's HTML formatting
(webhooks.telegram.sender.format_html): properties, and the examples they must hold for."""

from __future__ import annotations

import html
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.worker.splitting import split_message
from webhooks.telegram.sender import format_html

TELEGRAM_LIMIT = 4096
TAG = re.compile(r"<(/?)([a-z]+)>")

# deadline=None: hypothesis's per-example time limit is a wall-clock assertion.
properties = settings(max_examples=100, deadline=None)

# Text rich in what splitting and formatting care about, plus arbitrary characters.
TOKENS = [
    "a", "b", "ñ", " ", "  ", "\n", "\n\n", "\n \n", "\t", "\r", ".", "!", "?", "…", "。", "»", '"',
    "<", ">", "&", "&amp;", "<b>", "</s>", "→", " → ", " — ", "✏️ ", "😀", "🇪🇸", "\u2028",
]  # fmt: skip
any_text = st.lists(st.one_of(st.sampled_from(TOKENS), st.characters()), max_size=120).map("".join)
limits = st.integers(min_value=1, max_value=80)

word = st.text(alphabet="abcdefghijklmnñopqrstuvwxyzáé", min_size=1, max_size=12)
paragraph = st.lists(word, min_size=1, max_size=25).map(" ".join)
sentence = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(word, min_size=1, max_size=10),
    st.sampled_from([".", "!", "?", "…", ".»", "?”"]),
)


def usable(limit: int) -> range:
    """Where a part may end at a preferred boundary: within the limit, but past the first
    third (a boundary earlier than that would leave a stub; a finer boundary is better)."""
    return range(limit // 3 + 1, limit + 1)


def starts(parts: list[str]) -> list[int]:
    """The offset of each part in the original text."""
    offsets, at = [], 0
    for part in parts:
        offsets.append(at)
        at += len(part)
    return offsets


# -- split_message: properties -------------------------------------------------------------


@properties
@given(any_text, limits)
def test_parts_join_back_to_the_original_and_respect_the_limit(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert "".join(parts) == text
    assert all(len(part) <= limit for part in parts)


@properties
@given(any_text, limits)
def test_no_part_is_empty_unless_the_text_is(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    if text:
        assert all(parts)
    else:
        assert parts == [""]


@properties
@given(any_text, limits)
def test_a_text_within_the_limit_is_one_part(text: str, limit: int) -> None:
    if len(text) <= limit:
        assert split_message(text, limit) == [text]
    else:
        assert len(split_message(text, limit)) >= 2


@properties
@given(st.lists(paragraph, min_size=1, max_size=12).map("\n\n".join), st.integers(8, 200))
def test_parts_end_at_the_last_paragraph_break_in_the_usable_window(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert "".join(parts) == text
    for part, start in zip(parts[:-1], starts(parts), strict=False):
        rest = text[start:]
        breaks = [m.end() for m in re.finditer("\n\n", rest) if m.end() in usable(limit)]
        if breaks:
            assert len(part) == breaks[-1], (part, rest[: limit + 1])
            assert part.endswith("\n\n")


@properties
@given(st.lists(sentence, min_size=1, max_size=20).map(" ".join), st.integers(8, 200))
def test_parts_end_after_the_last_sentence_in_the_usable_window(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert "".join(parts) == text
    for part, start in zip(parts[:-1], starts(parts), strict=False):
        rest = text[start:]
        ends = [m.end() for m in re.finditer(r"[.!?…][»”]? ", rest) if m.end() in usable(limit)]
        if ends:
            assert len(part) == ends[-1], (part, rest[: limit + 1])


@properties
@given(st.lists(word, min_size=1, max_size=40).map(" ".join), st.integers(13, 100))
def test_words_are_not_cut_when_a_space_is_in_the_usable_window(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    for part, start in zip(parts[:-1], starts(parts), strict=False):
        # A space at index i lets the part end at i + 1, which must lie in the usable window.
        if " " in text[start + limit // 3 : start + limit]:
            assert part.endswith(" ")


@pytest.mark.parametrize("limit", [0, -1])
def test_the_limit_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError):
        split_message("Hola", limit)


# -- split_message: examples ---------------------------------------------------------------


def test_a_10000_character_reply_splits_at_paragraph_boundaries() -> None:
    paragraphs = [
        " ".join(
            f"Frase {n} del párrafo {p}, sobre mi semana en Sevilla." for n in range(5 + p % 7)
        )
        for p in range(60)
    ]
    text = "\n\n".join(paragraphs)[:10_000]
    assert len(text) == 10_000

    parts = split_message(text, TELEGRAM_LIMIT)

    assert "".join(parts) == text
    assert len(parts) == 3
    longest = max(len(p) for p in paragraphs)
    for part, after in itertools.pairwise(parts):
        assert part.endswith(".\n\n")
        assert after.startswith("Frase 0 del párrafo")
        assert len(part) > TELEGRAM_LIMIT - longest - 2, "the last paragraph break that fits"
    assert all(len(part) <= TELEGRAM_LIMIT for part in parts)


def test_sentences_without_newlines_split_after_a_sentence_end() -> None:
    endings = [".", "!", "?", "…", "?»"]
    sentences = []
    for i in range(150):
        end = endings[i % len(endings)]
        opening = "«" if end.endswith("»") else ""
        sentences.append(
            f"{opening}Esta es la frase {i}, y cuenta algo de mi semana en Madrid{end}"
        )
    text = " ".join(sentences)
    assert "\n" not in text and len(text) > 2 * TELEGRAM_LIMIT

    parts = split_message(text, TELEGRAM_LIMIT)

    assert "".join(parts) == text
    assert len(parts) == 3
    for part, after in itertools.pairwise(parts):
        assert len(part) <= TELEGRAM_LIMIT
        assert part.endswith(tuple(f"{end} " for end in endings)), part[-30:]
        assert after.startswith(("Esta es la frase", "«Esta es la frase"))


def test_one_9000_character_word_is_cut_hard() -> None:
    word = "supercalifragilístico" * 500
    text = word[:9000]
    parts = split_message(text, TELEGRAM_LIMIT)
    assert [len(p) for p in parts] == [4096, 4096, 808]
    assert "".join(parts) == text


def test_japanese_sentences_without_spaces_split_after_a_full_stop() -> None:
    """Japanese and Chinese put no space after 。！？: those ends are still the best place."""
    sentences = [
        f"今日は友達と{i}回目の散歩に行きました。とても楽しかったです！" for i in range(300)
    ]
    text = "".join(sentences)
    assert len(text) > 2 * TELEGRAM_LIMIT

    parts = split_message(text, TELEGRAM_LIMIT)

    assert "".join(parts) == text
    for part in parts[:-1]:
        assert part.endswith(("。", "！")), part[-20:]


# -- format_html -----------------------------------------------------------------------------


def test_ordinary_lines_are_escaped() -> None:
    assert format_html("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d"
    assert format_html("<b>not bold</b> &amp;") == "&lt;b&gt;not bold&lt;/b&gt; &amp;amp;"
    assert format_html("\"quotes\" and 'apostrophes' stay") == "\"quotes\" and 'apostrophes' stay"


def test_a_correction_line_is_struck_through_bold_and_italic() -> None:
    assert format_html("✏️ a → b — why") == "✏️ <s>a</s> → <b>b</b> — <i>why</i>"
    assert format_html("✏️ yo es → yo soy") == "✏️ <s>yo es</s> → <b>yo soy</b>"


def test_the_parts_of_a_correction_are_escaped() -> None:
    assert format_html("✏️ x<y & z → x>y — a <b>tag</b> & more") == (
        "✏️ <s>x&lt;y &amp; z</s> → <b>x&gt;y</b> — <i>a &lt;b&gt;tag&lt;/b&gt; &amp; more</i>"
    )


def test_only_correction_lines_are_formatted() -> None:
    reply = "¡Muy bien! → sigue así — de verdad\n\n✏️ yo es → yo soy — ser\n✏️sin espacio → no"
    assert format_html(reply) == (
        "¡Muy bien! → sigue así — de verdad\n\n"
        "✏️ <s>yo es</s> → <b>yo soy</b> — <i>ser</i>\n"
        "✏️sin espacio → no"
    )


correction_part = st.lists(st.one_of(st.sampled_from(TOKENS), st.characters()), min_size=1).map(
    lambda pieces: "".join(pieces).replace("\n", " ").replace("\r", " ").strip() or "x"
)
correction_line = st.builds(
    lambda a, b, why: f"✏️ {a} → {b}" + (f" — {why}" if why else ""),
    correction_part,
    correction_part,
    st.none() | correction_part,
)
reply_text = st.lists(st.one_of(any_text, correction_line), max_size=8).map("\n".join)


def assert_well_formed(formatted: str) -> None:
    """Telegram HTML that Pam may send: only <s>, <b>, <i>, balanced on every line, and
    everything else escaped."""
    for line in formatted.split("\n"):
        stack: list[str] = []
        for match in TAG.finditer(line):
            closing, name = match.groups()
            assert name in ("s", "b", "i"), line
            if closing:
                assert stack and stack.pop() == name, line
            else:
                stack.append(name)
        assert stack == [], line
        outside = TAG.sub("", line)
        assert "<" not in outside and ">" not in outside, line
        assert re.fullmatch(r"(?:[^&]|&(?:amp|lt|gt);)*", outside), line


def visible(formatted: str) -> str:
    """What the learner reads once Telegram has parsed the HTML."""
    return html.unescape(TAG.sub("", formatted))


@properties
@given(reply_text)
def test_formatting_is_well_formed_and_changes_no_visible_character(text: str) -> None:
    formatted = format_html(text)
    assert_well_formed(formatted)
    assert visible(formatted) == text


@properties
@given(reply_text, st.data())
def test_formatting_parts_split_at_line_boundaries_equals_formatting_the_whole(
    text: str, data: st.DataObject
) -> None:
    boundaries = [m.end() for m in re.finditer("\n", text)]
    cuts = sorted(data.draw(st.sets(st.sampled_from(boundaries))) if boundaries else [])
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    formatted = [format_html(part) for part in parts]
    for part in formatted:
        assert_well_formed(part)
    assert "".join(formatted) == format_html(text)


@properties
@given(reply_text, st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_formatting_any_split_never_cuts_inside_a_tag(text: str, cuts: list[int]) -> None:
    points = sorted({min(c, len(text)) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    for part in parts:
        assert_well_formed(format_html(part))


@properties
@given(reply_text, st.integers(min_value=1, max_value=60))
def test_each_part_the_worker_sends_is_well_formed(text: str, limit: int) -> None:
    parts = [p for p in split_message(text, limit) if p.strip()]  # as bot.worker does
    for part in parts:
        formatted = format_html(part)
        assert_well_formed(formatted)
        assert visible(formatted) == part
