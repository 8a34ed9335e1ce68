"""Check-ins (issue 31): when Pam writes first, to whom, exactly once, through the outbox — run
against the real store, scheduler rounds and outbox on an injected clock, with a fake composer
at the seam (bot/checkins/compose.py) and a recording sender at the channel's."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from bot.checkins.compose import CheckinDraft, MemoryComposer, plan_edit
from bot.checkins.rounds import (
    LEARNER_WRITING,
    LEARNER_WROTE,
    NO_TEMPLATE,
    OUTSIDE_THEIR_HOURS,
    RECENT_CHAT,
)
from bot.worker.runtime import Pam
from bot.worker.worker import Worker, checkin_scheduler
from memory import metrics
from memory.clock import ManualClock
from memory.database import db
from memory.database.models import Message, Usage
from memory.database.models_checkins import (
    ANSWERED,
    QUEUED,
    SCHEDULED,
    SKIPPED,
)
from memory.database.models_queue import OutboxItem
from memory.database.records import PAM
from memory.jobs.plans import Plan, kept_plans
from memory.llm import Outage
from memory.llm import Usage as Billed
from memory.messages import Inbound
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.checkins import CheckinWrite, ProfileEdit
from memory.store.message_store import Store
from tests.fakes import FakeChatModel
from tests.helpers.checkins import (
    DRAFT,
    MADRID,
    START,
    FakeComposer,
    checkin_outbox,
    checkin_pam,
    checkins_of,
    evenings,
    learner_who_wrote,
    queued_checkin,
    rounds_of,
    spanish_number,
    telegram_address,
    to_due,
    waiting,
)
from tests.support import RecordingSender
from webhooks.settings import Settings
from webhooks.wiring import checkin_rounds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def pam(settings: Settings, engine: Engine, fake_model: FakeChatModel, clock: ManualClock) -> Pam:
    return checkin_pam(settings, engine, fake_model, clock)


@pytest.fixture
def composer() -> FakeComposer:
    return FakeComposer()


@pytest.fixture
def telegram() -> RecordingSender:
    return RecordingSender()


@pytest.fixture
def whatsapp() -> RecordingSender:
    return RecordingSender(max_chars=1600)


@pytest.fixture
def worker(pam: Pam, telegram: RecordingSender, whatsapp: RecordingSender) -> Iterator[Worker]:
    worker = Worker(pam, {"telegram": telegram, "whatsapp": whatsapp})
    yield worker
    worker.stop()


# -- a check-in, end to end ---------------------------------------------------------------


def test_a_due_checkin_is_pams_turn_delivered_once_through_the_outbox(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    address = telegram_address()
    # The learner writes at 17:05 UTC, 18:05 in Madrid (winter time): Pam learns the hour.
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), tz="Europe/Madrid")
    rounds = rounds_of(pam, composer)
    sent_before = metrics.CHECKINS_SENT._value.get()

    first = rounds.run_round()
    assert first.planned == 1 and not first.outcomes
    due = to_due(clock, pam.engine, learner)
    assert due.astimezone(MADRID).hour == 18
    assert rounds.run_round().outcomes == {"queued": 1}
    worker.drain()

    chat = address.removeprefix("telegram:")
    assert telegram.texts_to(chat) == [DRAFT.text]
    # Stored as Pam's turn, its tokens billed to the learner as a check-in.
    pams = [m for m in pam.store.conversation.messages(learner) if m.role == PAM]
    assert [m.content for m in pams] == [DRAFT.text]
    assert pam.store.ledger.usage(learner)["checkin"] == (1, 420, 18)
    assert metrics.CHECKINS_SENT._value.get() == sent_before + 1
    # Rounds after it write nothing more that day; the next is planned for tomorrow.
    for _ in range(3):
        clock.advance(timedelta(minutes=10))
        assert not rounds.run_round().outcomes
    worker.drain()
    assert len(telegram.texts_to(chat)) == 1
    [sent, planned] = checkins_of(pam.engine, learner)
    assert sent.state == QUEUED and sent.follows_up == "plan" and sent.topic == "job interview"
    assert planned.state == SCHEDULED and planned.local_day > sent.local_day


def test_the_learners_answer_marks_it_answered_and_continues_the_chat(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    rounds.run_round()
    answered_before = metrics.CHECKINS_ANSWERED._value.get()

    clock.advance(timedelta(minutes=20))
    pam.store.conversation.add_learner_message(learner, "¡Muy bien, me cogieron!", 8)
    report = rounds.run_round()

    assert report.answered == 1
    assert metrics.CHECKINS_ANSWERED._value.get() == answered_before + 1
    assert checkins_of(pam.engine, learner)[0].state == ANSWERED
    assert pam.store.checkins.prefs(learner).unanswered == 0
    # The conversation holds the check-in, then the learner's answer to it.
    tail = [(m.role, m.content) for m in pam.store.conversation.messages(learner)][-2:]
    assert tail == [("pam", DRAFT.text), ("learner", "¡Muy bien, me cogieron!")]


def test_an_answered_checkin_plans_the_next_without_backing_off(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer, backoff_days=2)
    rounds.run_round()
    first = to_due(clock, pam.engine, learner)
    rounds.run_round()
    rounds.run_round()
    # Planned just after it went out, while it was still unanswered: two days later.
    planned = waiting(pam.engine, learner)
    assert planned is not None and (planned.due_at - first).days == 2

    clock.advance(timedelta(minutes=20))
    pam.store.conversation.add_learner_message(learner, "¡Muy bien, me cogieron!", 8)
    rounds.run_round()

    # Answered: planned again for the next day, at the same local hour.
    again = waiting(pam.engine, learner)
    assert again is not None
    assert again.due_at.astimezone(MADRID).date() == first.astimezone(MADRID).date() + timedelta(
        days=1
    )
    assert again.due_at.astimezone(MADRID).hour == first.astimezone(MADRID).hour


def test_nobody_who_has_not_opted_in_gets_one(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = pam.store.learners.learner(telegram_address())
    off = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    pam.store.checkins.set_preference(off, on=False)
    rounds = rounds_of(pam, composer)

    for _ in range(48):
        rounds.run_round()
        clock.advance(timedelta(hours=1))

    assert checkins_of(pam.engine, learner.id) == [] and checkins_of(pam.engine, off) == []
    assert composer.calls == []


def test_turning_them_off_cancels_the_one_planned(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    assert waiting(pam.engine, learner) is not None

    pam.store.checkins.set_preference(learner, on=False)
    clock.advance(timedelta(days=1))
    rounds.run_round()

    assert [(c.state, c.skip_reason) for c in checkins_of(pam.engine, learner)] == [
        (SKIPPED, "opted_out")
    ]
    assert composer.calls == []


def test_turning_them_off_stops_one_written_but_not_yet_sent(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    # Written and waiting in the outbox (Telegram slow, a backlog) when the learner opts out.
    address = telegram_address()
    learner, _, _ = queued_checkin(pam, clock, composer, address)
    assert pam.store.checkins.prefs(learner).unanswered == 1

    pam.store.checkins.set_preference(learner, on=False)
    worker.drain()

    assert telegram.calls == []
    [stopped] = checkins_of(pam.engine, learner)
    assert (stopped.state, stopped.skip_reason) == (SKIPPED, "opted_out")
    [part] = checkin_outbox(pam.engine, address)
    assert part.status == "failed" and part.text == ""
    assert pam.store.checkins.prefs(learner).unanswered == 0  # it never reached them


def test_one_a_delivery_holds_already_still_goes_after_turning_them_off(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    address = telegram_address()
    learner, _, _ = queued_checkin(pam, clock, composer, address)
    held = Outbox(pam.engine, 60, clock).claim_next()  # a delivery is sending it
    assert held is not None and held.checkin

    pam.store.checkins.set_preference(learner, on=False)

    [written] = checkins_of(pam.engine, learner)
    assert written.state == QUEUED  # it goes: Pam cannot take back what is being sent
    [part] = checkin_outbox(pam.engine, address)
    assert part.status == "claimed" and part.text == DRAFT.text


def test_a_block_stops_one_answered_before_it_was_sent_and_counts_it(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    # The learner wrote right after it was written (their answer marked it answered) and then
    # blocked the bot on another device: it is not sent, and it is counted as skipped.
    address = telegram_address()
    learner, _, _ = queued_checkin(pam, clock, composer, address)
    clock.advance(timedelta(minutes=1))
    pam.store.conversation.add_learner_message(learner, "¡Bien!", 2)
    assert pam.store.checkins.mark_answered() == 1
    skipped = metrics.CHECKINS_SKIPPED.labels("telegram_blocked")._value.get()

    assert pam.store.checkins.disable(address, "telegram_blocked")

    [stopped] = checkins_of(pam.engine, learner)
    assert (stopped.state, stopped.skip_reason, stopped.answered_at) == (
        SKIPPED,
        "telegram_blocked",
        None,
    )
    assert metrics.CHECKINS_SKIPPED.labels("telegram_blocked")._value.get() == skipped + 1
    assert pam.store.checkins.prefs(learner).unanswered == 0


# -- WhatsApp's 24-hour window --------------------------------------------------------------


def test_whatsapp_inside_the_window_goes_free_form(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, whatsapp: RecordingSender
) -> None:
    address = spanish_number()
    # They last wrote this morning: within the 24 hours at the check-in's evening hour.
    learner = learner_who_wrote(pam, clock, address, [*evenings(6, 17), START - timedelta(hours=1)])
    rounds = rounds_of(pam, composer)  # no template
    rounds.run_round()
    # Guessed from the number: a Spanish zone, kept apart from one the learner states.
    prefs = pam.store.checkins.prefs(learner)
    assert prefs.timezone is not None and not prefs.timezone_stated
    due = to_due(clock, pam.engine, learner)
    assert due.astimezone(MADRID).hour == 18
    assert rounds.run_round().outcomes == {"queued": 1}
    worker.drain()

    assert whatsapp.texts_to(address) == [DRAFT.text]
    [part] = checkin_outbox(pam.engine, address)
    assert not part.template


def test_whatsapp_outside_the_window_without_a_template_sends_nothing(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, whatsapp: RecordingSender
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(2)))
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)

    assert rounds.run_round().outcomes == {NO_TEMPLATE: 1}
    worker.drain()

    assert whatsapp.calls == [] and composer.calls == []
    assert checkins_of(pam.engine, learner)[0].skip_reason == NO_TEMPLATE


def test_the_whatsapp_window_runs_from_when_their_message_reached_pam(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, whatsapp: RecordingSender
) -> None:
    address = spanish_number()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17, before=START - timedelta(2)))
    rounds = rounds_of(pam, composer)  # no template
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    # Their last message reached the inbox 23½ hours before the check-in is due, but its turn
    # ran two hours later (a backlog): by the turn's time it would be well inside the window.
    clock.now = due - timedelta(hours=23, minutes=30)
    assert Inbox(pam.engine, 60, clock).accept(
        Inbound("whatsapp", f"wa-{random.random()}", address, address, "hola")
    )
    clock.advance(timedelta(hours=2))
    worker.drain()
    assert pam.store.checkins.activity(learner, address).last_message_at == clock.now
    clock.now = due + timedelta(seconds=1)

    assert rounds.run_round().outcomes == {NO_TEMPLATE: 1}
    assert checkin_outbox(pam.engine, address) == []


def test_recent_chat_and_a_message_waiting_skip_the_day(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    clock.now = due - timedelta(hours=2)
    pam.store.conversation.add_learner_message(learner, "hola otra vez", 3)
    clock.now = due + timedelta(seconds=1)
    assert rounds.run_round().outcomes == {RECENT_CHAT: 1}

    # Next day: a message of theirs is waiting in the inbox, unanswered yet.
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    inbox = Inbox(pam.engine, 60, clock)
    assert inbox.accept(Inbound("telegram", "tg-1", address, address[9:], "oye"))
    assert rounds.run_round().outcomes == {LEARNER_WRITING: 1}
    assert composer.calls == []


def test_one_taken_up_late_in_the_learners_quiet_hours_is_skipped(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    # Every worker was down from 18:00 in Madrid until 22:30: quiet hours (21–9) by then.
    clock.now = due.astimezone(MADRID).replace(hour=22, minute=30).astimezone(UTC)

    assert rounds.run_round().outcomes == {"quiet_hours": 1}
    assert composer.calls == []


def test_one_whose_composing_runs_into_quiet_hours_is_not_written(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    address = telegram_address()
    # They write at 23:05 in Madrid: their check-in goes at 20:xx, the last hour before 21:00.
    learner = learner_who_wrote(pam, clock, address, evenings(6, 22), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    local = due.astimezone(MADRID)
    assert local.hour == 20 and local.minute <= 40  # room before the quiet hours

    # The round came late and the model was slow: it is past 21:00 when the draft is ready.
    clock.now = local.replace(minute=54).astimezone(UTC)

    def slow(_: int) -> None:
        clock.now = local.replace(hour=21, minute=1).astimezone(UTC)

    composer.during = slow

    assert rounds.run_round().outcomes == {"quiet_hours": 1}
    assert checkin_outbox(pam.engine, address) == []
    assert pam.store.ledger.usage(learner)["checkin"] == (1, 420, 18)  # its tokens were spent


def test_one_still_unsent_when_the_quiet_hours_begin_is_dropped_and_the_reply_goes(
    pam: Pam,
    clock: ManualClock,
    composer: FakeComposer,
    worker: Worker,
    telegram: RecordingSender,
    caplog: pytest.LogCaptureFixture,
) -> None:
    address = telegram_address()
    learner, _, due = queued_checkin(pam, clock, composer, address)
    quiet = due.astimezone(MADRID).replace(hour=21, minute=0).astimezone(UTC)
    [part] = checkin_outbox(pam.engine, address)
    assert part.send_before == quiet
    # Every delivery lane was down until the quiet hours (21–9) had begun, and the learner
    # wrote meanwhile.
    clock.now = quiet + timedelta(minutes=5)
    inbox = Inbox(pam.engine, 60, clock)
    assert inbox.accept(Inbound("telegram", "tg-late", address, address[9:], "¿hola?"))
    late_before = metrics.CHECKINS_SKIPPED.labels("late")._value.get()

    with caplog.at_level("INFO"):
        worker.drain()

    chat = address.removeprefix("telegram:")
    sent = telegram.texts_to(chat)
    assert DRAFT.text not in sent and len(sent) == 1  # their reply, and nothing else
    [part] = checkin_outbox(pam.engine, address)
    assert part.status == "failed" and part.text == ""
    checkin = checkins_of(pam.engine, learner)[0]
    assert checkin.outbox_id == part.id
    assert (checkin.state, checkin.skip_reason) == (SKIPPED, "late")
    assert metrics.CHECKINS_SKIPPED.labels("late")._value.get() == late_before + 1
    assert "late" in caplog.text and DRAFT.text not in caplog.text
    # Their reply carries no deadline: replies never have one.
    with Session(pam.engine) as session:
        deadlines = session.scalars(
            select(OutboxItem.send_before).where(OutboxItem.address == address, ~OutboxItem.checkin)
        ).all()
    assert deadlines == [None]

    pam.store.learners.forget(learner)
    worker.drain()
    assert set(pam.store.inspection.rows_about(learner, address).values()) == {0}


# -- exactly once, and the learner first --------------------------------------------------


def test_a_learner_who_writes_while_it_is_composed_gets_no_checkin(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    inbox = Inbox(pam.engine, 60, clock)
    composer.during = lambda _: inbox.accept(
        Inbound("telegram", f"tg-{random.random()}", address, address[9:], "¡Hola Pam!")
    )

    assert rounds.run_round().outcomes == {LEARNER_WROTE: 1}
    worker.drain()

    # Their message got its normal reply, and nothing else went.
    [reply] = telegram.texts_to(address[9:])
    assert reply != DRAFT.text
    assert checkin_outbox(pam.engine, address) == []
    assert DRAFT.text not in [m.content for m in pam.store.conversation.messages(learner)]
    # The composing was billed all the same.
    assert pam.store.ledger.usage(learner)["checkin"] == (1, 420, 18)


PLAN = Plan("job interview", "2026-03-19", "2026-03-16")


def with_plan(pam: Pam, learner: int) -> CheckinDraft:
    """The learner's profile holding PLAN, and a draft that follows it up."""
    state = pam.store.memory.profile(learner)
    data = {**state.data, "plans": [PLAN.as_dict()]}
    assert pam.store.memory.save_profile_data(learner, state.version, data)
    return replace(DRAFT, plan=PLAN)


def followed_up(pam: Pam, learner: int) -> str | None:
    [plan] = kept_plans(pam.store.memory.profile(learner).data["plans"])
    return plan.followed_up


def test_the_plan_followed_up_is_marked_with_the_write(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    composer.answer = with_plan(pam, learner)
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)

    assert rounds.run_round().outcomes == {"queued": 1}
    assert followed_up(pam, learner) == due.astimezone(MADRID).date().isoformat()


@pytest.mark.parametrize("drop", ["learner_wrote", "opted_out"])
def test_a_dropped_checkin_leaves_its_plan_to_the_next_and_bills_its_tokens(
    pam: Pam, clock: ManualClock, composer: FakeComposer, drop: str
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    composer.answer = with_plan(pam, learner)
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    if drop == "learner_wrote":
        inbox = Inbox(pam.engine, 60, clock)
        composer.during = lambda _: inbox.accept(
            Inbound("telegram", f"tg-{random.random()}", address, address[9:], "¡Hola!")
        )
    else:  # /checkins off as it is composed: the claim is gone when it is written
        composer.during = lambda _: pam.store.checkins.set_preference(learner, on=False)

    assert rounds.run_round().outcomes == {
        (LEARNER_WROTE if drop == "learner_wrote" else "lost"): 1
    }
    assert followed_up(pam, learner) is None
    assert pam.store.ledger.usage(learner)["checkin"] == (1, 420, 18)
    assert checkin_outbox(pam.engine, address) == []


def test_a_profile_update_between_is_read_again_and_the_plan_still_marked(
    pam: Pam, clock: ManualClock, composer: FakeComposer, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    composer.answer = with_plan(pam, learner)
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    edits = []

    def raced(*args: Any) -> ProfileEdit | None:
        edit = plan_edit(*args)
        if not edits:  # the profile job writes just after the first edit was made
            state = pam.store.memory.profile(learner)
            assert pam.store.memory.save_profile_data(learner, state.version, state.data)
        edits.append(edit)
        return edit

    monkeypatch.setattr("bot.checkins.rounds.plan_edit", raced)

    assert rounds.run_round().outcomes == {"queued": 1}
    assert len(edits) == 2 and followed_up(pam, learner) is not None
    assert len(checkin_outbox(pam.engine, address)) == 1
    assert pam.store.ledger.usage(learner)["checkin"] == (1, 420, 18)


def test_forget_while_it_is_composed_leaves_nothing_and_sends_nothing(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    composer.during = lambda learner_id: pam.store.learners.forget(learner_id)

    assert rounds.run_round().outcomes == {"lost": 1}
    worker.drain()

    assert telegram.calls == []
    assert set(pam.store.inspection.rows_about(learner, address).values()) == {0}


def test_forget_after_it_is_queued_cancels_it_in_the_same_transaction(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    address = telegram_address()
    learner, _, _ = queued_checkin(pam, clock, composer, address)

    pam.store.learners.forget(learner)
    worker.drain()

    assert telegram.calls == []
    counts = pam.store.inspection.rows_about(learner, address)
    assert counts["checkins"] == 0 and counts["checkin_states"] == 0
    assert set(counts.values()) == {0}


def test_an_operators_erase_racing_the_write_leaves_no_checkin_to_send(
    pam: Pam,
    clock: ManualClock,
    composer: FakeComposer,
    worker: Worker,
    telegram: RecordingSender,
    database_url: str,
) -> None:
    """The admin API's erase comes while the check-in is being written: the write has taken
    its row and not yet committed its message and outbox part."""
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    writing = db.make_engine(database_url)
    rounds.store = Store(writing, clock)
    rounds.checkins = rounds.store.checkins
    erase = threading.Thread(target=pam.store.learners.forget, args=(learner,))

    def erase_meanwhile(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("INSERT INTO messages") and not erase.is_alive():
            erase.start()
            time.sleep(0.5)  # the erase runs as far as it can before the write commits

    event.listen(writing, "before_cursor_execute", erase_meanwhile)
    try:
        rounds.run_round()
    finally:
        erase.join(30)
        event.remove(writing, "before_cursor_execute", erase_meanwhile)
        writing.dispose()
    worker.drain()

    assert telegram.calls == []
    assert set(pam.store.inspection.rows_about(learner, address).values()) == {0}


def test_a_claim_whose_worker_died_is_taken_up_and_written_once(
    pam: Pam, clock: ManualClock, composer: FakeComposer, worker: Worker, telegram: RecordingSender
) -> None:
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer, lease_seconds=60)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    # A worker takes it and dies before writing: its claim holds until the lease runs out.
    dead = pam.store.checkins.claim_next(timedelta(seconds=60))
    assert dead is not None
    assert rounds.run_round().outcomes == {}

    clock.advance(timedelta(seconds=61))
    assert rounds.run_round().outcomes == {"queued": 1}
    # The dead worker's late write finds its claim gone.
    assert (
        pam.store.checkins.write(dead, pam.store.checkins.activity(learner, address), WRITE) is None
    )
    worker.drain()

    assert telegram.texts_to(address[9:]) == [DRAFT.text]
    assert len(checkin_outbox(pam.engine, address)) == 1


def test_at_most_one_a_local_day_is_a_fact_of_the_database(pam: Pam, clock: ManualClock) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), [], "Europe/Madrid")
    due = START + timedelta(hours=8)

    assert pam.store.checkins.schedule(learner, "2026-03-20", due)
    assert not pam.store.checkins.schedule(learner, "2026-03-20", due + timedelta(hours=1))
    assert len(checkins_of(pam.engine, learner)) == 1


def test_a_model_outage_is_retried_later_then_given_up(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    composer.answer = Outage("server down", (Billed("gpt-4o-mini", 100, 0),))

    assert rounds.run_round().outcomes == {"retry": 1}
    clock.advance(timedelta(minutes=11))
    assert rounds.run_round().outcomes == {"retry": 1}
    clock.advance(timedelta(minutes=11))
    assert rounds.run_round().outcomes == {"model_error": 1}
    assert pam.store.ledger.usage(learner)["checkin"] == (3, 300, 0)


def test_nothing_to_say_skips_the_day(pam: Pam, clock: ManualClock, composer: FakeComposer) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    composer.answer = None

    assert rounds.run_round().outcomes == {"nothing_to_say": 1}


def test_a_learner_over_budget_gets_none(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    to_due(clock, pam.engine, learner)
    budget = pam.settings.limits.learner_daily_tokens
    pam.store.ledger.record_usage(learner, "gpt-4o-mini", "reply", budget, 0)

    assert rounds.run_round().outcomes == {"learner_budget": 1}
    assert composer.calls == []


def test_thousands_due_at_once_go_at_the_rate_set(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learners = [
        learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
        for _ in range(12)
    ]
    rounds = rounds_of(pam, composer, per_minute=5)
    rounds.run_round()
    clock.now = max(to_due(clock, pam.engine, learner) for learner in learners)
    clock.advance(timedelta(seconds=1))

    assert rounds.run_round().outcomes == {"queued": 5}
    assert rounds.run_round().outcomes == {}
    clock.advance(timedelta(seconds=61))
    assert rounds.run_round().outcomes == {"queued": 5}


def test_two_workers_claiming_at_once_write_each_checkin_exactly_once(
    pam: Pam, clock: ManualClock, composer: FakeComposer, database_url: str
) -> None:
    addresses = [telegram_address() for _ in range(16)]
    learners = [
        learner_who_wrote(pam, clock, a, evenings(6, 17), "Europe/Madrid") for a in addresses
    ]
    rounds_of(pam, composer).run_round()
    clock.now = max(to_due(clock, pam.engine, learner) for learner in learners)
    clock.advance(timedelta(seconds=1))
    composer.pause = 0.01  # the model takes a moment: the two workers' claims interleave
    engines = [db.make_engine(database_url) for _ in range(2)]
    workers = []
    for engine in engines:
        other = Store(engine, clock)
        rounds = rounds_of(pam, composer)
        rounds.store, rounds.checkins = other, other.checkins
        workers.append(rounds)
    outcomes: list[dict[str, int]] = []
    threads = [
        threading.Thread(target=lambda r=r: outcomes.append(dict(r._drain()))) for r in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for engine in engines:
        engine.dispose()

    assert sum(o.get("queued", 0) for o in outcomes) == 16
    assert sorted(learner for learner, _ in composer.calls) == sorted(learners)
    for address in addresses:
        assert len(checkin_outbox(pam.engine, address)) == 1
    with pam.engine.connect() as connection:
        pams = connection.execute(
            select(func.count()).where(Message.learner_id.in_(learners), Message.role == PAM)
        ).scalar()
        billed = connection.execute(
            select(func.count()).where(Usage.learner_id.in_(learners), Usage.purpose == "checkin")
        ).scalar()
    assert pams == 16 and billed == 16


# -- back off, then stop --------------------------------------------------------------------


def test_unanswered_checkins_back_off_then_stop_until_the_learner_writes(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer, backoff_days=2, max_unanswered=3)
    sent_days = []
    for _ in range(20):
        rounds.run_round()
        if waiting(pam.engine, learner) is None:
            break
        to_due(clock, pam.engine, learner)
        if rounds.run_round().outcomes.get("queued"):
            sent_days.append(clock.now.astimezone(MADRID).date())

    # Day 1, then 2 days after it, then 4 days after that; then none.
    gaps = [(b - a).days for a, b in itertools.pairwise(sent_days)]
    assert len(sent_days) == 3 and gaps == [2, 4]
    clock.advance(timedelta(days=10))
    rounds.run_round()
    assert waiting(pam.engine, learner) is None
    outlook = rounds.outlook(learner, "telegram:1", enabled=True)
    assert outlook.due_at is None and "unanswered" in outlook.why

    # The learner writes again: the next is planned.
    pam.store.conversation.add_learner_message(learner, "¡Perdona, estaba de viaje!", 6)
    rounds.run_round()
    assert waiting(pam.engine, learner) is not None


def test_a_learner_back_after_weeks_of_silence_gets_checkins_again(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer, backoff_days=2, max_unanswered=3)
    for _ in range(20):
        rounds.run_round()
        if waiting(pam.engine, learner) is None:
            break
        to_due(clock, pam.engine, learner)
        rounds.run_round()
    assert pam.store.checkins.prefs(learner).unanswered == 3

    # Six weeks later, long past the look at answered check-ins, they write again.
    clock.advance(timedelta(days=42))
    pam.store.conversation.add_learner_message(learner, "¡Hola! He vuelto.", 4)
    report = rounds.run_round()

    assert pam.store.checkins.prefs(learner).unanswered == 0
    assert waiting(pam.engine, learner) is not None
    # The old check-ins were not answered: nothing is counted as answered.
    assert report.answered == 0
    assert ANSWERED not in {c.state for c in checkins_of(pam.engine, learner)}


def test_two_workers_marking_at_once_count_each_answer_once(
    pam: Pam, clock: ManualClock, composer: FakeComposer, database_url: str
) -> None:
    learners = [
        learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
        for _ in range(8)
    ]
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    clock.now = max(to_due(clock, pam.engine, learner) for learner in learners)
    clock.advance(timedelta(seconds=1))
    assert rounds.run_round().outcomes == {"queued": 8}
    clock.advance(timedelta(minutes=5))
    for learner in learners:
        pam.store.conversation.add_learner_message(learner, "¡Hola!", 2)
    engines = [db.make_engine(database_url) for _ in range(2)]
    stores = [Store(engine, clock) for engine in engines]
    start = threading.Barrier(2)
    counts: list[int] = []

    def mark(store: Store) -> None:
        start.wait()
        counts.append(store.checkins.mark_answered())

    threads = [threading.Thread(target=mark, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for engine in engines:
        engine.dispose()

    assert sum(counts) == 8
    assert all(
        c.state == ANSWERED
        for learner in learners
        for c in checkins_of(pam.engine, learner)
        if c.state != SCHEDULED
    )


def test_a_back_off_past_the_planning_horizon_plans_none_and_says_so(
    pam: Pam, clock: ManualClock, composer: FakeComposer, caplog: pytest.LogCaptureFixture
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    # No limit on unanswered check-ins: the sixth unanswered would wait 64 days.
    rounds = rounds_of(pam, composer, backoff_days=2, max_unanswered=0)
    pam.store.checkins._update(learner, unanswered=6, last_sent_at=clock.now)

    assert rounds.run_round().planned == 0
    assert waiting(pam.engine, learner) is None
    assert "checkin plan failed" not in caplog.text
    outlook = rounds.outlook(learner, "telegram:1", enabled=True)
    assert outlook.due_at is None and "unanswered" in outlook.why


# -- daylight saving time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "writes_at_utc", "local_hour"),
    [
        # Madrid springs forward on 29 March 2026: 18:00 local is 17:00 UTC before, 16:00 after.
        (datetime(2026, 3, 26, 8, tzinfo=UTC), 17, 18),
        # A learner who writes at 23:00 local (22:00 UTC in winter): quiet hours (21–9) move
        # their check-in to 20:00, on both sides of the change.
        (datetime(2026, 3, 26, 8, tzinfo=UTC), 22, 20),
        # And back on 25 October 2026: 18:00 local is 16:00 UTC before, 17:00 after.
        (datetime(2026, 10, 22, 8, tzinfo=UTC), 16, 18),
    ],
)
def test_a_checkin_keeps_its_local_hour_across_a_daylight_saving_change(
    pam: Pam,
    clock: ManualClock,
    composer: FakeComposer,
    start: datetime,
    writes_at_utc: int,
    local_hour: int,
) -> None:
    clock.now = start
    times = evenings(8, writes_at_utc, before=start)
    learner = learner_who_wrote(pam, clock, telegram_address(), times, "Europe/Madrid")
    # The learner's answers come at the check-in's own hour: the hour Pam learns stays put.
    rounds = rounds_of(pam, composer)
    local_times, utc_hours = [], set()
    for _ in range(6):
        rounds.run_round()
        due = to_due(clock, pam.engine, learner)
        assert rounds.run_round().outcomes == {"queued": 1}
        local_times.append(due.astimezone(MADRID))
        utc_hours.add(due.hour)
        clock.advance(timedelta(minutes=2))
        pam.store.conversation.add_learner_message(learner, "¡Hola!", 2)

    assert {t.hour for t in local_times} == {local_hour}
    assert len({t.date() for t in local_times}) == 6  # one a day, six days running
    assert len(utc_hours) == 2  # the change moved it in UTC, not on the learner's clock


def test_one_planned_before_clocks_changed_goes_only_at_a_time_still_safe(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    # A Telegram learner in New York, zone unknown, who writes at 20:05 (01:05 UTC), and
    # whose check-in was planned on the evening before the US clocks went forward.
    new_york = ZoneInfo("America/New_York")
    clock.now = datetime(2026, 3, 8, 2, 0, tzinfo=UTC)  # 21:00 on the 7th, there
    times = evenings(6, 1, before=clock.now)
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, times)
    rounds = rounds_of(pam, composer)
    assert rounds.run_round().planned == 1
    # Planned at 01:05 UTC: on their new clock that is 21:05, their quiet hours.
    due = to_due(clock, pam.engine, learner)
    assert due.astimezone(new_york).hour == 21
    assert rounds.run_round().outcomes == {OUTSIDE_THEIR_HOURS: 1}
    # Their hours were too close together to place one safely until they write again.
    assert rounds.run_round().planned == 0
    assert "clocks changed" in rounds.outlook(learner, "telegram:1", enabled=True).why
    clock.now = datetime(2026, 3, 9, 20, 10, tzinfo=new_york).astimezone(UTC)
    pam.store.conversation.add_learner_message(learner, "hola", 2)
    clock.advance(timedelta(hours=7))
    assert rounds.run_round().planned == 1
    due = to_due(clock, pam.engine, learner)
    local = due.astimezone(new_york)
    assert (local.hour, local.minute) == (20, 10)  # their time, on their new clock
    assert rounds.run_round().outcomes == {"queued": 1}
    # Not sent after the latest time their messages vouch for (a retry, an outage).
    [part] = checkin_outbox(pam.engine, address)
    assert part.send_before == due + timedelta(minutes=1)
    # A round that comes later than that writes none.
    clock.advance(timedelta(hours=20))
    assert rounds.run_round().planned == 1
    late = to_due(clock, pam.engine, learner) + timedelta(minutes=3)
    clock.now = late
    assert rounds.run_round().outcomes == {OUTSIDE_THEIR_HOURS: 1}


# -- for operators -------------------------------------------------------------------------


def test_the_outlook_says_when_the_next_one_is_and_why_none(
    pam: Pam, clock: ManualClock, composer: FakeComposer
) -> None:
    learner = learner_who_wrote(pam, clock, telegram_address(), evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)

    assert "PAM_CHECKINS" in rounds.outlook(learner, "telegram:1", enabled=False).why
    ahead = rounds.outlook(learner, "telegram:1", enabled=True)
    assert ahead.due_at is not None and ahead.due_at.astimezone(MADRID).hour == 18
    rounds.run_round()
    planned = rounds.outlook(learner, "telegram:1", enabled=True)
    assert planned.due_at == ahead.due_at and "planned" in planned.why

    pam.store.checkins.disable("telegram:nobody", "telegram_blocked")
    fresh = pam.store.learners.learner(telegram_address())
    assert "not turned" in rounds.outlook(fresh.id, "telegram:2", enabled=True).why


WRITE = CheckinWrite(
    text="late",
    tokens=1,
    channel="telegram",
    chat_id="1",
    template=False,
    follows_up="plan",
    topic="x",
    usage=(),
)


# -- the worker's job ------------------------------------------------------------------------


def test_the_worker_runs_rounds_as_an_apscheduler_job(pam: Pam, composer: FakeComposer) -> None:
    rounds = rounds_of(pam, composer, round_seconds=45)
    scheduler = checkin_scheduler(rounds)
    [job] = scheduler.get_jobs()
    assert job.id == "checkins-due" and job.trigger.interval == timedelta(seconds=45)
    # Off for everyone: no rounds at all. On, they write with the memory composer by default.
    off = pam.settings.replace(checkin={"enabled": False})
    assert checkin_rounds(pam, off, {}, composer) is None
    built = checkin_rounds(pam, pam.settings, {})
    assert built is not None and isinstance(built.composer, MemoryComposer)


def test_planning_walks_every_learner_a_page_at_a_time(
    pam: Pam, clock: ManualClock, composer: FakeComposer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.checkins.rounds.PLAN_BATCH", 2)
    # Learners no check-in can reach (the HTTP API) first, in the way of the others.
    for n in range(3):
        learner_who_wrote(pam, clock, f"api:user-{random.random()}-{n}", [], "Europe/Madrid")
    reachable = [
        learner_who_wrote(pam, clock, telegram_address(), [], "Europe/Madrid") for _ in range(3)
    ]

    assert rounds_of(pam, composer).run_round().planned == 3
    assert all(waiting(pam.engine, learner) is not None for learner in reachable)


def test_the_rounds_write_with_the_memory_composer_end_to_end(
    pam: Pam,
    clock: ManualClock,
    fake_model: FakeChatModel,
    worker: Worker,
    telegram: RecordingSender,
) -> None:
    """The default composer (bot/checkins/compose.py) at the seam: the model's answer becomes
    Pam's turn and reaches the learner once, its call billed as a check-in."""
    address = telegram_address()
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    pam.store.learners.update_settings(learner, target_language="Spanish")
    built = checkin_rounds(pam, pam.settings, {"telegram": telegram})
    assert built is not None
    built.run_round()
    to_due(clock, pam.engine, learner)
    text = "¡Hola! ¿Qué tal tu semana?"
    fake_model.queue("checkin", json.dumps({"message": text, "topic": "week"}))

    assert built.run_round().outcomes == {"queued": 1}
    worker.drain()

    assert telegram.texts_to(address.removeprefix("telegram:")) == [text]
    assert pam.store.ledger.usage(learner)["checkin"][0] == 1
    [row] = [c for c in checkins_of(pam.engine, learner) if c.state == QUEUED]
    # Nothing remembered to follow up: a light invitation, as the composer labels it.
    assert row.follows_up == "invitation" and row.topic
