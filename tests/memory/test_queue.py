"""The durable inbox and outbox: dedup, per-address order, exclusive claims, leases, retries."""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.orm import Session

from memory.clock import ManualClock, utcnow
from memory.database import db
from memory.database.claims import (
    CLAIMED,
    DONE,
    FAILED,
    PENDING,
    SENT,
    InboxClaim,
    Lease,
    OutboxClaim,
    Standing,
)
from memory.database.models_queue import InboxItem, OutboxItem
from memory.messages import VoiceNote
from memory.queue.base import Queue
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.support import WAIT, inbound, queue_items

LONG_LEASE = 300.0


def inbox_row(engine: Engine, item_id: int) -> InboxItem:
    with Session(engine) as session:
        row = session.get(InboxItem, item_id)
        assert row is not None
        session.expunge(row)
        return row


def outbox_rows(engine: Engine, inbox_id: int) -> list[OutboxItem]:
    return queue_items(engine, OutboxItem, OutboxItem.inbox_id == inbox_id, order_by=OutboxItem.seq)


def inbox_ids(engine: Engine, address: str) -> list[int]:
    with Session(engine) as session:
        return list(
            session.scalars(
                select(InboxItem.id).where(InboxItem.address == address).order_by(InboxItem.id)
            )
        )


C = TypeVar("C", bound=Lease)


def claim(queue: Queue[C]) -> C:
    claimed = queue.claim_next()
    assert claimed is not None, "expected something to claim"
    return claimed


def make_available_now(engine: Engine, model: type[InboxItem] | type[OutboxItem], id: int) -> None:
    """Skip a retry delay (instead of sleeping through it)."""
    with engine.begin() as connection:
        connection.execute(update(model).where(model.id == id).values(available_at=utcnow()))


# -- accept -----------------------------------------------------------------------------------


def test_accept_persists_and_recognises_a_redelivery(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    user = unique_user()
    first = inbound(user, "Hola, ¿qué tal? 🇪🇸", pid="m-1")
    assert inbox.accept(first) is True
    assert inbox.accept(first) is False
    assert inbox.accept(inbound(user, "another text, same id", pid="m-1")) is False
    assert inbox.accept(inbound(user, "same id, other channel", channel="other", pid="m-1"))
    ids = inbox_ids(engine, user)
    assert len(ids) == 2
    row = inbox_row(engine, ids[0])
    assert (row.channel, row.platform_id, row.text, row.status, row.attempts) == (
        "test",
        "m-1",
        "Hola, ¿qué tal? 🇪🇸",
        PENDING,
        0,
    )
    assert inbox.counts() == {PENDING: 2}


def test_lone_surrogates_are_stored_as_replacement_characters(engine: Engine) -> None:
    """JSON's escapes can carry half of a UTF-16 pair, which neither database can store (nor
    UTF-8 encode): each becomes U+FFFD, in every field, a voice note's included, so the
    message is kept and the webhook answers 2xx instead of a 500 the platform redelivers."""
    inbox = Inbox(engine, LONG_LEASE)
    user = unique_user()
    note = VoiceNote(ref="AwAC\ud83d", content_type="audio/\udc00ogg", seconds=3.0)
    message = replace(
        inbound(user, "hola \ud83d", pid="m-\udc00"),
        chat_id="chat-\ud800",
        display_name="Lena \ud83d",
        kind="voice",
        voice=note,
    )
    assert inbox.accept(message)
    assert not inbox.accept(message)  # a redelivery is still recognised

    [row] = queue_items(engine, InboxItem, InboxItem.address == user)
    assert (row.platform_id, row.chat_id, row.display_name, row.text) == (
        "m-\ufffd",
        "chat-\ufffd",
        "Lena \ufffd",
        "hola \ufffd",
    )
    assert VoiceNote.from_json(row.voice) == replace(
        note, ref="AwAC\ufffd", content_type="audio/\ufffdogg"
    )


# -- order per address ------------------------------------------------------------------------


def test_an_address_waits_while_its_older_item_is_pending_or_claimed(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    alice, bob = unique_user("alice"), unique_user("bob")
    for text in ("a1", "a2"):
        assert inbox.accept(inbound(alice, text))
    assert inbox.accept(inbound(bob, "b1"))

    a1 = claim(inbox)
    assert (a1.address, a1.text, a1.attempts) == (alice, "a1", 1)
    b1 = claim(inbox)  # a2 waits behind the claimed a1; bob goes ahead
    assert (b1.address, b1.text) == (bob, "b1")
    assert inbox.claim_next() is None

    # Handed back for later, a1 is pending but not yet available: a2 still waits.
    assert inbox.retry_later(a1, 60, "LLM hiccup")
    assert inbox.claim_next() is None

    make_available_now(engine, InboxItem, a1.id)
    again = claim(inbox)
    assert (again.id, again.attempts) == (a1.id, 2)
    assert inbox.complete(again, ["reply to a1"])
    a2 = claim(inbox)
    assert (a2.address, a2.text) == (alice, "a2")
    assert inbox.complete(a2, [])
    assert inbox.complete(b1, [])
    assert inbox.claim_next() is None


def test_a_failed_item_does_not_block_its_address(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    user = unique_user()
    inbox.accept(inbound(user, "first"))
    inbox.accept(inbound(user, "second"))
    assert inbox.complete(claim(inbox), ["sorry"], failed=True)
    assert claim(inbox).text == "second"


def test_complete_finishes_the_item_and_queues_its_replies_in_order(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    user = unique_user()
    inbox.accept(inbound(user, "Hola"))
    item = claim(inbox)
    assert inbox.complete(item, ["uno", "dos", "tres"])
    row = inbox_row(engine, item.id)
    assert (row.status, row.text, row.claim_token, row.lease_expires_at) == (DONE, "", None, None)
    assert row.finished_at is not None
    replies = outbox_rows(engine, item.id)
    assert [(r.seq, r.text, r.status, r.address) for r in replies] == [
        (0, "uno", PENDING, user),
        (1, "dos", PENDING, user),
        (2, "tres", PENDING, user),
    ]
    assert {(r.channel, r.chat_id) for r in replies} == {("test", item.chat_id)}
    assert inbox.complete(item, ["again"]) is False, "a finished item cannot be completed twice"
    assert len(outbox_rows(engine, item.id)) == 3


# -- exclusive claims ------------------------------------------------------------------------


def claim_everything(queues: list[Inbox], expected: int, threads: int) -> list[InboxClaim]:
    """Run `threads` threads, spread over `queues`, claiming and completing until `expected`
    items were claimed in total. Returns every claim, in the order they were made."""
    claims: list[InboxClaim] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work(queue: Inbox) -> None:
        try:
            start.wait(WAIT)
            while True:
                with lock:
                    if len(claims) >= expected or errors:
                        return
                item = queue.claim_next()
                if item is None:
                    continue  # on SQLite a lost compare-and-set reads as "nothing": try again
                with lock:
                    claims.append(item)
                assert queue.complete(item, [f"re: {item.text}"])
        except BaseException as exc:
            with lock:
                errors.append(exc)

    runners = [
        threading.Thread(target=work, args=(queues[n % len(queues)],), daemon=True)
        for n in range(threads)
    ]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(WAIT * 2)
    assert not any(r.is_alive() for r in runners), "claimers did not finish"
    assert not errors, errors
    return claims


def test_two_engines_and_eight_threads_claim_each_item_exactly_once(
    engine: Engine, database_url: str
) -> None:
    other = db.make_engine(database_url)  # a second process's connection pool
    try:
        queues = [Inbox(engine, LONG_LEASE), Inbox(other, LONG_LEASE)]
        users = [unique_user(f"u{n}") for n in range(8)]
        for user in users:  # known learners: their finished items keep their address
            Store(engine).learners.learner(user)
        for n in range(48):  # six messages per address, interleaved
            assert queues[n % 2].accept(inbound(users[n % 8], f"{users[n % 8]} #{n // 8}"))
        claims = claim_everything(queues, expected=48, threads=8)
    finally:
        other.dispose()

    assert len(claims) == 48
    counts = Counter(c.id for c in claims)
    assert set(counts.values()) == {1}, "an item was claimed twice"
    assert sorted(counts) == sorted(i for u in users for i in inbox_ids(engine, u))
    assert {c.attempts for c in claims} == {1}
    for user in users:  # an address's items were claimed in arrival order
        assert [c.text for c in claims if c.address == user] == [f"{user} #{k}" for k in range(6)]
    for item in claims:
        assert [r.text for r in outbox_rows(engine, item.id)] == [f"re: {item.text}"]


def test_outbox_claims_from_two_engines_never_deliver_twice(
    engine: Engine, database_url: str
) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    users = [unique_user(f"u{n}") for n in range(4)]
    for n in range(12):
        inbox.accept(inbound(users[n % 4], f"m{n}"))
    while (item := inbox.claim_next()) is not None:
        assert inbox.complete(item, [f"{item.address} {item.text} a", f"{item.address} b"])

    other = db.make_engine(database_url)
    sent: list[OutboxClaim] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def deliver(outbox: Outbox) -> None:
        try:
            while True:
                with lock:
                    if len(sent) >= 24:
                        return
                reply = outbox.claim_next()
                if reply is None:
                    continue
                with lock:
                    sent.append(reply)
                assert outbox.mark_sent(reply, None)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    try:
        outboxes = [Outbox(engine, LONG_LEASE), Outbox(other, LONG_LEASE)]
        runners = [
            threading.Thread(target=deliver, args=(outboxes[n % 2],), daemon=True) for n in range(8)
        ]
        for runner in runners:
            runner.start()
        for runner in runners:
            runner.join(WAIT * 2)
        assert not any(r.is_alive() for r in runners)
    finally:
        other.dispose()
    assert not errors, errors
    assert len(sent) == 24 and len({s.id for s in sent}) == 24
    for user in users:  # each address's replies went out in the order they were queued
        mine = [s.id for s in sent if s.address == user]
        assert mine == sorted(mine)


# -- leases --------------------------------------------------------------------------------


def test_an_expired_lease_makes_the_item_claimable_again_and_voids_the_old_claim(
    engine: Engine,
) -> None:
    clock = ManualClock()
    inbox = Inbox(engine, LONG_LEASE, clock)
    user = unique_user()
    inbox.accept(inbound(user, "Hola"))
    first = claim(inbox)
    assert first.attempts == 1
    assert inbox_row(engine, first.id).status == CLAIMED

    clock.advance(timedelta(seconds=LONG_LEASE + 1))
    second = claim(inbox)
    assert second.id == first.id
    assert second.attempts == 2
    assert second.token != first.token

    # The first worker wakes up and tries to finish: it lost the claim, nothing is written.
    assert inbox.complete(first, ["stale reply"]) is False
    assert outbox_rows(engine, first.id) == []
    assert inbox.retry_later(first, 0, "stale") is False
    assert inbox_row(engine, first.id).attempts == 2

    assert inbox.complete(second, ["fresh reply"]) is True
    assert [r.text for r in outbox_rows(engine, first.id)] == ["fresh reply"]
    assert inbox_row(engine, first.id).status == DONE


def test_each_queue_claims_its_own_type_under_one_lease(engine: Engine) -> None:
    """An inbox claim carries the message and its learner, an outbox claim the part and what
    goes with it; both are a Lease, which renewing and giving back take alike."""
    inbox, outbox = Inbox(engine, LONG_LEASE), Outbox(engine, LONG_LEASE)
    user = unique_user()
    note = VoiceNote("file-7", "audio/ogg", 3.0, 2048)
    assert inbox.accept(replace(inbound(user, ""), kind="voice", voice=note))
    message = claim(inbox)
    assert isinstance(message, InboxClaim) and isinstance(message, Lease)
    assert (message.kind, message.voice, message.learner) == ("voice", note, None)
    assert inbox.complete(message, ["¿Me lo repites?"])
    part = claim(outbox)
    assert isinstance(part, OutboxClaim) and isinstance(part, Lease)
    assert (part.inbox_id, part.text, part.speak) == (message.id, "¿Me lo repites?", False)
    assert not inbox.renew(message)  # answered: its claim ended with it
    assert outbox.renew(part) and outbox.retry_later(part, 0, "later")


def test_a_claims_standing_says_held_lost_or_forgotten(engine: Engine) -> None:
    """What a holder finds when it looks again after slow work (a chart drawn): its claim
    still held (and renewed), taken over once the lease ran out, or gone with its learner."""
    clock = ManualClock()
    inbox, outbox = Inbox(engine, LONG_LEASE, clock), Outbox(engine, LONG_LEASE, clock)
    store = Store(engine, clock)
    user = unique_user()
    learner = store.learners.learner(user, "Lena")
    inbox.accept(inbound(user, "Hola"))
    first = claim(inbox)
    assert inbox.standing(first) is Standing.HELD
    clock.advance(timedelta(seconds=LONG_LEASE - 1))
    assert inbox.standing(first) is Standing.HELD  # renewed: not claimable a second later
    clock.advance(timedelta(seconds=2))
    assert inbox.claim_next() is None
    clock.advance(timedelta(seconds=LONG_LEASE))
    second = claim(inbox)
    assert inbox.standing(first) is Standing.LOST
    assert inbox.complete(second, ["¡Hola!"])
    reply = claim(outbox)
    assert outbox.standing(reply) is Standing.HELD
    assert store.learners.forget(learner.id)
    assert outbox.standing(reply) is Standing.FORGOTTEN


def test_an_unexpired_lease_is_not_claimable(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    inbox.accept(inbound(unique_user(), "Hola"))
    item = claim(inbox)
    assert inbox.claim_next() is None
    row = inbox_row(engine, item.id)
    assert row.lease_expires_at is not None and row.lease_expires_at > utcnow()


def test_retry_later_delays_availability_and_records_the_error(engine: Engine) -> None:
    inbox = Inbox(engine, LONG_LEASE)
    inbox.accept(inbound(unique_user(), "Hola"))
    item = claim(inbox)
    before = utcnow()
    assert inbox.retry_later(item, 120, "RuntimeError: " + "x" * 500)
    row = inbox_row(engine, item.id)
    assert row.status == PENDING and row.claim_token is None
    assert row.available_at >= before + timedelta(seconds=120)
    assert row.last_error is not None and row.last_error.startswith("RuntimeError: ")
    assert len(row.last_error) == 300
    assert row.text == "Hola", "a message waiting for a retry keeps its text"
    assert inbox.claim_next() is None

    assert inbox.retry_later(item, 0, "again") is False, "the claim was given back already"
    make_available_now(engine, InboxItem, item.id)
    again = claim(inbox)
    assert (again.id, again.attempts, again.text) == (item.id, 2, "Hola")


# -- outbox ------------------------------------------------------------------------------


def queued_replies(engine: Engine, user: str, replies: list[str]) -> int:
    """Accept and answer one message of `user` with `replies`; returns its inbox id."""
    inbox = Inbox(engine, LONG_LEASE)
    inbox.accept(inbound(user, "Hola"))
    item = claim(inbox)
    assert inbox.complete(item, replies)
    return item.id


def test_outbox_delivers_an_address_in_order(engine: Engine) -> None:
    alice, bob = unique_user("alice"), unique_user("bob")
    queued_replies(engine, alice, ["a1", "a2"])
    queued_replies(engine, bob, ["b1"])
    outbox = Outbox(engine, LONG_LEASE)
    a1 = claim(outbox)
    assert a1.text == "a1" and a1.address == alice
    assert claim(outbox).text == "b1"
    assert outbox.claim_next() is None, "a2 waits until a1 is delivered"
    assert outbox.retry_later(a1, 60, "rate limited")
    assert outbox.claim_next() is None, "a2 waits while a1 waits for its retry"
    make_available_now(engine, OutboxItem, a1.id)
    assert claim(outbox).text == "a1"


def test_mark_sent_records_the_delivery_and_clears_the_text(engine: Engine) -> None:
    inbox_id = queued_replies(engine, unique_user(), ["¡Hola! 👋"])
    outbox = Outbox(engine, LONG_LEASE)
    reply = claim(outbox)
    assert (reply.text, reply.inbox_id, reply.attempts) == ("¡Hola! 👋", inbox_id, 1)
    assert outbox.mark_sent(reply, "platform-42")
    [row] = outbox_rows(engine, inbox_id)
    assert (row.status, row.text, row.platform_message_id) == (SENT, "", "platform-42")
    assert row.sent_at is not None and row.claim_token is None
    assert outbox.mark_sent(reply, "platform-43") is False
    assert outbox.claim_next() is None


def test_fail_records_the_error_and_is_never_retried(engine: Engine) -> None:
    inbox_id = queued_replies(engine, unique_user(), ["¡Hola!"])
    outbox = Outbox(engine, LONG_LEASE)
    reply = claim(outbox)
    assert outbox.fail(reply, "blocked by the user")
    [row] = outbox_rows(engine, inbox_id)
    assert (row.status, row.last_error, row.text, row.sent_at) == (
        FAILED,
        "blocked by the user",
        "",
        None,
    )
    assert outbox.claim_next() is None
    assert outbox.counts().get(FAILED) == 1


def test_an_expired_delivery_lease_is_claimed_again_with_the_same_item(engine: Engine) -> None:
    inbox_id = queued_replies(engine, unique_user(), ["¡Hola!"])
    clock = ManualClock()
    outbox = Outbox(engine, LONG_LEASE, clock)
    first = claim(outbox)
    clock.advance(timedelta(seconds=LONG_LEASE + 1))
    second = claim(outbox)
    assert (second.id, second.attempts, second.text) == (first.id, 2, "¡Hola!")
    assert outbox.mark_sent(first, None) is False
    assert outbox.mark_sent(second, None) is True
    assert [r.status for r in outbox_rows(engine, inbox_id)] == [SENT]


# -- scale: finished items pile up ----------------------------------------------------------


def query_plan(engine: Engine, query: Any) -> str:
    """The database's plan for `query` (with its values inlined)."""
    sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    with engine.connect() as connection:
        return "\n".join(str(row) for row in connection.exec_driver_sql(explain + sql))


@pytest.mark.parametrize("queue", [Inbox, Outbox])
def test_a_claim_reads_only_unfinished_items_however_many_are_finished(
    engine: Engine, queue: type[Inbox] | type[Outbox]
) -> None:
    """Finished items stay (a redelivery must still be recognised) and pile up for as long as
    Pam runs; the claim must go through the partial indexes over unfinished items instead of
    reading past all of them. (Measured before they existed: 20 ms a claim at 200,000.)"""
    model = queue.model
    finished = "done" if model is InboxItem else "sent"
    rows = [
        {"address": f"t:{n % 500}", "chat_id": "x", "text": "", "status": finished}
        | ({"channel": "t", "platform_id": f"old-{n}"} if model is InboxItem else {"channel": "t"})
        for n in range(20_000)
    ]
    rows += [
        {**row, "status": "pending", "address": f"t:new-{n}"} for n, row in enumerate(rows[:3])
    ]
    if model is InboxItem:
        rows[-3:] = [{**row, "platform_id": f"new-{n}"} for n, row in enumerate(rows[-3:])]
    with engine.begin() as connection:
        connection.execute(insert(model), rows)
        connection.exec_driver_sql("ANALYZE")
    plan = query_plan(engine, queue(engine, LONG_LEASE).next_item_query(func.current_timestamp()))
    # Every read of the table goes through a partial index (a bitmap heap scan follows one),
    # or looks one row up by its id; the first item of each address is walked in a CTE.
    reads = [line for line in plan.splitlines() if re.search(r"Scan|SCAN|SEARCH", line)]
    not_the_table = r"Bitmap Heap Scan|CONSTANT ROW|SCAN heads|(CTE|WorkTable|Subquery) Scan"
    reads = [line for line in reads if not re.search(not_the_table, line)]
    by_id = r"SEARCH \w+ USING INTEGER PRIMARY KEY \(rowid=\?\)|Index Scan using pk_"
    assert reads and all("_unfinished_" in line or re.search(by_id, line) for line in reads), plan


def test_an_inbox_claim_brings_the_learner_of_its_address(engine: Engine) -> None:
    """So the turn need not look them up: the learner as stored, only theirs, or None."""
    inbox, store = Inbox(engine, LONG_LEASE), Store(engine)
    known, new = unique_user("known"), unique_user("new")
    learner = store.learners.learner(known, "Lena")
    store.learners.update_settings(learner.id, target_language="es", level="A2")
    for address in (known, new):
        assert inbox.accept(inbound(address, "Hola"))
    first, second = claim(inbox), claim(inbox)
    assert first.address == known and first.learner == store.learners.find_learner(known)
    assert first.learner is not None and first.learner.level == "A2"
    assert second.address == new and second.learner is None
