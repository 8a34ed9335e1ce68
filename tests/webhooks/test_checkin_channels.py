"""Check-ins within each platform's rules, through the real clients against the loopback
servers: WhatsApp's 24-hour window and the operator's template (Twilio's ContentSid and
ContentVariables), Telegram's 403 "bot was blocked by the user" turning check-ins off; and
where a check-in may go at all (webhooks/checkin_routes.py)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, timedelta

import pytest
from sqlalchemy import Engine

from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.telegram_server import TOKEN, Failure, TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer
from loopback.twilio_server import Failure as TwilioFailure
from memory import metrics
from memory.clock import ManualClock
from memory.database.models_checkins import LATE, SKIPPED
from tests.fakes import FakeChatModel
from tests.helpers.checkins import (
    DRAFT,
    MADRID,
    START,
    FakeComposer,
    arrived,
    checkin_outbox,
    checkin_pam,
    checkins_of,
    evenings,
    learner_who_wrote,
    rounds_of,
    spanish_number,
    telegram_address,
    to_due,
    waiting,
)
from webhooks.app import create_app
from webhooks.checkin_routes import ChannelRoutes
from webhooks.settings import Settings
from webhooks.telegram.client import TelegramClient
from webhooks.whatsapp.sender import TwilioSender

TEMPLATE = "HX" + "c" * 32
ADMIN = "admin-token-3b9d-checkins"
BLOCKED = "Forbidden: bot was blocked by the user"
# Twilio down for a while: a 503, retried.
UNAVAILABLE = TwilioFailure(503, 20500, "Service Unavailable")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def pam(settings: Settings, engine: Engine, fake_model: FakeChatModel, clock: ManualClock) -> Pam:
    return checkin_pam(settings, engine, fake_model, clock)


@pytest.fixture
def twilio() -> Iterator[TwilioServer]:
    with TwilioServer() as server:
        yield server


@pytest.fixture
def telegram_server() -> Iterator[TelegramServer]:
    with TelegramServer() as server:
        yield server


def whatsapp_worker(pam: Pam, twilio: TwilioServer, template: str | None) -> Worker:
    sender = TwilioSender(
        ACCOUNT_SID,
        AUTH_TOKEN,
        NUMBER,
        api_url=twilio.base_url,
        timeout=3.0,
        checkin_template_sid=template,
    )
    return Worker(pam, {"whatsapp": sender})


def queue_checkin(pam: Pam, clock: ManualClock, learner: int, template: str | None) -> str:
    """Plan the learner's check-in, move to its time and decide it: the outcome."""
    rounds = rounds_of(pam, FakeComposer(), template)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    [(outcome, _)] = rounds.run_round().outcomes.items()
    return outcome


# -- WhatsApp -------------------------------------------------------------------------------


def test_inside_the_window_the_checkin_goes_as_a_plain_message(
    pam: Pam, clock: ManualClock, twilio: TwilioServer
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, [*evenings(6, 17), START])
    assert queue_checkin(pam, clock, learner, TEMPLATE) == "queued"

    whatsapp_worker(pam, twilio, TEMPLATE).drain()

    [message] = twilio.messages
    assert message["To"] == address and message["Body"] == DRAFT.text
    assert "ContentSid" not in message


def test_outside_the_window_it_goes_through_the_operators_template(
    pam: Pam, clock: ManualClock, twilio: TwilioServer
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(3)))
    assert queue_checkin(pam, clock, learner, TEMPLATE) == "queued"

    whatsapp_worker(pam, twilio, TEMPLATE).drain()

    [message] = twilio.messages
    assert message["To"] == address and "Body" not in message
    assert message["ContentSid"] == TEMPLATE
    assert json.loads(message["ContentVariables"]) == {"1": DRAFT.text}
    [part] = checkin_outbox(pam.engine, address)
    assert part.template and part.status == "sent"


def test_outside_the_window_without_a_template_nothing_reaches_twilio(
    pam: Pam, clock: ManualClock, twilio: TwilioServer
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(3)))
    assert queue_checkin(pam, clock, learner, None) == "no_template"

    whatsapp_worker(pam, twilio, None).drain()

    assert twilio.messages == []


# -- Telegram -------------------------------------------------------------------------------


def test_a_learner_who_blocked_the_bot_gets_no_more_checkins(
    pam: Pam, clock: ManualClock, telegram_server: TelegramServer
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    assert queue_checkin(pam, clock, learner, None) == "queued"
    telegram_server.fail_next(Failure("sendMessage", 403, BLOCKED))
    client = TelegramClient(TOKEN, telegram_server.base_url)
    try:
        Worker(pam, {"telegram": client}).drain()
    finally:
        client.close()
    sent_before = metrics.CHECKINS_SENT._value.get()

    prefs = pam.store.checkins.prefs(learner)
    assert prefs.disabled_reason == "telegram_blocked" and prefs.preference == "on"
    rounds = rounds_of(pam, FakeComposer())
    for _ in range(3):
        clock.advance(timedelta(days=1))
        rounds.run_round()
    assert waiting(pam.engine, learner) is None
    assert metrics.CHECKINS_SENT._value.get() == sent_before
    assert "telegram_blocked" in rounds.outlook(learner, address, enabled=True).why
    # Turning them on again (they unblocked Pam) starts them again.
    pam.store.checkins.set_preference(learner, on=True)
    assert rounds.run_round().planned == 1


# -- a check-in's deadline ------------------------------------------------------------------


def late_skips() -> float:
    value: float = metrics.CHECKINS_SKIPPED.labels(LATE)._value.get()
    return value


def test_a_free_form_checkin_retried_past_the_24_hours_is_not_sent(
    pam: Pam, clock: ManualClock, twilio: TwilioServer
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(3)))
    rounds = rounds_of(pam, FakeComposer(), TEMPLATE)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    # Their last message reached Pam 22½ hours before it is due: free-form, within the 23.
    last = due - timedelta(hours=22, minutes=30)
    arrived(pam.engine, address, last)
    assert rounds.run_round().outcomes == {"queued": 1}
    [part] = checkin_outbox(pam.engine, address)
    # Its deadline is when WhatsApp's window closes, 24 hours after it (before 21:00).
    assert not part.template and part.send_before == last + timedelta(hours=24)
    late_before = late_skips()
    worker = whatsapp_worker(pam, twilio, TEMPLATE)
    twilio.fail_next(UNAVAILABLE)
    worker.drain()
    assert twilio.messages == []

    # Twilio is back once the window has closed: the message is not sent (error 63016).
    clock.now = last + timedelta(hours=24)
    worker.drain()

    assert twilio.messages == []
    [part] = checkin_outbox(pam.engine, address)
    assert part.status == "failed" and part.attempts == 2 and part.text == ""
    assert part.last_error is not None and part.last_error.startswith("late")
    checkin = checkins_of(pam.engine, learner)[0]
    assert (checkin.state, checkin.skip_reason) == (SKIPPED, LATE)
    assert late_skips() == late_before + 1
    # Never sent, so never left unanswered.
    assert pam.store.checkins.prefs(learner).unanswered == 0


def test_a_template_checkin_goes_after_the_24_hours_until_the_quiet_hours(
    pam: Pam, clock: ManualClock, twilio: TwilioServer
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(3)))
    assert queue_checkin(pam, clock, learner, TEMPLATE) == "queued"
    [part] = checkin_outbox(pam.engine, address)
    quiet = clock.now.astimezone(MADRID).replace(hour=21, minute=0, second=0, microsecond=0)
    # A template has no window to close: only the quiet hours end its time.
    assert part.template and part.send_before == quiet.astimezone(UTC)
    worker = whatsapp_worker(pam, twilio, TEMPLATE)
    twilio.fail_next(UNAVAILABLE)
    worker.drain()

    clock.now = quiet - timedelta(minutes=1)
    worker.drain()

    [message] = twilio.messages
    assert message["To"] == address and message["ContentSid"] == TEMPLATE
    [part] = checkin_outbox(pam.engine, address)
    assert part.status == "sent"


def test_a_telegram_checkin_rate_limited_into_the_quiet_hours_is_never_sent(
    pam: Pam, clock: ManualClock, telegram_server: TelegramServer
) -> None:
    address = telegram_address()
    # They write at 23:05 in Madrid: their check-in goes at 20:xx, the last hour before 21:00.
    learner = learner_who_wrote(pam, clock, address, evenings(6, 22), "Europe/Madrid")
    assert queue_checkin(pam, clock, learner, None) == "queued"
    quiet = clock.now.astimezone(MADRID).replace(hour=21, minute=0, second=0, microsecond=0)
    [part] = checkin_outbox(pam.engine, address)
    assert part.send_before == quiet.astimezone(UTC)
    limited = Failure("sendMessage", 429, "Too Many Requests", {"retry_after": 900})
    telegram_server.fail_next(*[limited] * 8)
    late_before = late_skips()
    client = TelegramClient(TOKEN, telegram_server.base_url)
    try:
        worker = Worker(pam, {"telegram": client})
        # Each retry when Telegram said to, until one would come in the quiet hours.
        for _ in range(8):
            worker.drain()
            [part] = checkin_outbox(pam.engine, address)
            if part.status != "pending":
                break
            assert part.available_at < quiet
            clock.now = part.available_at
    finally:
        client.close()

    assert telegram_server.sent_texts(address.removeprefix("telegram:")) == []
    assert part.status == "failed" and part.attempts >= 2
    assert part.last_error is not None and part.last_error.startswith("late")
    checkin = checkins_of(pam.engine, learner)[0]
    assert (checkin.state, checkin.skip_reason) == (SKIPPED, LATE)
    assert late_skips() == late_before + 1


# -- where a check-in may go -----------------------------------------------------------------


def test_routes_follow_each_platforms_rules() -> None:
    routes = ChannelRoutes({"telegram", "whatsapp", "api"}, TEMPLATE)
    user = random.randint(10**8, 10**10)

    private = routes.route(f"telegram:{user}")
    assert private is not None and private.chat_id == str(user) and private.window is None
    assert routes.route(f"telegram:{user}@-100123") is None  # a group member: others read it
    assert routes.route("api:alice") is None
    whatsapp = routes.route("whatsapp:+4915112345678")
    # WhatsApp's 24 hours, less an hour's margin for a message timed when its turn ran and a
    # check-in sent after it was decided.
    assert whatsapp is not None and whatsapp.window == timedelta(hours=23)
    # The window itself closes at 24 hours: a free-form check-in unsent by then never goes.
    assert whatsapp.window_closes == timedelta(hours=24)
    assert whatsapp.template and whatsapp.timezone == "Europe/Berlin"
    assert ChannelRoutes({"telegram"}, None).route("whatsapp:+4915112345678") is None
    no_template = ChannelRoutes({"whatsapp"}, None).route("whatsapp:+4915112345678")
    assert no_template is not None and not no_template.template


# -- operators ------------------------------------------------------------------------------


def test_the_admin_api_shows_the_next_checkin_and_why_none(
    pam: Pam, clock: ManualClock, settings: Settings, engine: Engine
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds_of(pam, FakeComposer()).run_round()
    on = settings.replace(
        web={"admin_token": ADMIN},
        telegram={"bot_token": TOKEN},
        checkin={"enabled": True},
    )
    headers = {"Authorization": f"Bearer {ADMIN}"}

    answer = (
        create_app(on, engine=engine)
        .test_client()
        .get(f"/admin/learners/{address}/checkins", headers=headers)
    )
    assert answer.status_code == 200
    body = answer.get_json()
    planned = waiting(pam.engine, learner)
    assert planned is not None
    assert body["next"] == {
        "due_at": planned.due_at.isoformat(timespec="seconds"),
        "local_day": planned.local_day,
    }
    assert "planned" in body["why"] and body["preference"] == "on"
    assert body["timezone"] == "Europe/Madrid" and body["timezone_stated"] is True
    assert body["timezone_guessed_from"] is None
    assert body["recent"][0]["state"] == "scheduled"
    # A zone guessed from the hours is a fixed offset, shown as one reads it.
    pam.store.checkins.set_timezone(learner, "Etc/GMT-1", stated=False)
    guessed = (
        create_app(on, engine=engine)
        .test_client()
        .get(f"/admin/learners/{learner}/checkins", headers=headers)
        .get_json()
    )
    assert guessed["timezone"] == "UTC+01:00" and guessed["timezone_guessed_from"] == "hours"

    off = on.replace(checkin={"enabled": False})
    answer = (
        create_app(off, engine=engine)
        .test_client()
        .get(f"/admin/learners/{learner}/checkins", headers=headers)
    )
    assert answer.get_json()["next"] is None and "PAM_CHECKINS" in answer.get_json()["why"]
    nobody = (
        create_app(on, engine=engine)
        .test_client()
        .get("/admin/learners/telegram:1/checkins", headers=headers)
    )
    assert nobody.status_code == 404
