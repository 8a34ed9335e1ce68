"""What the check-in tests share: a fake composer at the seam (bot/checkins/compose.py), a
clock, a database without other tests' check-ins, Pam and a worker with recording senders, and
learners who opted in and wrote at given times."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.orm import Session

from bot.checkins.compose import CheckinDraft
from bot.checkins.rounds import CheckinRounds
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.database.models_checkins import Checkin, CheckinState
from memory.database.models_queue import InboxItem, OutboxItem
from memory.llm import Usage as Billed
from tests.fakes import FakeChatModel
from tests.support import RecordingSender
from webhooks.settings import Settings
from webhooks.wiring import build, checkin_rounds

MADRID = ZoneInfo("Europe/Madrid")
# A Friday in March 2026, mid-morning in Madrid; summer time begins there on Sunday the 29th.
START = datetime(2026, 3, 20, 9, 0, tzinfo=UTC)
DRAFT = CheckinDraft(
    text="¿Qué tal fue la entrevista del jueves?",
    follows_up="plan",
    topic="job interview",
    usage=(Billed("gpt-4o-mini", 420, 18),),
)


class FakeComposer:
    """The composer's seam, answering `answer` (a draft, None or an error to raise) and
    calling `during` as it composes (the learner writing, /forget arriving)."""

    def __init__(self) -> None:
        self.answer: CheckinDraft | Exception | None = DRAFT
        self.during: Callable[[int], None] | None = None
        self.calls: list[tuple[int, datetime]] = []
        self.lock = threading.Lock()
        self.pause = 0.0

    def compose(self, learner_id: int, now: datetime) -> CheckinDraft | None:
        with self.lock:
            self.calls.append((learner_id, now))
        if self.pause:
            time.sleep(self.pause)
        if self.during is not None:
            self.during(learner_id)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def clear_checkins(engine: Engine) -> Engine:
    """`engine` without other tests' check-ins (the Postgres schema is shared by one session's
    tests, which run one at a time): a claim takes any learner's due one."""
    with engine.begin() as connection:
        connection.execute(delete(Checkin))
        connection.execute(delete(CheckinState))
    return engine


def checkin_pam(
    settings: Settings, engine: Engine, model: FakeChatModel, clock: ManualClock
) -> Pam:
    """Pam with check-ins on, on `clock`, with memory jobs inline."""
    return build(
        settings.replace(checkin={"enabled": True, "threads": 1}),
        model=model,
        submit=lambda work: work(),
        engine=clear_checkins(engine),
        clock=clock,
    )


def rounds_of(
    pam: Pam, composer: FakeComposer, template_sid: str | None = None, **checkins: object
) -> CheckinRounds:
    """The rounds a worker runs, built as the services build them (webhooks.wiring)."""
    settings = Settings(database_url=pam.settings.database_url, llm={"api_key": "k"})
    settings = settings.replace(
        checkin={"enabled": True, "threads": 1, **checkins},
        whatsapp={"checkin_template_sid": template_sid},
    )
    senders = {"telegram": RecordingSender(), "whatsapp": RecordingSender()}
    rounds = checkin_rounds(pam, settings, senders, composer)
    assert rounds is not None
    return rounds


def telegram_address() -> str:
    return f"telegram:{random.randint(10**8, 10**10)}"


def spanish_number() -> str:
    return f"whatsapp:+346{random.randint(10**7, 10**8 - 1)}"


def learner_who_wrote(
    pam: Pam, clock: ManualClock, address: str, times: list[datetime], tz: str | None = None
) -> int:
    """A learner at `address` who opted in and wrote at `times` (then the clock is put back)."""
    now = clock.now
    learner = pam.store.learners.learner(address)
    pam.store.checkins.set_preference(learner.id, on=True)
    if tz is not None:
        pam.store.checkins.set_timezone(learner.id, tz, stated=True)
    for moment in times:
        clock.now = moment
        pam.store.conversation.add_learner_message(learner.id, "hola", 2)
        arrived(pam.engine, address, moment)
    clock.now = now
    return learner.id


def queued_checkin(
    pam: Pam, clock: ManualClock, composer: FakeComposer, address: str
) -> tuple[int, CheckinRounds, datetime]:
    """A learner in Madrid at `address` who wrote at 18:05 on six evenings, with their
    check-in planned and written, waiting in the outbox (the clock at its due time): the
    learner, the rounds, and when it was due."""
    learner = learner_who_wrote(pam, clock, address, evenings(6, 17), "Europe/Madrid")
    rounds = rounds_of(pam, composer)
    rounds.run_round()
    due = to_due(clock, pam.engine, learner)
    assert rounds.run_round().outcomes == {"queued": 1}
    return learner, rounds, due


def arrived(engine: Engine, address: str, at: datetime) -> None:
    """A message from `address` that reached the inbox at `at`, answered since."""
    channel, _, chat = address.partition(":")
    row = {"channel": channel, "platform_id": f"m-{random.random()}", "chat_id": chat}
    row |= {"address": address, "text": "hola", "status": "done", "attempts": 1}
    row |= {"received_at": at, "available_at": at, "finished_at": at}
    with engine.begin() as connection:
        connection.execute(insert(InboxItem).values(**row))


def evenings(days: int, hour_utc: int, before: datetime = START) -> list[datetime]:
    """One message at `hour_utc` on each of the `days` days before `before`."""
    return [
        (before - timedelta(days=n)).replace(hour=hour_utc, minute=5) for n in range(1, days + 1)
    ]


def waiting(engine: Engine, learner_id: int) -> Checkin | None:
    with Session(engine) as session:
        return session.scalars(
            select(Checkin).where(
                Checkin.learner_id == learner_id, Checkin.state.in_(("scheduled", "claimed"))
            )
        ).first()


def checkins_of(engine: Engine, learner_id: int) -> list[Checkin]:
    with Session(engine) as session:
        return list(
            session.scalars(
                select(Checkin).where(Checkin.learner_id == learner_id).order_by(Checkin.local_day)
            )
        )


def to_due(clock: ManualClock, engine: Engine, learner_id: int) -> datetime:
    """Move the clock to the learner's planned check-in; its due time."""
    row = waiting(engine, learner_id)
    assert row is not None, "nothing planned"
    clock.now = row.due_at + timedelta(seconds=1)
    return row.due_at


def checkin_outbox(engine: Engine, address: str) -> list[OutboxItem]:
    with Session(engine) as session:
        return list(
            session.scalars(
                select(OutboxItem).where(OutboxItem.address == address, OutboxItem.checkin)
            )
        )
