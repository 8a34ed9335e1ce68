"""The end of a turn, written once: the reply stored with its usage and corrections, the claim
finished and the reply's parts queued (the first held by the writer's caller), the jobs due."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from memory.clock import ManualClock
from memory.config import MemoryConfig
from memory.database.claims import DONE, FAILED, InboxClaim, buttons_from_json, buttons_json
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER, CorrectionRecord, LearnerGone, ReplyRecord
from memory.jobs.coordinator import FOLD
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.message_store import Store
from memory.turns import TurnWriter, Written
from tests.conftest import unique_user
from tests.support import inbound, queue_items

LEASE = 300.0


def writer(engine: Engine, clock: ManualClock, config: MemoryConfig | None = None) -> TurnWriter:
    return TurnWriter(Store(engine, clock), LEASE, config or MemoryConfig(), clock)


def claimed(engine: Engine, clock: ManualClock, user: str) -> InboxClaim:
    inbox = Inbox(engine, LEASE, clock)
    assert inbox.accept(inbound(user, "hola"))
    claim = inbox.claim_next()
    assert claim is not None
    return claim


def test_a_second_reply_to_one_message_gets_the_first_and_no_backlog(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    question, _ = store.conversation.add_learner_message(learner.id, "hola", 3)
    write = writer(engine, ManualClock()).write
    first = ReplyRecord(learner.id, question.id, "uno", 2, (), ("m", 10, 1))
    assert write(None, ["uno"], first) == Written([])
    second = ReplyRecord(
        learner.id, question.id, "dos", 2, (CorrectionRecord("a", "b"),), ("m", 20, 2)
    )
    assert write(None, ["dos"], second) == Written([], existing="uno")
    assert [m.content for m in store.conversation.messages(learner.id)] == ["hola", "uno"]
    assert store.ledger.corrections(learner.id) == []
    assert store.ledger.usage(learner.id) == {"reply": (2, 30, 3)}  # both calls' tokens were spent


def test_a_reply_for_a_forgotten_learner_raises_learner_gone(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    question, _ = store.conversation.add_learner_message(learner.id, "hola", 3)
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        reply = ReplyRecord(learner.id, question.id, "¡hola!", 2, (), ("m", 10, 1))
        writer(engine, ManualClock()).write(None, ["¡hola!"], reply)
    assert set(store.inspection.rows_about(learner.id, learner.external_id).values()) == {0}


def test_a_reply_finishes_its_claim_and_the_writer_holds_its_parts(
    store: Store, engine: Engine
) -> None:
    clock, user = ManualClock(), unique_user()
    claim = claimed(engine, clock, user)
    learner = store.learners.learner(user)
    question, _ = store.conversation.add_learner_message(learner.id, "hola", 3, inbox_id=claim.id)
    reply = ReplyRecord(learner.id, question.id, "¡hola! ¿qué tal?", 5, (), ("m", 10, 1))
    written = writer(engine, clock).write(claim, ["¡hola!", "¿qué tal?"], reply)
    assert written.held is not None and [c.text for c in written.held] == ["¡hola!", "¿qué tal?"]
    assert {c.inbox_id for c in written.held} == {claim.id}
    (item,) = queue_items(engine, InboxItem, InboxItem.id == claim.id)
    assert (item.status, item.text) == (DONE, "")
    rows = queue_items(engine, OutboxItem, OutboxItem.inbox_id == claim.id, order_by=OutboxItem.seq)
    assert [(r.text, r.lease_expires_at) for r in rows] == [
        (text, clock.now + timedelta(seconds=LEASE)) for text in ("¡hola!", "¿qué tal?")
    ]


def test_a_lost_claim_finishes_nothing_and_queues_nothing(store: Store, engine: Engine) -> None:
    clock, user = ManualClock(), unique_user()
    claim = claimed(engine, clock, user)
    clock.advance(timedelta(seconds=LEASE + 1))
    assert Inbox(engine, LEASE, clock).claim_next() is not None  # another worker took it over
    assert writer(engine, clock).write(claim, ["lo siento"], failed=True) == Written(None)
    assert queue_items(engine, OutboxItem, OutboxItem.inbox_id == claim.id) == []


def test_a_given_up_message_is_finished_failed_with_its_apology(engine: Engine) -> None:
    clock, user = ManualClock(), unique_user()
    claim = claimed(engine, clock, user)
    written = writer(engine, clock).write(claim, ["lo siento"], failed=True)
    assert written.held is not None and [c.text for c in written.held] == ["lo siento"]
    (item,) = queue_items(engine, InboxItem, InboxItem.id == claim.id)
    assert item.status == FAILED


def test_the_jobs_due_come_from_the_backlog_as_of_the_reply(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    config = MemoryConfig(window_messages=2, summary_trigger_tokens=10, fold_batch_messages=2)
    for n in range(3):
        store.conversation.add_message(learner.id, LEARNER, f"mensaje {n}", 4)
    question, _ = store.conversation.add_learner_message(learner.id, "¿y ahora?", 4)
    reply = ReplyRecord(learner.id, question.id, "ahora sí", 4, (), ("m", 10, 1))
    written = writer(engine, ManualClock(), config).write(None, ["ahora sí"], reply)
    assert written == Written([], due=(FOLD,))


@pytest.mark.parametrize("with_reply", [False, True], ids=["command", "reply"])
def test_a_chart_is_queued_with_the_first_part_and_its_claims_carry_it(
    store: Store, engine: Engine, with_reply: bool
) -> None:
    """Both ways of finishing (a command's answer alone, a reply stored with it: on Postgres
    two different statements) queue the chart with the first part only."""
    clock, user = ManualClock(), unique_user()
    claim = claimed(engine, clock, user)
    learner = store.learners.learner(user)
    chart_id, _ = store.charts.save(learner.id, b"png", "summary")
    reply = None
    if with_reply:
        question, _ = store.conversation.add_learner_message(
            learner.id, "hola", 3, inbox_id=claim.id
        )
        reply = ReplyRecord(learner.id, question.id, "uno dos", 3, (), ("m", 10, 1))
    written = writer(engine, clock).write(claim, ["uno", "dos"], reply, chart_id=chart_id)
    assert written.held is not None
    assert [c.chart_id for c in written.held] == [chart_id, None]
    rows = queue_items(engine, OutboxItem, OutboxItem.inbox_id == claim.id, order_by=OutboxItem.seq)
    assert [r.chart_id for r in rows] == [chart_id, None]


def test_a_queued_chart_comes_back_with_the_delivery_lanes_claim(
    store: Store, engine: Engine
) -> None:
    """Replies queued behind an undelivered one go to the delivery lanes: their claim, read
    from the row, carries the chart too."""
    clock, user = ManualClock(), unique_user()
    learner = store.learners.learner(user)
    chart_id, _ = store.charts.save(learner.id, b"png", "summary")
    write = writer(engine, clock).write
    first = claimed(engine, clock, user)
    earlier = write(first, ["earlier reply"]).held
    assert earlier  # held, not sent yet: the next reply waits behind it
    second = claimed(engine, clock, user)
    assert second.replies_waiting
    assert write(second, ["summary"], chart_id=chart_id).held == []
    outbox = Outbox(engine, LEASE, clock)
    assert outbox.mark_sent(earlier[0], None)
    outbox_claim = outbox.claim_next()
    assert outbox_claim is not None and outbox_claim.inbox_id == second.id
    assert (outbox_claim.text, outbox_claim.chart_id) == ("summary", chart_id)


BUTTONS = (("Traducir", "/translate 41"), ("🔊 Escuchar", "/say 41"))


@pytest.mark.parametrize("with_reply", [False, True], ids=["command", "reply"])
@pytest.mark.parametrize("speech", [None, "uno dos"], ids=["text", "spoken"])
def test_the_buttons_go_with_the_last_text_part_and_its_claims_carry_them(
    store: Store, engine: Engine, with_reply: bool, speech: str | None
) -> None:
    """Both ways of finishing (on Postgres two different statements) queue the buttons with
    the last text part only, never with the part to speak after it; the row keeps them as
    JSON [[label, command], ...]."""
    clock, user = ManualClock(), unique_user()
    claim = claimed(engine, clock, user)
    learner = store.learners.learner(user)
    reply = None
    if with_reply:
        question, _ = store.conversation.add_learner_message(
            learner.id, "hola", 3, inbox_id=claim.id
        )
        reply = ReplyRecord(learner.id, question.id, "uno dos", 3, (), ("m", 10, 1))
    written = writer(engine, clock).write(
        claim, ["uno", "dos"], reply, speech=speech, buttons=BUTTONS
    )
    assert written.held is not None
    expected = [(), BUTTONS] + ([()] if speech else [])
    assert [c.buttons for c in written.held] == expected
    rows = queue_items(engine, OutboxItem, OutboxItem.inbox_id == claim.id, order_by=OutboxItem.seq)
    stored = [json.loads(r.buttons) if r.buttons else None for r in rows]
    assert stored == [None, [list(b) for b in BUTTONS]] + ([None] if speech else [])


def test_queued_buttons_come_back_with_the_delivery_lanes_claim(
    store: Store, engine: Engine
) -> None:
    """A reply queued behind an undelivered one is claimed by a delivery lane: its claim, read
    from the row, carries the buttons too."""
    clock, user = ManualClock(), unique_user()
    write = writer(engine, clock).write
    first = claimed(engine, clock, user)
    earlier = write(first, ["earlier reply"]).held
    assert earlier
    second = claimed(engine, clock, user)
    assert write(second, ["¿Borro todo?"], buttons=[("Sí, borrar", "/forget yes 7f3a")]).held == []
    outbox = Outbox(engine, LEASE, clock)
    assert outbox.mark_sent(earlier[0], None)
    outbox_claim = outbox.claim_next()
    assert outbox_claim is not None and outbox_claim.inbox_id == second.id
    assert outbox_claim.buttons == (("Sí, borrar", "/forget yes 7f3a"),)


@pytest.mark.parametrize(
    "kept",
    [None, "", "not json", '{"a": 1}', '[["only a label"]]', '[[1, "/help"]]', '[["Help", 2]]'],
)
def test_buttons_not_kept_as_pairs_of_strings_read_as_none(kept: str | None) -> None:
    assert buttons_from_json(kept) == ()


def test_buttons_round_trip_through_their_json() -> None:
    assert buttons_from_json(buttons_json(BUTTONS)) == BUTTONS
    assert buttons_json(()) is None
