"""/language and /level as learners type them, answered in their native language: names in
any language and with typos, made-up languages, levels in words and ranges."""

from __future__ import annotations

import re

import pytest

from bot.i18n import LOCALES, words_for
from bot.language_choice import choose
from bot.levels import read_level
from bot.turn.settings_commands import LANGUAGE_USAGE, LEVEL_USAGE
from bot.worker.runtime import Pam
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel
from tests.support import handle


def ask(pam: Pam, user: str, text: str) -> str:
    """The one answer Pam gives to `text`."""
    answers = handle(pam, user, text)
    assert len(answers) == 1, answers
    return answers[0]


@pytest.mark.parametrize(
    ("typed", "target"),
    [
        ("Castellano", "Spanish"),
        ("Português do Brasil", "Portuguese (Brazil)"),
        ("brasileiro", "Portuguese (Brazil)"),
        ("Deutsch", "German"),
        ("日本語", "Japanese"),
        ("Mandarin", "Chinese"),
        ("Esperanto", "Esperanto"),
    ],
)
def test_a_language_as_people_name_it_is_set(
    pam: Pam, fake_model: FakeChatModel, typed: str, target: str
) -> None:
    user = unique_user()
    answer = ask(pam, user, f"/language {typed}")
    assert answer.startswith("Great!")
    assert learner_of(pam, user).target_language == target
    assert fake_model.calls == []


@pytest.mark.parametrize("typed", ["Klingon", "Elvish", "Dothraki", "Quenya"])
def test_a_made_up_language_is_refused_with_languages_pam_teaches(pam: Pam, typed: str) -> None:
    user = unique_user()
    answer = ask(pam, user, f"/language {typed}")
    assert answer.startswith(f"I can't teach {typed} — it's a made-up language")
    assert "Spanish, French, German, Italian, Portuguese, and Japanese" in answer
    assert learner_of(pam, user).target_language is None


def test_a_language_pam_cannot_teach_well_is_refused(pam: Pam) -> None:
    user = unique_user()
    answer = ask(pam, user, "/language Aghem")
    assert answer.startswith("I don't know Aghem well enough to teach it, sorry.")
    assert learner_of(pam, user).target_language is None


def test_a_typo_gets_the_command_it_was_meant_to_be(pam: Pam) -> None:
    user = unique_user()
    assert ask(pam, user, "/language Spansh") == (
        "I don't know the language “Spansh”. Did you mean Spanish? Then write /language Spanish"
    )
    answer = ask(pam, user, "/language Spanish Germn")
    assert answer.endswith("Did you mean German? Then write /language Spanish German")
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == (None, None)


def test_the_native_language_may_be_any_real_one_but_no_made_up_one(pam: Pam) -> None:
    user = unique_user()
    answer = ask(pam, user, "/language Spanish Klingon")
    assert answer.startswith("I can't explain things in Klingon.")
    assert learner_of(pam, user).native_language is None

    ask(pam, user, "/language Spanish Aghem")
    assert learner_of(pam, user).native_language == "Aghem"


def test_the_answer_is_in_the_native_language_just_set(pam: Pam) -> None:
    user = unique_user()
    assert ask(pam, user, "/language Spanish German").startswith("Super! ")
    assert ask(pam, user, "/level Anfänger").startswith("Alles klar: „Anfänger“ ist Niveau A1.")
    assert ask(pam, user, "/language Klingonisch").startswith(
        "Klingonisch kann ich dir nicht beibringen — das ist eine erfundene Sprache"
    )
    assert "Spansh" in ask(pam, user, "/language Spansh")
    assert ask(pam, user, "/language Spansh").startswith("Die Sprache „Spansh“ kenne ich nicht.")


@pytest.mark.parametrize(
    ("command", "native", "said"),
    [
        ("/language 英語 日本語", "Japanese", "いいね！"),
        ("/language الإنجليزية العربية", "Arabic", "رائع!"),
        ("/language inglés castellano", "Spanish", "¡Genial!"),
    ],
)
def test_names_in_the_learners_own_script(pam: Pam, command: str, native: str, said: str) -> None:
    user = unique_user()
    assert ask(pam, user, command).startswith(said)
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == ("English", native)


@pytest.mark.parametrize(
    ("typed", "level", "said"),
    [
        ("intermediate", "B1", "Got it: “intermediate” is level B1. We're practising Spanish"),
        ("upper intermediate", "B2", "Got it: “upper intermediate” is level B2."),
        ("avanzado", "C1", "Got it: “avanzado” is level C1."),
        (
            "B1-B2 intermediate",
            "B1",
            "Got it: I'll take B1, the lower end of B1–B2 (say /level B2 if that's too easy).",
        ),
    ],
)
def test_levels_in_words_and_ranges_are_set_and_said(
    pam: Pam, fake_model: FakeChatModel, typed: str, level: str, said: str
) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    assert ask(pam, user, f"/level {typed}").startswith(said)
    assert learner_of(pam, user).level == level
    assert fake_model.calls == []


def test_a_level_word_before_a_language_asks_for_one(pam: Pam) -> None:
    user = unique_user()
    assert ask(pam, user, "/level beginner") == (
        "Got it: “beginner” is level A1. Now tell me which language you want to practise, "
        "e.g. /language Spanish English."
    )


@pytest.mark.parametrize("locale", LOCALES)
def test_the_usage_examples_work_in_every_language(locale: str) -> None:
    say = words_for(locale, "settings")
    usage = say(LANGUAGE_USAGE)
    examples = re.findall(r"/language ([^\s—,.。]+)(?: ([^\s—,.。]+))?", usage)
    assert examples
    for names in examples:
        for name in filter(None, names):
            assert choose(name).verdict == "taught", (locale, name)
    levels = say(LEVEL_USAGE, levels="A1, A2, B1, B2, C1, C2")
    example = re.search(r"/level (?!A2)([^\s.。।]+)", levels)
    assert example is not None and read_level(example.group(1)) is not None, (locale, levels)
    # "A1–A2 beginner, B1–B2 intermediate, C1–C2 advanced", each word its range's lower end.
    for lower, word in re.findall(r"([ABC]1)–[ABC]2 ([^,،、，.。।]+)", levels):
        found = read_level(word.strip())
        assert found is not None and found.level == lower, (locale, word)


def test_names_of_several_words_are_read_whole(pam: Pam) -> None:
    user = unique_user()
    assert ask(pam, user, "/language Português do Brasil Deutsch").startswith("Super!")
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == ("Portuguese (Brazil)", "German")
    assert "erfundene Sprache" in ask(pam, user, "/language Toki Pona")
