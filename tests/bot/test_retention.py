"""Retention: finished inbox and outbox items are deleted once past PAM_QUEUE_RETENTION_HOURS,
in small batches, and nothing that still matters is: unfinished items, retries, replies still
to deliver and the inbox items they answer. Real SQLite and Postgres; the cutoff is passed in
(or the rows are made old), never waited for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, event, select, update

from bot.worker import retention as retention_module
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.clock import ManualClock, utcnow
from memory.database.claims import CLAIMED, DONE, FAILED, PENDING, SENT
from memory.database.models_queue import InboxItem, OutboxItem
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import WAIT, inbound, queue_items, wait_until
from webhooks.settings import Settings
from webhooks.wiring import build

LEASE = 300.0
WEEK = timedelta(days=7)


def answered(inbox: Inbox, user: str, replies: list[str], *, pid: str = "") -> int:
    """A message accepted, claimed and answered with `replies` (queued, not yet sent)."""
    assert inbox.accept(inbound(user, "Hola", pid=pid))
    claim = inbox.claim_next()
    assert claim is not None and claim.address == user
    assert inbox.complete(claim, replies)
    return claim.id


def deliver_all(outbox: Outbox) -> None:
    """Record every queued reply as sent."""
    while (claim := outbox.claim_next()) is not None:
        assert outbox.mark_sent(claim, f"p-{claim.id}")


def ids(engine: Engine, model: type[InboxItem] | type[OutboxItem]) -> set[int]:
    """The ids of the items the queue still keeps."""
    with engine.connect() as connection:
        return set(connection.scalars(select(model.id)))


@contextmanager
def deletes(engine: Engine) -> Iterator[list[int]]:
    """The number of rows each DELETE on `engine` removed, in order."""
    counts: list[int] = []

    def record(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            counts.append(cursor.rowcount)

    event.listen(engine, "after_cursor_execute", record)
    try:
        yield counts
    finally:
        event.remove(engine, "after_cursor_execute", record)


def test_prune_deletes_only_what_finished_before_the_cutoff_and_nothing_still_needed(
    engine: Engine,
) -> None:
    inbox, outbox = Inbox(engine, LEASE), Outbox(engine, LEASE)
    alice, bob, carol = unique_user("alice"), unique_user("bob"), unique_user("carol")

    # Before the cutoff: answered and delivered (goes), answered with nothing to send (goes),
    # and a reply that failed for good (goes, with its message).
    delivered = answered(inbox, alice, ["uno", "dos"])
    deliver_all(outbox)
    silent = answered(inbox, alice, [])
    bounced = answered(inbox, bob, ["tres"])
    reply = outbox.claim_next()
    assert reply is not None
    assert outbox.fail(reply, "blocked by the user")
    # Before the cutoff, but still needed: a reply waiting for a retry, so its message stays
    # too; a message being answered; one waiting for its retry.
    waiting = answered(inbox, carol, ["cuatro"])
    retrying = outbox.claim_next()
    assert retrying is not None
    assert outbox.retry_later(retrying, 60, "429")
    dave = unique_user("dave")
    assert inbox.accept(inbound(dave, "in a turn"))
    in_turn = inbox.claim_next()
    assert in_turn is not None
    assert inbox.accept(inbound(dave, "waiting for the one in a turn", pid="dave-2"))
    [behind] = queue_items(engine, InboxItem, InboxItem.platform_id == "dave-2")
    assert inbox.accept(inbound(unique_user("erin"), "LLM down"))
    deferred = inbox.claim_next()
    assert deferred is not None
    assert inbox.retry_later(deferred, 60, "LLM unavailable")

    cutoff = utcnow()
    recent = answered(inbox, unique_user("gus"), ["cinco"])
    deliver_all(outbox)  # the retrying reply is not available yet: only gus's goes out

    before = {row.id: row.status for row in queue_items(engine, OutboxItem)}
    assert sorted(before.values()) == sorted([SENT, SENT, FAILED, PENDING, SENT])
    assert outbox.prune(cutoff) == 3  # alice's two, bob's failed one
    assert inbox.prune(cutoff) == 3  # delivered, silent, bounced

    kept_inbox = {row.id: row.status for row in queue_items(engine, InboxItem)}
    assert delivered not in kept_inbox and silent not in kept_inbox and bounced not in kept_inbox
    assert kept_inbox == {
        waiting: DONE,
        in_turn.id: CLAIMED,
        deferred.id: PENDING,
        behind.id: PENDING,
        recent: DONE,
    }
    kept_outbox = queue_items(engine, OutboxItem)
    assert [(row.inbox_id, row.status) for row in kept_outbox] == [
        (waiting, PENDING),
        (recent, SENT),
    ]

    # Once carol's reply is delivered, her message goes at the next prune.
    with engine.begin() as connection:
        connection.execute(update(OutboxItem).values(available_at=utcnow()))
    deliver_all(outbox)
    assert inbox.prune(cutoff) == 1
    assert waiting not in ids(engine, InboxItem)


def test_a_redelivery_within_the_window_is_still_recognised(engine: Engine) -> None:
    inbox, outbox = Inbox(engine, LEASE), Outbox(engine, LEASE)
    user = unique_user()
    answered(inbox, user, ["hola"], pid="update-1")
    deliver_all(outbox)
    now = utcnow()
    # A day later, well inside a week's retention: the platform's retry is a duplicate.
    assert inbox.prune(now + timedelta(days=1) - WEEK) == 0
    assert inbox.accept(inbound(user, "Hola", pid="update-1")) is False
    # Past the window the row is gone, and the id could be taken for a new message.
    assert inbox.prune(now + timedelta(seconds=1)) == 1
    assert inbox.accept(inbound(user, "Hola", pid="update-1")) is True


def test_prune_deletes_in_batches_and_stops_at_the_first_page_newer_than_the_cutoff(
    engine: Engine,
) -> None:
    inbox, outbox = Inbox(engine, LEASE), Outbox(engine, LEASE)
    users = [unique_user(f"u{n}") for n in range(3)]
    old = [answered(inbox, users[n % 3], [f"r{n}"]) for n in range(11)]
    # Mid-turn, of a learner of its own (the others' later messages must not wait for it).
    stuck = inbox.claim_next() if inbox.accept(inbound(unique_user(), "mid-turn")) else None
    assert stuck is not None
    deliver_all(outbox)
    cutoff = utcnow()
    for n in range(30):
        answered(inbox, users[n % 3], [])

    with deletes(engine) as counts:
        assert inbox.prune(cutoff, batch=4) == 11
    assert counts and max(counts) <= 4
    # 12 old rows make 3 pages; the 4th starts after the cutoff and ends the walk, long
    # before the 30 newer rows' other pages.
    assert len(counts) == 4
    assert set(old).isdisjoint(ids(engine, InboxItem))
    assert stuck.id in ids(engine, InboxItem)
    assert len(ids(engine, InboxItem)) == 31

    with deletes(engine) as counts:
        assert outbox.prune(cutoff, batch=4) == 11
    assert max(counts) <= 4 and len(counts) == 3
    assert ids(engine, OutboxItem) == set()


def test_the_worker_prunes_past_its_retention_setting(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    clock = ManualClock()
    # The chat history's own window is off: another test's backdated messages, in the
    # schema this session shares, are not this test's to count.
    queues_only = settings.replace(service={"queue_retention_hours": 24, "chat_retention_days": 0})
    worker = worker_on(clock, queues_only, engine, fake_model)
    item = answered(worker.inbox, unique_user(), ["hola"])
    deliver_all(worker.outbox)
    clock.advance(timedelta(hours=23))
    assert worker.retention.prune() == 0
    clock.advance(timedelta(hours=1, seconds=1))
    assert worker.retention.prune() == 2
    assert item not in ids(engine, InboxItem)
    assert ids(engine, OutboxItem) == set()


def test_an_id_pruned_with_the_whole_queue_is_never_given_again(engine: Engine) -> None:
    # A quiet week prunes every row, the newest too. An id handed out again would meet what
    # still names the old one: the turn's stored message (messages.inbox_id, how a retried
    # turn knows it already ran) and the reply ids that callbacks use as idempotency keys.
    inbox, outbox = Inbox(engine, LEASE), Outbox(engine, LEASE)
    first = answered(inbox, unique_user(), ["hola"])
    deliver_all(outbox)
    [reply] = ids(engine, OutboxItem)
    later = utcnow() + timedelta(seconds=1)
    assert outbox.prune(later) == 1 and inbox.prune(later) == 1
    assert ids(engine, InboxItem) == set() and ids(engine, OutboxItem) == set()

    again = answered(inbox, unique_user(), ["otra vez"])
    deliver_all(outbox)

    assert again > first
    assert min(ids(engine, OutboxItem)) > reply


def test_retention_zero_keeps_everything(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    clock = ManualClock()
    keep_all = settings.replace(service={"queue_retention_hours": 0, "chat_retention_days": 0})
    worker = worker_on(clock, keep_all, engine, fake_model)
    answered(worker.inbox, unique_user(), [])
    clock.advance(timedelta(days=3650))
    assert worker.retention.prune() == 0
    assert len(ids(engine, InboxItem)) == 1


def test_a_running_worker_prunes_now_and_then(
    pam: Pam, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention_module, "PRUNE_EVERY_SECONDS", 0.01)
    inbox = Inbox(engine, LEASE)
    gone = answered(inbox, unique_user(), [])
    assert inbox.accept(inbound(unique_user(), "still waiting"))
    make_old(engine, gone, WEEK + timedelta(hours=1))
    worker = Worker(with_retention(pam, 168), {})
    worker.retention.start()  # what `start` does besides the lanes
    try:
        wait_until(lambda: gone not in ids(engine, InboxItem), "the worker to prune")
    finally:
        assert worker.stop(WAIT), "the pruning thread ends with the worker"
    assert [row.status for row in queue_items(engine, InboxItem)] == [PENDING]


@pytest.mark.parametrize("hours", [1, 12, 23.5])
def test_a_window_shorter_than_a_day_is_refused_with_the_reason(hours: float) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(service={"queue_retention_hours": hours})
    message = str(refused.value)
    assert "PAM_QUEUE_RETENTION_HOURS" in message and "at least 24" in message
    assert "redeliver" in message


def test_retention_settings_accept_a_day_or_more_and_zero() -> None:
    assert Settings().service.queue_retention_hours == 168
    assert Settings(service={"queue_retention_hours": 24}).service.queue_retention_hours == 24
    assert Settings(service={"queue_retention_hours": 0}).service.queue_retention_hours == 0


def worker_on(
    clock: ManualClock, settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> Worker:
    """A worker whose queues and retention go by `clock`."""
    pam = build(settings, model=fake_model, submit=lambda w: w(), engine=engine, clock=clock)
    return Worker(pam, {})


def with_retention(pam: Pam, hours: float) -> Pam:
    """`pam` with another retention window (Settings is frozen)."""
    pam.settings = pam.settings.replace(service={"queue_retention_hours": hours})
    return pam


def make_old(engine: Engine, inbox_id: int, age: timedelta) -> None:
    """Age an inbox item as if it had been received and answered `age` ago."""
    then: datetime = utcnow() - age
    with engine.begin() as connection:
        connection.execute(
            update(InboxItem)
            .where(InboxItem.id == inbox_id)
            .values(received_at=then, finished_at=then)
        )


@pytest.mark.parametrize("hours", [0, 168])
def test_a_worker_prunes_charts_once_their_links_have_expired(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, hours: float
) -> None:
    """Whatever the queues' window (0 keeps queue items forever), a chart goes once no link
    to it works any more."""
    clock = ManualClock()
    settings = settings.replace(
        service={"queue_retention_hours": hours}, charts={"chart_link_seconds": 3600}
    )
    worker = worker_on(clock, settings, engine, fake_model)
    charts = worker.pam.store.charts
    learner = worker.pam.store.learners.learner(unique_user())
    old = charts.save(learner.id, b"old", "")
    clock.advance(timedelta(minutes=30))
    new = charts.save(learner.id, b"new", "")
    clock.advance(timedelta(minutes=31))
    assert worker.retention.prune() >= 1
    assert charts.get(*old) is None
    assert charts.get(*new) == (b"new", learner.id)
