"""/corrections few|normal|all, the correction density: what a reply shows and stores at each,
the reply prompt's rule (byte for byte today's at normal), what the profile learns the learner
prefers, and which wins. Through the tutor with the fake model and a real database."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from bot.corrections import TutorAnswer, render, shown_in
from bot.i18n import words_for
from bot.turn import density
from bot.turn.density import most_important, read_density, shown
from bot.turn.prompt import HOW_MANY, HOW_MANY_ALL
from bot.turn.values import Turn, TurnRequest
from bot.worker.runtime import Pam
from memory.database.records import ALL, FEW, NORMAL, CorrectionRecord, LearnerInfo
from memory.jobs.profile import parse_profile_answer
from memory.jobs.profile_facts import density as density_of
from memory.jobs.profile_facts import grounded, settled
from memory.tokens import TokenCounter
from tests.bot.golden.reply_contexts import GOLDEN, build, cases
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from webhooks.settings import Settings
from webhooks.wiring import build as build_pam

GERMAN = words_for("German", density.DOMAIN)
MESSAGE = "Ayer yo es en la plalla y comí un helado muy rico con mis amigo"
# Three mistakes, as a model lists them: a spelling slip first, then two that matter more.
SLIP = {
    "original": "plalla",
    "corrected": "playa",
    "explanation": "con y",
    "category": "spelling",
    "rule": "playa spelling",
}
TENSE = {
    "original": "yo es",
    "corrected": "estuve",
    "explanation": "pasado de estar",
    "category": "conjugation",
    "rule": "estar in the preterite",
}
AGREEMENT = {
    "original": "mis amigo",
    "corrected": "mis amigos",
    "explanation": "plural",
    "category": "grammar",
    "rule": "possessive agreement in number",
}
THREE = [SLIP, TENSE, AGREEMENT]
REPLIES = (
    "¡Qué rico! ¿Con quién fuiste?",
    "Me encanta el helado de fresa. ¿Y tú cuál prefieres?",
    "La playa en verano es lo mejor. ¿Nadaste mucho?",
    "¡Suena a un día perfecto! ¿Vas a volver pronto?",
    "Yo fui a la montaña el domingo. ¿Te gusta caminar?",
)


def record(item: dict[str, str]) -> CorrectionRecord:
    return CorrectionRecord(
        item["original"], item["corrected"], item["explanation"], item["category"], item["rule"]
    )


def learner(pam: Pam, **settings: Any) -> LearnerInfo:
    """A new learner practising Spanish, native in German."""
    found = pam.store.learners.learner(unique_user())
    return pam.store.learners.update_settings(
        found.id, target_language="Spanish", native_language="German", **settings
    )


def say(pam: Pam, who: LearnerInfo, text: str) -> Turn:
    """The whole turn for `text`, as the terminal takes it."""
    return pam.local_turns().take(TurnRequest(who.external_id, text))


def corrected(pam: Pam, fake: FakeChatModel, who: LearnerInfo, items: list[Any] = THREE) -> Turn:
    """A message with mistakes, and Pam's reply to it with `items` as its corrections (a reply
    of its own each time: one that repeats Pam's previous reply is no reply)."""
    reply = REPLIES[len(fake.of("reply")) % len(REPLIES)]
    fake.queue("reply", reply_json(reply, items))
    return say(pam, who, MESSAGE)


def learned(pam: Pam, who: LearnerInfo, data: dict[str, Any]) -> None:
    """The profile holds `data`, as a profile update writes it."""
    state = pam.store.memory.profile(who.id)
    assert pam.store.memory.save_profile(who.id, state.version, data, state.watermark, 0)


def lines_of(turn: Turn) -> list[str]:
    return [line for line in turn.replies[0].split("\n") if line.startswith("✏️ ")]


# -- reading the command and choosing what to show -----------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["few"], FEW),
        (["Fewer"], FEW),
        (["LESS"], FEW),
        (["normal"], NORMAL),
        (["default"], NORMAL),
        (["all"], ALL),
        (["every"], ALL),
        ([], None),
        (["few", "please"], None),
        (["lots"], None),
        (["wenig"], None),
        (["3"], None),
    ],
)
def test_the_command_reads_the_density_word(args: list[str], expected: str | None) -> None:
    assert read_density(args) == expected


def test_few_shows_the_most_important_correction_and_the_others_show_every_one() -> None:
    found = [record(item) for item in THREE]
    assert shown(found, FEW) == [record(TENSE)]  # the model's first is a punctuation slip
    assert shown(found, NORMAL) == shown(found, ALL) == found
    assert shown([], FEW) == []
    slips = [record(SLIP), replace(record(SLIP), original="rico", category="punctuation")]
    assert most_important(slips) == slips[0]  # only slips: the model's first


def test_the_corrections_a_reply_showed_are_read_back_from_it() -> None:
    """/explain explains those the learner saw: at few, one of those stored."""
    found = [record(item) for item in THREE]
    one = render(TutorAnswer("¡Qué rico!", [record(TENSE)]))
    assert shown_in(one, found) == [record(TENSE)]
    assert shown_in(render(TutorAnswer("¡Qué rico!", found)), found) == found
    assert shown_in("a reply kept before lines were written so", found) == found


# -- at few: one shown, every one stored and drilled ---------------------------------------------


def test_at_few_the_reply_shows_one_correction_and_stores_them_all(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam, corrections=FEW)
    turn = corrected(pam, fake_model, lena)

    assert lines_of(turn) == ["✏️ yo es → estuve — pasado de estar"]
    assert turn.reply is not None and len(turn.reply.corrections) == 3
    stored = pam.store.ledger.corrections(lena.id)
    assert {c.original for c in stored} == {"plalla", "yo es", "mis amigo"}
    # Review drills every one of them, the unshown two too.
    rules = {p.rule for p in pam.store.reviews.patterns(lena.id, limit=10)}
    assert rules == {item["rule"] for item in THREE}
    # Explain is offered (something was corrected); Fewer corrections is not, at few.
    assert [b.command.split()[0] for b in turn.buttons] == ["/translate", "/explain"]


def test_at_normal_and_all_the_reply_shows_every_correction(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    for setting in (NORMAL, ALL):
        turn = corrected(pam, fake_model, learner(pam, corrections=setting))
        assert len(lines_of(turn)) == 3, setting
        assert "/corrections few" in [b.command for b in turn.buttons], setting


def test_explain_at_few_explains_only_the_correction_the_reply_showed(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam, corrections=FEW)
    corrected(pam, fake_model, lena)
    fake_model.queue("explain", "Mit „yo“ braucht es hier „estuve“.")
    say(pam, lena, "/explain")
    (call,) = fake_model.of("explain")
    explained = call.text.split("<corrections>")[1]
    assert "yo es → estuve" in explained
    assert "mis amigo" not in explained and "plalla" not in explained


# -- the reply prompt ----------------------------------------------------------------------------


def golden() -> dict[str, Any]:
    return dict(json.loads(GOLDEN.read_text(encoding="utf-8")))


@pytest.mark.parametrize("case", sorted(cases()))
def test_at_normal_and_few_the_reply_prompt_is_byte_for_byte_todays(case: str) -> None:
    """The reply prompts stored from the code before densities (tests/bot/golden): a learner
    who never chose, one who chose normal or few, and one whose profile learned normal or few
    (the learned density is no profile data in the prompt) get exactly those bytes."""
    found = cases()[case]
    stored = golden()[case]
    person: LearnerInfo = found["learner"]
    for setting in (NORMAL, FEW):
        assert build(found, replace(person, corrections=setting)) == stored, setting
        profile = {**found["profile"], "corrections": setting}
        assert build({**found, "profile": profile}) == stored, setting


def test_at_all_the_rule_asks_for_minor_slips_and_nothing_else_changes(
    counter: TokenCounter,
) -> None:
    found = cases()["profile_and_summary"]
    normal = golden()["profile_and_summary"]
    every = build(found, replace(found["learner"], corrections=ALL))
    assert every[1:] == normal[1:]
    system, before = every[0]["content"], normal[0]["content"]
    assert f"- Only their latest message: {HOW_MANY_ALL}. None: an empty list." in system
    assert system.replace(HOW_MANY_ALL, HOW_MANY) == before
    assert "five" in HOW_MANY_ALL  # bot.corrections.MAX_CORRECTIONS
    learned_all = build({**found, "profile": {**found["profile"], "corrections": ALL}})
    assert learned_all == every
    # What `all` costs a reply prompt, in tokens (docs/how/corrections.md says it).
    assert abs(counter.count(system) - counter.count(before)) <= 10


def test_the_model_is_asked_by_the_learners_density(pam: Pam, fake_model: FakeChatModel) -> None:
    for setting, rule in ((FEW, HOW_MANY), (NORMAL, HOW_MANY), (ALL, HOW_MANY_ALL)):
        corrected(pam, fake_model, learner(pam, corrections=setting))
        assert rule in fake_model.of("reply")[-1].messages[0]["content"], setting


# -- the command, in the learner's language ------------------------------------------------------


def test_corrections_few_is_set_and_answered_in_the_native_language(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    assert say(pam, lena, "/corrections few").replies == [GERMAN(density.CHOSEN[FEW])]
    assert GERMAN(density.CHOSEN[FEW]).startswith("Alles klar!")
    assert pam.store.learners.get_learner(lena.id).corrections == FEW
    assert say(pam, lena, "/Corrections ALL").replies == [GERMAN(density.CHOSEN[ALL])]
    assert pam.store.learners.get_learner(lena.id).corrections == ALL
    assert fake_model.calls == []


@pytest.mark.parametrize("text", ["/corrections", "/corrections lots", "/corrections few now"])
def test_bad_arguments_get_the_usage_and_the_setting_in_the_native_language(
    pam: Pam, fake_model: FakeChatModel, text: str
) -> None:
    lena = learner(pam, corrections=ALL)
    (answer,) = say(pam, lena, text).replies
    assert answer == f"{GERMAN(density.USAGE)}\n{GERMAN(density.LINES[ALL])}"
    assert "/corrections few" in answer
    assert pam.store.learners.get_learner(lena.id).corrections == ALL
    assert fake_model.calls == []


def test_start_profile_and_help_say_the_density(pam: Pam) -> None:
    lena = learner(pam, corrections=FEW)
    line = GERMAN(density.LINES[FEW])
    assert line in say(pam, lena, "/start").replies[0]
    assert line in say(pam, lena, "/profile").replies[0]
    assert "/corrections few|normal|all" in say(pam, lena, "/help").replies[0]
    stranger = pam.store.learners.learner(unique_user())  # no language yet: English, normal
    assert density.LINES[NORMAL] in say(pam, stranger, "/start").replies[0]


# -- what the profile learns, and what wins ------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("few", FEW),
        ("Few", FEW),
        ("fewer corrections", FEW),
        ("only the important ones", FEW),
        ("all", ALL),
        (["all"], ALL),
        ("every mistake", ALL),
        ("normal", NORMAL),
        ("the usual", NORMAL),
    ],
)
def test_the_profile_reads_the_density_as_models_write_it(written: object, read: str) -> None:
    answer = json.dumps({"corrections": written, "who": "Lena"})
    assert parse_profile_answer(answer) == {"corrections": read, "who": "Lena"}


@pytest.mark.parametrize("written", ["few|normal|all", "few, normal or all", 3, True, "loads"])
def test_a_density_that_names_none_or_the_formats_list_is_dropped(written: object) -> None:
    answer = json.dumps({"corrections": written, "who": "Lena"})
    assert parse_profile_answer(answer) == {"who": "Lena"}


def test_a_learned_density_needs_the_learner_to_have_talked_about_corrections() -> None:
    said = ["No me corrijas cada cosita, solo lo importante"]
    chat = ["Ayer fui a la playa con mis amigos"]
    new = {"corrections": FEW}
    assert grounded(new, {}, said, None) == new
    assert grounded(new, {}, ["Bitte korrigier nicht jeden kleinen Fehler"], None) == new
    assert grounded(new, {}, ["細かいミスは直さなくていいよ"], None) == new
    assert grounded(new, {}, chat, None) == {}  # a guess, not a preference
    assert grounded(new, new, chat, None) == new  # kept as it was


def test_the_density_chosen_wins_over_the_one_learned() -> None:
    person = LearnerInfo(1, "test:x", None, "Spanish", "German", None)
    assert density_of(person, {}) == NORMAL
    assert density_of(person, {"corrections": FEW}) == FEW
    assert density_of(person, {"corrections": "lots"}) == NORMAL
    chose_all = replace(person, corrections=ALL)
    assert density_of(chose_all, {"corrections": FEW}) == ALL
    assert settled({"corrections": FEW, "who": "Lena"}, chose_all) == {"who": "Lena"}
    assert grounded({"corrections": FEW}, {}, ["corrígeme menos"], chose_all) == {}


def test_the_profile_learns_fewer_corrections_from_the_chat_and_the_reply_follows(
    database_url: str, engine: Any, fake_model: FakeChatModel
) -> None:
    settings = Settings(database_url=database_url, llm={"api_key": "test-key"})
    pam = build_pam(
        settings.replace(memory={"profile_every": 1}),
        model=fake_model,
        submit=lambda work: work(),
        engine=engine,
    )
    lena = learner(pam)
    fake_model.queue("profile", json.dumps({"corrections": "few"}))
    say(pam, lena, "Por favor, no me corrijas cada cosita, solo lo importante")
    assert pam.store.memory.profile(lena.id).data == {"corrections": FEW}

    turn = corrected(pam, fake_model, lena)
    assert len(lines_of(turn)) == 1
    assert GERMAN(density.LEARNED_LINES[FEW]) in say(pam, lena, "/profile").replies[0]
    assert (
        "corrections"
        not in fake_model.of("reply")[-1].messages[0]["content"].split("<learner_profile>")[1]
    )


def test_the_command_wins_and_normal_holds_over_what_was_learned(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    learned(pam, lena, {"corrections": FEW, "who": "Lena (enfermera)"})
    assert len(lines_of(corrected(pam, fake_model, lena))) == 1

    # /corrections normal is NORMAL, the column's default too: what was learned is forgotten.
    say(pam, lena, "/corrections normal")
    assert pam.store.memory.profile(lena.id).data == {"who": "Lena (enfermera)"}
    assert len(lines_of(corrected(pam, fake_model, lena))) == 3
    assert GERMAN(density.LINES[NORMAL]) in say(pam, lena, "/profile").replies[0]

    # Chosen few or all wins over what Pam learns later (the Fewer corrections tap too).
    say(pam, lena, "/corrections few")
    learned(pam, lena, {"corrections": ALL, "who": "Lena (enfermera)"})
    assert len(lines_of(corrected(pam, fake_model, lena))) == 1
    assert HOW_MANY_ALL not in fake_model.of("reply")[-1].messages[0]["content"]
    profile = say(pam, lena, "/profile").replies[0]
    assert GERMAN(density.LINES[FEW]) in profile
    assert GERMAN(density.LEARNED_LINES[ALL]) not in profile
