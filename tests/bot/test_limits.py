"""Cost and abuse limits: messages per minute, the learner's and the service's daily tokens."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine

from bot import phrases
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from memory.clock import Clock, ManualClock, utcnow
from memory.messages import TURNED_AWAY
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build


def pam_with(
    settings: Settings,
    engine: Engine,
    model: FakeChatModel,
    clock: Clock = utcnow,
    **knobs: dict[str, int],
) -> Pam:
    """Pam with some limits changed (`limits={...}`), memory jobs inline, and its windows on
    `clock`."""
    return build(
        settings.replace(**knobs),
        model=model,
        submit=lambda work: work(),
        engine=engine,
        clock=clock,
    )


def test_too_many_messages_a_minute_get_a_friendly_answer_and_are_kept(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model, limits={"rate_limit_per_minute": 3})
    user = unique_user()
    handle(pam, user, "/language Spanish German")
    answers = [handle(pam, user, f"Mensaje {n}") for n in range(5)]

    # Said once, in the native language, then silence for the rest of the minute (issue 27:
    # one notice per window).
    assert answers[3:] == [[phrases.said(phrases.SLOW_DOWN, "German")], []]
    assert answers[3][0].startswith("Oha, so viele Nachrichten")
    assert len(fake_model.of("reply")) == 3
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    kept = [m.content for m in pam.store.conversation.messages(learner.id, role="learner")]
    assert kept == [f"Mensaje {n}" for n in range(5)]  # nothing a learner writes is lost


def test_the_rate_limit_counts_each_learner_alone(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model, limits={"rate_limit_per_minute": 2})
    first, second = unique_user(), unique_user()
    for n in range(2):
        handle(pam, first, f"uno {n}")
    assert handle(pam, second, "Hola") != [phrases.SLOW_DOWN]


def test_the_rate_limit_lifts_once_the_minute_has_passed(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    clock = ManualClock()
    pam = pam_with(settings, engine, fake_model, clock, limits={"rate_limit_per_minute": 2})
    user = unique_user()
    for n in range(2):
        handle(pam, user, f"uno {n}")
    assert handle(pam, user, "tres") == [phrases.SLOW_DOWN]
    clock.advance(timedelta(minutes=1, seconds=1))
    assert handle(pam, user, "cuatro") != [phrases.SLOW_DOWN]


def test_a_burst_over_the_rate_limit_is_told_to_slow_down_once_a_minute(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    """Each message over the limit used to get its own "slow down": 2,000 messages, 2,000
    sends (billed on WhatsApp) and a turn each. Now it is said once a minute; every message
    is still kept."""
    clock = ManualClock()
    pam = pam_with(settings, engine, fake_model, clock, limits={"rate_limit_per_minute": 2})
    user, other = unique_user(), unique_user()
    answers = []
    for n in range(40):  # one every three seconds: two minutes of a burst
        answers.append(handle(pam, user, f"spam {n}"))
        clock.advance(timedelta(seconds=3))
    notices = [n for n, said in enumerate(answers) if said == [phrases.SLOW_DOWN]]
    assert notices == [2, 23]  # the first over the limit, then past a minute later
    assert [said for said in answers[2:] if said != [phrases.SLOW_DOWN]] == [[]] * 36
    assert len(fake_model.of("reply")) == 2
    assert handle(pam, other, "Hola") != [phrases.SLOW_DOWN]  # theirs alone
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    assert len(pam.store.conversation.messages(learner.id, role="learner")) == 40


def test_the_note_of_messages_turned_away_says_slow_down_as_seldom(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    """The web stores one note in place of the messages it turned away (the learner had too
    many waiting): answered with "slow down", under the rate limit's once a minute."""
    clock = ManualClock()
    pam = pam_with(settings, engine, fake_model, clock)
    user = unique_user()
    handle(pam, user, "/language Spanish English")
    assert pam.tutor.answer(TurnRequest(user, "", kind=TURNED_AWAY)).replies == [phrases.SLOW_DOWN]
    assert pam.tutor.answer(TurnRequest(user, "", kind=TURNED_AWAY)).replies == []
    clock.advance(timedelta(minutes=1, seconds=1))
    assert pam.tutor.answer(TurnRequest(user, "", kind=TURNED_AWAY)).replies == [phrases.SLOW_DOWN]
    assert fake_model.of("reply") == []
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    assert pam.store.conversation.messages(learner.id) == []  # nothing kept of it


def test_a_learner_over_their_daily_tokens_is_told_kindly(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model, limits={"learner_daily_tokens": 1})
    user, other = unique_user(), unique_user()
    first = handle(pam, user, "Hola")
    assert first != [phrases.LEARNER_BUDGET]  # the first call spends the budget
    assert handle(pam, user, "¿Otra vez?") == [phrases.LEARNER_BUDGET]
    assert len(fake_model.of("reply")) == 1
    assert handle(pam, other, "Hola") != [phrases.LEARNER_BUDGET]


def test_a_learners_daily_tokens_come_back_the_next_day(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    clock = ManualClock()
    pam = pam_with(settings, engine, fake_model, clock, limits={"learner_daily_tokens": 1})
    user = unique_user()
    handle(pam, user, "Hola")
    assert handle(pam, user, "¿Otra vez?") == [phrases.LEARNER_BUDGET]
    clock.advance(timedelta(days=1))
    assert handle(pam, user, "¿Y hoy?") != [phrases.LEARNER_BUDGET]


def test_the_service_wide_daily_budget_stops_every_reply(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model, limits={"daily_tokens": 1})
    handle(pam, unique_user(), "Hola")  # spends the day's budget (and any earlier test's)
    assert handle(pam, unique_user(), "Hola") == [phrases.SERVICE_BUDGET]


def test_usage_is_queryable_per_learner_and_purpose(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model)
    user = unique_user()
    for n in range(5):
        handle(pam, user, f"Mensaje {n}")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    usage = pam.store.ledger.usage(learner.id)
    assert usage["reply"][0] == 5 and usage["profile"][0] == 1
