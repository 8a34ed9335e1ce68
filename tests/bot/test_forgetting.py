"""/forget asks first (bot/turn/forgetting.py): the question says what would go, in the
learner's language; only a yes erases — the confirm button's command with the question's code,
a reply word, or on the API /forget again — and a duplicated, stale, expired or racing yes
erases nothing more and says so kindly. Any other message drops the question and is answered
as usual."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from bot import phrases
from bot.i18n import words_for
from bot.turn import forgetting
from bot.turn.values import Turn, TurnRequest
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.database.records import LEARNER
from memory.store.message_store import Store
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel, reply_json
from webhooks.settings import Settings
from webhooks.wiring import build

EXPIRY = timedelta(seconds=300)  # PAM_FORGET_CONFIRM_SECONDS' default


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 12, 4, 10, 0, tzinfo=UTC))


@pytest.fixture
def pam(settings: Settings, engine: Engine, fake_model: FakeChatModel, clock: ManualClock) -> Pam:
    """Pam with the fake model, memory jobs inline, on a clock the test moves."""
    return build(settings, model=fake_model, submit=lambda work: work(), engine=engine, clock=clock)


def say(pam: Pam, user: str, text: str, **request: object) -> Turn:
    """The whole turn Pam takes on `text` from `user`, as `pam chat` takes it."""
    return pam.local_turns().take(TurnRequest(user, text, **request))  # type: ignore[arg-type]


def yes_button(turn: Turn) -> str:
    """The command of the question's confirm button."""
    [yes, no] = turn.buttons
    assert no.command == "/forget no"
    assert yes.command.startswith("/forget yes ")
    return yes.command


def a_learner_with_a_past(pam: Pam, fake_model: FakeChatModel) -> str:
    """A learner practising Spanish, three messages each with a correction."""
    user = unique_user("forgetful")
    say(pam, user, "/language Spanish English")
    for text in ("Hola, yo es Lena", "Yo es enfermera", "Y yo es de Berlín"):
        fake_model.queue(
            "reply",
            reply_json(
                "¡Qué bien!",
                [{"original": "yo es", "corrected": "yo soy", "category": "conjugation"}],
            ),
        )
        say(pam, user, text)
    return user


def rows(pam: Pam, user: str) -> dict[str, int]:
    learner = learner_of(pam, user)
    return pam.store.inspection.rows_about(learner.id, user)


def test_forget_asks_first_says_what_would_go_and_erases_nothing(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    before = rows(pam, user)
    calls = len(fake_model.calls)

    asked = say(pam, user, "/forget")

    [question] = asked.replies
    assert question.splitlines() == [
        forgetting.ASK,
        "• 6 messages of our chat",
        "• 3 corrections",
        "• 1 mistake I keep for review",
        "• your settings and usage records",
        "",
        "To erase it all, reply “yes” within 5 minutes. Anything else keeps everything.",
    ]
    assert [b.label for b in asked.buttons] == ["Yes, erase it all", "No, keep it"]
    assert not asked.forgot
    assert rows(pam, user) == before
    assert len(fake_model.calls) == calls  # no model call to ask


def test_the_confirm_button_erases_everything_once(pam: Pam, fake_model: FakeChatModel) -> None:
    user, other = a_learner_with_a_past(pam, fake_model), a_learner_with_a_past(pam, fake_model)
    learner = learner_of(pam, user)
    other_before = rows(pam, other)
    confirm = yes_button(say(pam, user, "/forget"))

    done = say(pam, user, confirm)

    assert done.replies == [phrases.FORGOTTEN] and done.forgot
    assert set(pam.store.inspection.rows_about(learner.id, user).values()) == {0}
    assert rows(pam, other) == other_before
    # The same tap again (a retried tap, a duplicated webhook): nothing more, and no learner
    # made up to answer it.
    again = say(pam, user, confirm)
    assert again.replies == [forgetting.STALE] and not again.forgot
    assert pam.store.learners.find_learner(user) is None


def test_a_stale_or_forged_button_erases_nothing_and_the_newest_one_works(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    first = yes_button(say(pam, user, "/forget"))
    second = yes_button(say(pam, user, "/forget"))  # asked again: a new code
    assert first != second
    before = rows(pam, user)

    for stale in (first, "/forget yes nope", "/forget yes " + "x" * 3000, "/forget yes ' OR 1=1"):
        assert say(pam, user, stale).replies == [forgetting.STALE]
    assert rows(pam, user) == before

    assert say(pam, user, second).replies == [phrases.FORGOTTEN]
    assert pam.store.learners.find_learner(user) is None


def test_an_unanswered_question_expires(
    pam: Pam, fake_model: FakeChatModel, clock: ManualClock
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    confirm = yes_button(say(pam, user, "/forget"))
    before = rows(pam, user)
    clock.advance(EXPIRY + timedelta(seconds=1))

    assert say(pam, user, confirm).replies == [forgetting.EXPIRED]
    assert rows(pam, user) == before
    # The expired question is gone: a yes now is no answer to it, just chat.
    assert say(pam, user, "yes").replies != [forgetting.EXPIRED]
    assert fake_model.of("reply")[-1].messages[-1]["content"] == "yes"
    assert rows(pam, user)["messages"] == before["messages"] + 2


def test_a_yes_just_before_the_expiry_still_erases(
    pam: Pam, fake_model: FakeChatModel, clock: ManualClock
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget")
    clock.advance(EXPIRY - timedelta(seconds=1))
    assert say(pam, user, "Yes!").replies == [phrases.FORGOTTEN]


def test_a_typed_yes_expired_says_so(
    pam: Pam, fake_model: FakeChatModel, clock: ManualClock
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget")
    clock.advance(EXPIRY)
    assert say(pam, user, "yes").replies == [forgetting.EXPIRED]
    assert learner_of(pam, user).forget_asked_at is None  # dropped


@pytest.mark.parametrize(
    ("native", "word", "asks_for"),
    [
        ("German", "Ja", "„ja“"),
        ("Japanese", "はい。", "「はい」"),
        ("Arabic", "نعم", "«نعم»"),
        ("Spanish", "SÍ", "«sí»"),
        ("German", "yes", "„ja“"),  # English's yes is always one
    ],
)
def test_a_reply_word_in_the_learners_language_confirms(
    pam: Pam, native: str, word: str, asks_for: str
) -> None:
    user = unique_user()
    say(pam, user, f"/language French {native}")
    asked = say(pam, user, "/forget")
    assert asks_for in asked.replies[0]
    assert asked.buttons[0].label != "Yes, erase it all"  # in their language
    done = say(pam, user, word)
    assert done.replies == [phrases.said(phrases.FORGOTTEN, native)] and done.forgot
    assert pam.store.learners.find_learner(user) is None


def test_a_yes_in_the_language_practised_confirms_too(pam: Pam) -> None:
    user = unique_user()
    say(pam, user, "/language Spanish German")
    say(pam, user, "/forget")
    assert say(pam, user, "¡Sí!").forgot


def test_another_message_drops_the_question_and_is_answered(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    confirm = yes_button(say(pam, user, "/forget"))
    before = rows(pam, user)

    answered = say(pam, user, "Hoy hace sol")

    note, reply = answered.replies
    assert note == forgetting.DROPPED
    assert reply.startswith("¡Qué bien!")  # answered as usual
    assert rows(pam, user)["messages"] == before["messages"] + 2
    # The question is gone: its button, and a yes, erase nothing now.
    assert say(pam, user, confirm).replies == [forgetting.STALE]
    assert say(pam, user, "yes").replies[0] != phrases.FORGOTTEN
    assert pam.store.learners.find_learner(user) is not None


def test_another_command_drops_the_question_too(pam: Pam, fake_model: FakeChatModel) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget")
    note, help_text = say(pam, user, "/help").replies
    assert note == forgetting.DROPPED and help_text == phrases.help_text(None)
    assert say(pam, user, "/help").replies == [phrases.help_text(None)]  # said once


def test_no_keeps_everything(pam: Pam, fake_model: FakeChatModel) -> None:
    user = a_learner_with_a_past(pam, fake_model)
    asked = say(pam, user, "/forget")
    before = rows(pam, user)
    assert say(pam, user, asked.buttons[1].command).replies == [forgetting.KEPT]
    assert say(pam, user, yes_button(asked)).replies == [forgetting.STALE]
    assert rows(pam, user) == before


def test_on_a_channel_that_confirms_by_repeating_forget_twice_erases(
    pam: Pam, fake_model: FakeChatModel, clock: ManualClock
) -> None:
    """The HTTP API: a program confirms by sending /forget again within the expiry."""
    user = a_learner_with_a_past(pam, fake_model)
    asked = say(pam, user, "/forget", repeat_confirms=True)
    assert asked.replies[0].endswith(
        "To erase it all, send /forget again within 5 minutes. Anything else keeps everything."
    )
    assert say(pam, user, "/forget", repeat_confirms=True).replies == [phrases.FORGOTTEN]
    assert pam.store.learners.find_learner(user) is None

    # Too late, the second /forget asks again instead.
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget", repeat_confirms=True)
    clock.advance(EXPIRY)
    again = say(pam, user, "/forget", repeat_confirms=True)
    assert again.replies[0].startswith(forgetting.ASK) and not again.forgot


def test_elsewhere_forget_twice_asks_again(pam: Pam, fake_model: FakeChatModel) -> None:
    """A stray second tap of Telegram's command menu erases nothing."""
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget")
    again = say(pam, user, "/forget")
    assert again.replies[0].startswith(forgetting.ASK) and not again.forgot
    assert pam.store.learners.find_learner(user) is not None


def test_a_stranger_tapping_a_confirmation_is_told_kindly_and_not_made_up(pam: Pam) -> None:
    """No learner at the address (forgotten already, or never met): the answer is in the
    language the platform hints at, and no learner is made up to give it."""
    user = unique_user()
    stale = words_for("German", forgetting.DOMAIN)(forgetting.STALE)
    for command in ("/forget yes abc", "/forget no"):
        assert say(pam, user, command, language_hint="de").replies == [stale]
    assert pam.store.learners.find_learner(user) is None


def test_naming_someone_else_erases_only_the_one_asking(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user, other = a_learner_with_a_past(pam, fake_model), a_learner_with_a_past(pam, fake_model)
    before = rows(pam, other)
    confirm = yes_button(say(pam, user, f"/forget {other}"))
    assert say(pam, user, confirm).forgot
    assert rows(pam, other) == before


def test_the_question_counts_charts_spoken_replies_summary_and_profile(pam: Pam) -> None:
    user = unique_user()
    say(pam, user, "/language Spanish English")
    learner = learner_of(pam, user)
    pam.store.charts.save(learner.id, b"png", "caption")
    pam.store.voice_clips.save(learner.id, b"OggS", "audio/ogg")
    pam.store.voice_clips.save(learner.id, b"OggS", "audio/ogg")
    holdings = pam.store.forget_requests.ask(learner.id, "code", datetime.now(UTC))
    assert (holdings.charts, holdings.voice_clips, holdings.messages) == (1, 2, 0)
    assert not holdings.summary and not holdings.profile

    question = say(pam, user, "/forget").replies[0]
    assert "• 1 progress chart" in question and "• 2 spoken replies" in question


def test_racing_confirmations_erase_once(store: Store) -> None:
    """Two confirmations of one question at once (two lanes, two workers): the code is
    taken in the erase's own transaction, so exactly one erases."""
    user = unique_user()
    learner = store.learners.learner(user)
    store.conversation.begin_turn(learner.id, "Hola", 1, inbox_id=None, window=None)
    now = datetime.now(UTC)
    store.forget_requests.ask(learner.id, "the-code", now)
    results: list[bool] = []
    start = threading.Barrier(2)

    def confirm() -> None:
        start.wait()
        results.append(store.learners.forget_confirmed(learner.id, "the-code", now - EXPIRY))

    threads = [threading.Thread(target=confirm) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert set(store.inspection.rows_about(learner.id, user).values()) == {0}


def test_the_erase_takes_only_its_own_code_and_only_in_time(store: Store) -> None:
    user = unique_user()
    learner = store.learners.learner(user)
    asked = datetime.now(UTC)
    store.forget_requests.ask(learner.id, "the-code", asked)
    assert not store.learners.forget_confirmed(learner.id, "other", asked - EXPIRY)
    assert not store.learners.forget_confirmed(learner.id, "the-code", asked)  # expired
    assert store.learners.find_learner(user) is not None
    assert store.learners.forget_confirmed(learner.id, None, asked - EXPIRY)  # a typed yes
    assert store.learners.find_learner(user) is None


def test_neither_the_question_nor_its_answer_is_kept_in_the_conversation(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    """/forget and its question are no part of the chat: the conversation goes on as if it
    had not been asked, once dropped."""
    user = a_learner_with_a_past(pam, fake_model)
    say(pam, user, "/forget")
    say(pam, user, "Sigo aquí")
    learner = learner_of(pam, user)
    said = [m.content for m in pam.store.conversation.messages(learner.id, role=LEARNER)]
    assert said[-1] == "Sigo aquí" and "/forget" not in said
