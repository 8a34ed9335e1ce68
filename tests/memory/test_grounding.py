"""memory/grounding.py: loose comparison of what a model said with what the learner wrote —
property tests for the pure rules (a quote found whatever its case, accents and spacing, and
within a small edit distance; an echo told from a reply; a summary kept to whole sentences)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.grounding import (
    STEM_CHARS,
    Said,
    allowed_edits,
    distance,
    dropped,
    echoes,
    fold,
    overlap,
    quoted_in,
    sentence_end,
    supported,
    written_in,
)

# Words of a learner's message, and words that never occur in one (a disjoint alphabet).
SPANISH = st.sampled_from(
    [
        "hoy",
        "ayer",
        "fui",
        "al",
        "mercado",
        "con",
        "mi",
        "hermana",
        "compramos",
        "fruta",
        "perro",
        "parque",
        "trabajo",
        "enfermera",
        "hospital",
        "cocinar",
        "música",
        "libro",
        "tiempo",
    ]
)
FOREIGN = st.sampled_from(["xqz", "wkk", "zzyx", "qqv", "vvxw", "kxq"])
MESSAGE = st.lists(SPANISH, min_size=3, max_size=14).map(" ".join)


def _vary(text: str, data: st.DataObject) -> str:
    """`text` as a model may quote it: other case, accents dropped or added, spacing and
    punctuation changed."""
    words = text.split()
    out = []
    for word in words:
        if data.draw(st.booleans()):
            word = word.upper()
        if data.draw(st.booleans()):
            word = word.replace("u", "ú").replace("a", "á")
        out.append(word + data.draw(st.sampled_from(["", ",", "!", "?"])))
    return data.draw(st.sampled_from([" ", "  ", " \n"])).join(out)


@given(MESSAGE, st.data())
def test_any_run_of_the_message_is_found_whatever_its_case_accents_and_spacing(
    message: str, data: st.DataObject
) -> None:
    words = message.split()
    start = data.draw(st.integers(0, len(words) - 1))
    end = data.draw(st.integers(start + 1, len(words)))
    quote = " ".join(words[start:end])

    assert quoted_in(_vary(quote, data), message) == 0
    assert quoted_in(quote, _vary(message, data)) == 0


@given(MESSAGE, st.data())
def test_a_quote_one_letter_off_is_found_when_long_enough(
    message: str, data: st.DataObject
) -> None:
    words = message.split()
    start = data.draw(st.integers(0, len(words) - 2))
    quote = " ".join(words[start : start + 2])
    position = data.draw(st.integers(0, len(quote) - 1))
    typo = quote[:position] + "x" + quote[position + 1 :]
    if allowed_edits(len(fold(quote))) == 0:
        return
    assert quoted_in(typo, message) is not None


@given(MESSAGE, st.lists(FOREIGN, min_size=1, max_size=3).map(" ".join))
def test_words_the_learner_never_wrote_are_not_found(message: str, invented: str) -> None:
    assert quoted_in(invented, message) is None


def test_short_words_must_be_exact() -> None:
    # One edit makes "buen" of "bueno": a four-letter quote is found only as it is.
    assert quoted_in("buen", "Es un bueno día") is None
    assert quoted_in("bueno", "Es un buen día") == 1  # found, but one letter off
    assert quoted_in("ruidosa", "La calle es tranquila") is None


@given(st.text(max_size=12), st.text(max_size=12), st.integers(0, 3))
def test_distance_is_levenshtein_up_to_its_limit(a: str, b: str, limit: int) -> None:
    exact = _levenshtein(a, b)
    assert distance(a, b, limit) == (exact if exact <= limit else limit + 1)


WORDS = st.text(alphabet="abcdeo", min_size=1, max_size=7)  # folded already


@given(WORDS, st.lists(WORDS, max_size=12))
def test_a_word_matches_what_was_said_as_the_plain_rules_say(word: str, said: list[str]) -> None:
    """Said.matches, which works the start letters out once and scans in C, against the rules
    written out plainly: the same word, the same first four letters, or one edit away."""
    plain = word in said or (
        len(word) >= STEM_CHARS
        and any(
            len(other) >= STEM_CHARS
            and (
                other[:STEM_CHARS] == word[:STEM_CHARS]
                or (len(word) > STEM_CHARS and _levenshtein(word, other) <= 1)
            )
            for other in said
        )
    )
    assert Said([" ".join(said)]).matches(word) == plain


def _levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


@given(MESSAGE, st.data())
def test_a_message_said_back_is_an_echo(message: str, data: st.DataObject) -> None:
    assert echoes(_vary(message, data), message)


@given(MESSAGE, st.lists(FOREIGN, min_size=3, max_size=6))
def test_a_reply_that_adds_its_own_words_is_no_echo(message: str, added: list[str]) -> None:
    reply = " ".join([message.split()[0], *added, "?"])
    assert not echoes(reply, message)


def test_echoes_as_a_weak_model_writes_them() -> None:
    said = "Ayer fui al mercado con mi hermana y compramos fruta."
    assert echoes("Ayer fui al mercado con mi hermana y compramos fruta.", said)
    assert echoes("ayer fui al mercado con mi hermana, y compramos fruta!", said)
    assert echoes("Yo estoy cansado hoy", "Yo es cansado hoy")  # only the mistake mended
    assert not echoes("¡Qué bien! ¿Qué fruta comprasteis en el mercado?", said)
    assert not echoes("¡Hola! 👋", "Hola")  # a greeting said back is a friend's reply


def test_facts_need_a_word_of_the_learner_behind_them() -> None:
    said = ["Me llamo Lena y vivo en Berlín.", "Mi hermana vive en Londres y leo novelas."]
    assert supported("Lena", said)
    assert supported("lives in Berlin", said)
    assert supported("sister lives in London", said)  # "Londres": same first letters
    assert supported("reads novels", said)
    assert not supported("trip to Paris", said)
    assert not supported("two kids", said)
    folded_once = Said(said)  # as a profile job checks its many facts
    for fact in ("Lena", "sister lives in London", "reads novels", "trip to Paris", "two kids"):
        assert supported(fact, folded_once) == supported(fact, said)


@given(st.lists(st.sampled_from(["Lena works.", "She cooks!", "Fine?"]), min_size=1), st.data())
def test_a_cut_summary_ends_at_its_last_whole_sentence(
    sentences: list[str], data: st.DataObject
) -> None:
    whole = " ".join(sentences)
    cut = whole + " " + data.draw(st.sampled_from(["She plays ch", "Next wee", "And"]))
    assert sentence_end(cut) == whole
    assert sentence_end(whole) == whole


def test_a_summary_without_a_sentence_end_is_cut_at_a_whole_word() -> None:
    assert (
        sentence_end("Lena nurse Berlin plays chess on Sund") == "Lena nurse Berlin plays chess on…"
    )
    assert sentence_end("- Lena is a nurse\n- plays chess\n- visits her sis") == (
        "- Lena is a nurse\n- plays chess"
    )
    assert sentence_end("Lenaisanurse") == ""


def test_overlap_counts_near_words() -> None:
    assert overlap("bueno", ["Fill the gap: «Es un ___ día»", "buen"]) == 1.0
    assert overlap("Hoy quiero hablar de mi viaje a Roma", ["Es un buen día"]) < 0.5


def test_a_drop_is_logged_with_a_reason_word_never_the_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="memory.grounding"):
        dropped("correction", "not_in_message", 7)
    assert caplog.messages == ["dropped correction reason=not_in_message learner=7"]


def test_an_accent_is_part_of_what_was_written() -> None:
    assert written_in("está", "Yo está muy cansada") and not written_in("está", "yo esta aqui")
    assert written_in("Yo ESTÁ", "yo está, muy cansada")
