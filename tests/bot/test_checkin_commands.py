"""/checkins on|off, /timezone and /start's offer, through the tutor, in the learner's language."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from bot.timezones import readable
from bot.turn import checkin_commands
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel
from tests.helpers.checkins import checkin_pam
from tests.support import handle
from webhooks.settings import Settings


def ask(pam: Pam, user: str, text: str) -> str:
    """The one answer Pam gives to `text`."""
    answers = handle(pam, user, text)
    assert len(answers) == 1, answers
    return answers[0]


def test_start_offers_checkins_until_the_learner_says(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = checkin_pam(settings, engine, fake_model, ManualClock(datetime(2026, 3, 2, tzinfo=UTC)))
    user = unique_user()
    assert checkin_commands.OFFER in ask(pam, user, "/start")

    answer = ask(pam, user, "/checkins on")

    assert answer.startswith(checkin_commands.CHECKINS_ON)
    assert checkin_commands.NOT_SWITCHED_ON not in answer
    # A learner new on Telegram: no zone said or guessed yet, and told so (not "UTC").
    assert answer.endswith(checkin_commands.TIMEZONE_NOT_YET) and "/timezone" in answer
    assert checkin_commands.OFFER not in ask(pam, user, "/start")
    prefs = pam.store.checkins.prefs(learner_of(pam, user).id)
    assert prefs.preference == "on" and prefs.preference_set_at is not None
    assert fake_model.calls == []


def test_where_checkins_are_off_start_offers_none_and_checkins_on_says_so(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = unique_user()
    # Check-ins are off for the whole deployment by default: /start offers nothing that would
    # not come, and a learner who asks all the same is told.
    assert checkin_commands.OFFER not in ask(pam, user, "/start")

    answer = ask(pam, user, "/checkins on")

    assert answer.startswith(checkin_commands.CHECKINS_ON)
    assert checkin_commands.NOT_SWITCHED_ON in answer
    assert pam.store.checkins.prefs(learner_of(pam, user).id).preference == "on"
    assert fake_model.calls == []


def test_checkins_off_and_the_usage(pam: Pam) -> None:
    user = unique_user()
    ask(pam, user, "/checkins on")
    assert ask(pam, user, "/checkins OFF") == checkin_commands.CHECKINS_OFF
    assert pam.store.checkins.prefs(learner_of(pam, user).id).preference == "off"
    usage = ask(pam, user, "/checkins")
    assert usage.startswith(checkin_commands.CHECKINS_USAGE)
    assert usage.endswith(checkin_commands.CHECKINS_OFF)
    assert ask(pam, user, "/checkins maybe").startswith(checkin_commands.CHECKINS_USAGE)


def test_checkins_says_which_state_they_are_in_never_on_off_or_paused(pam: Pam) -> None:
    user = unique_user()
    # Never turned on: nothing to turn "back" on.
    never = ask(pam, user, "/checkins")
    assert never.endswith(checkin_commands.CHECKINS_NEVER_ON) and "back on" not in never
    learner = learner_of(pam, user)
    ask(pam, user, "/checkins on")
    assert ask(pam, user, "/checkins").endswith(checkin_commands.CHECKINS_ON)
    # Their chat refused Pam's messages (a block since lifted): paused, and how to restart.
    assert pam.store.checkins.disable(learner.external_id, "telegram_blocked")
    assert ask(pam, user, "/checkins").endswith(checkin_commands.CHECKINS_PAUSED)
    ask(pam, user, "/checkins off")
    assert ask(pam, user, "/checkins").endswith(checkin_commands.CHECKINS_OFF)


def test_a_timezone_guessed_from_the_hours_reads_as_an_offset_and_a_guess(pam: Pam) -> None:
    user = unique_user()
    learner = pam.store.learners.learner(user)
    # Etc/GMT-1 is an hour ahead of UTC: POSIX's sign, backwards to anyone reading it.
    pam.store.checkins.set_timezone(learner.id, "Etc/GMT-1", stated=False)
    answer = ask(pam, user, "/timezone")
    assert answer.startswith("Your time zone: UTC+01:00, as I guessed from the hours")
    assert "GMT" not in answer
    ask(pam, user, "/language English Spanish")
    assert ask(pam, user, "/timezone").startswith("Tu zona horaria: UTC+01:00, según lo que")
    # A zone they state themselves is theirs, not a guess, however it is spelt.
    assert "UTC-05:00" in ask(pam, user, "/timezone Etc/GMT+5")
    assert ask(pam, user, "/timezone").startswith("Tu zona horaria: UTC-05:00.")


def test_a_timezone_not_known_yet_is_said_so_not_shown_as_utc(pam: Pam) -> None:
    # A learner new on Telegram: not said, nothing to guess from yet.
    user = unique_user()
    answer = ask(pam, user, "/checkins on")
    assert answer.endswith(checkin_commands.TIMEZONE_NOT_YET) and "UTC" not in answer
    ask(pam, user, "/language English Spanish")
    assert ask(pam, user, "/timezone").startswith("Todavía no sé tu zona horaria.")


def test_timezones_read_as_people_read_them() -> None:
    assert readable("Etc/GMT-1") == "UTC+01:00" and readable("Etc/GMT+5") == "UTC-05:00"
    assert readable("Etc/UTC") == "UTC" and readable(None) == "UTC"
    assert readable("Europe/Madrid") == "Europe/Madrid"


def test_timezone_takes_iana_names_as_people_type_them(pam: Pam) -> None:
    user = unique_user()
    answer = ask(pam, user, "/timezone europe/madrid")
    assert answer.startswith("Got it: your time zone is Europe/Madrid, where it's ")
    prefs = pam.store.checkins.prefs(learner_of(pam, user).id)
    assert prefs.timezone == "Europe/Madrid" and prefs.timezone_stated
    assert "America/Mexico_City" in ask(pam, user, "/timezone America/Mexico City")
    assert ask(pam, user, "/timezone").startswith("Your time zone: America/Mexico_City.")


def test_a_timezone_pam_does_not_know_gets_a_friendly_answer_in_their_language(
    pam: Pam,
) -> None:
    user = unique_user()
    ask(pam, user, "/language English Spanish")
    answer = ask(pam, user, "/timezone Mars/Olympus_Mons")
    assert answer.startswith("No conozco la zona horaria «Mars/Olympus_Mons»")
    long = ask(pam, user, "/timezone " + "x" * 300)
    assert len(long) < 300
    prefs = pam.store.checkins.prefs(learner_of(pam, user).id)
    assert prefs.timezone is None


def test_the_time_set_reads_right_at_one_o_clock_in_spanish_and_italian(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    # 00:30 UTC is 01:30 in Madrid and Rome in winter: "son las 01:30" and "sono le 01:30"
    # are wrong at one o'clock (it is "es la una", "è l'una"); the sentence names the hour
    # without the article that has to agree with it.
    clock = ManualClock(datetime(2026, 1, 15, 0, 30, tzinfo=UTC))
    pam = checkin_pam(settings, engine, fake_model, clock)
    spanish, italian = unique_user(), unique_user()
    ask(pam, spanish, "/language English Spanish")
    ask(pam, italian, "/language English Italian")

    assert ask(pam, spanish, "/timezone Europe/Madrid") == (
        "Entendido: tu zona horaria es Europe/Madrid, donde la hora actual es 01:30."
    )
    assert ask(pam, italian, "/timezone Europe/Rome") == (
        "Ok: il tuo fuso orario è Europe/Rome, dove l'ora attuale è 01:30."
    )
