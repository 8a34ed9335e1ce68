"""Mistake patterns: rule names normalised into keys and terms, and which two are the same."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.review.patterns import (
    CHANGED,
    derived_rule,
    pattern_terms,
    rule_key,
    rule_terms,
    same_pattern,
    similarity,
)

BUENO = "bueno → buen before a masculine singular noun"


def _terms(*words: str) -> frozenset[str]:
    return frozenset(words)


# -- keys and terms -------------------------------------------------------------------------


def test_small_wording_changes_give_the_same_key() -> None:
    wordings = [
        BUENO,
        "Bueno -> buen before masculine singular nouns.",
        "use “buen” instead of “bueno” before a masc. singular noun",
        "BUENO becomes BUEN before a masculine, singular noun!",
    ]
    assert {rule_key(w) for w in wordings} == {"buen bueno masculin noun singular"}


def test_key_is_nfkc_and_casefolded() -> None:
    assert rule_key("Straße → Strasse") == rule_key("STRASSE → strasse")  # ß casefolds to ss
    assert rule_key("ﬁnal ﬁx") == rule_key("final fix")  # the ligature is NFKC's


def test_filler_words_named_as_the_change_are_kept() -> None:
    """An English learner's rule is about the very words filler drops elsewhere."""
    assert rule_terms("a → an before a vowel sound") == _terms("a", "an", "vowel", "sound")
    assert rule_key("use 'the' with rivers") == "river the"
    assert rule_key("in → on for days") != rule_key("at → on for days")
    assert rule_terms("use the subjunctive after ojalá") == _terms("subjunct", "ojalá")


def test_a_rule_of_nothing_but_filler_has_an_empty_key() -> None:
    assert rule_key("use the ... before a !") == ""
    assert rule_key("") == ""


def test_the_key_fits_its_column() -> None:
    assert len(rule_key(" ".join(f"word{n}" for n in range(100)))) <= 200


@given(st.permutations(["bueno", "buen", "masculine", "singular", "noun", "before", "the"]))
def test_word_order_does_not_change_the_key(words: list[str]) -> None:
    assert rule_key(" ".join(words)) == "buen bueno masculin noun singular"


# -- derived rules ----------------------------------------------------------------------------


def test_derived_rule_names_the_changed_words() -> None:
    assert derived_rule("Es un bueno libro.", "Es un buen libro.") == "bueno → buen"
    assert derived_rule("yo es de Madrid y yo es alto", "yo soy de Madrid y yo soy alto") == (
        "es es → soy soy"
    )


def test_derived_rule_leaves_the_punctuation_around_words_out() -> None:
    assert derived_rule("¿Tú es alto?", "¿Tú eres alto?") == "es → eres"
    assert derived_rule("Yo es.", "Yo soy.") == "es → soy"
    assert derived_rule("Hola amigo", "Hola, amigo") == "Hola amigo → Hola, amigo"


def test_derived_rule_of_a_word_added_or_dropped() -> None:
    assert derived_rule("Fui playa", "Fui a la playa") == "… → a la"
    assert derived_rule("Voy a la casa", "Voy a casa") == "la → …"


def test_derived_rule_of_only_case_or_punctuation_keeps_both_texts() -> None:
    assert derived_rule("hola", "¡Hola!") == "hola → ¡Hola!"


def test_derived_rule_is_short_however_long_the_texts() -> None:
    rule = derived_rule("x " + "a " * 500, "y " + "b " * 500)
    assert len(rule) <= 200
    assert rule.startswith("x a a a a a → y b b b b b")


def test_the_same_change_derives_the_same_rule_in_another_sentence() -> None:
    first = derived_rule("un bueno libro", "un buen libro")
    second = derived_rule("¡Qué bueno día!", "¡Qué buen día!")
    assert rule_key(first) == rule_key(second)


# -- the same pattern or not --------------------------------------------------------------------


def test_terms_the_correction_changed_are_marked() -> None:
    terms = pattern_terms(BUENO, "un bueno libro", "un buen libro")
    assert terms == _terms(f"{CHANGED}bueno", f"{CHANGED}buen", "masculin", "singular", "noun")
    # A rule that names no word of the change has no marks.
    assert pattern_terms("adjectives agree with feminine nouns", "casa blanco", "casa blanca") == (
        rule_terms("adjectives agree with feminine nouns")
    )


def test_two_wordings_of_one_rule_are_the_same_pattern() -> None:
    a = pattern_terms(BUENO, "un bueno libro", "un buen libro")
    b = pattern_terms(
        "shorten bueno to buen before masculine singular nouns", "bueno día", "buen día"
    )
    assert same_pattern(a, b)


def test_rules_sharing_their_frame_but_not_their_words_are_not() -> None:
    """The changed words decide, however much of the rest two rules share."""
    frame = "the adjective drops its final vowel before a masculine singular noun"
    bueno = pattern_terms(f"bueno → buen: {frame}", "un bueno día", "un buen día")
    malo = pattern_terms(f"malo → mal: {frame}", "un malo día", "un mal día")
    assert similarity(bueno, malo) >= 0.6  # on words alone they would merge
    assert not same_pattern(bueno, malo)
    grande = pattern_terms(
        "grande → gran before a singular noun", "una grande casa", "una gran casa"
    )
    assert not same_pattern(pattern_terms(BUENO, "un bueno libro", "un buen libro"), grande)


def test_a_bare_change_is_the_pattern_of_a_rule_naming_it() -> None:
    rule = derived_rule("un bueno libro", "un buen libro")
    bare = pattern_terms(rule, "un bueno libro", "un buen libro")
    named = pattern_terms(BUENO, "es bueno día", "es buen día")
    assert same_pattern(bare, named)
    assert same_pattern(named, bare)
    other = pattern_terms("malo → mal", "un malo día", "un mal día")
    assert not same_pattern(other, named)


def test_jaccard_edge() -> None:
    """SAME is 0.6: three shared of four and four (3/5) is the same, two of three is not."""
    assert same_pattern(_terms("a", "b", "c", "x"), _terms("a", "b", "c", "y"))
    assert not same_pattern(_terms("a", "b", "x"), _terms("a", "b", "y"))
    assert not same_pattern(_terms("a", "b", "c", "x", "y"), _terms("a", "b", "c", "z", "w"))


def test_containment_edge() -> None:
    """The smaller set inside the larger is the same pattern from three terms on."""
    three = _terms("verb", "tens", "past")
    assert same_pattern(three, three | _terms("a", "b", "c", "d"))
    two = _terms("verb", "tens")
    assert not same_pattern(two, two | _terms("past", "futur"))


def test_marks_must_agree_even_when_the_rest_is_equal() -> None:
    rest = _terms("masculin", "singular", "noun", "adject")
    assert not same_pattern(rest | {f"{CHANGED}bueno"}, rest | {f"{CHANGED}malo"})
    assert not same_pattern(rest | {f"{CHANGED}bueno"}, rest)
    assert same_pattern(rest | {f"{CHANGED}bueno"}, rest | {f"{CHANGED}bueno", "apocop"})


def test_empty_sets_are_no_pattern() -> None:
    assert not same_pattern(frozenset(), frozenset())
    assert similarity(frozenset(), frozenset()) == 0.0


_SOME_TERMS = st.frozensets(
    st.sampled_from(["a", "b", "c", "d", "e", "f", f"{CHANGED}x", f"{CHANGED}y"])
)


@given(_SOME_TERMS, _SOME_TERMS)
def test_same_pattern_is_symmetric_and_reflexive(a: frozenset[str], b: frozenset[str]) -> None:
    assert same_pattern(a, b) == same_pattern(b, a)
    assert same_pattern(a, a) == bool(a)
