"""The worker: exactly one reply per message in per-learner order, crash recovery through
leases, retries of turns and deliveries, /forget through the queue, and the API callback."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from bot import phrases
from bot.backoff import MAX_BACKOFF_SECONDS, backoff
from bot.channels import PermanentSendError, Sender, TransientSendError
from bot.turn import forgetting
from bot.worker.answering import LLM_TURN_ATTEMPTS
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory import metrics
from memory.clock import Clock, ManualClock, utcnow
from memory.database import db
from memory.database.claims import DONE, FAILED, PENDING, SENT
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER, PAM
from memory.llm import ChatMessage
from memory.messages import Sent
from tests.conftest import unique_user
from tests.fakes import ENDINGS, FakeChatModel, failing, fresh_ending, reply_json
from tests.helpers.queues import make_available_now, outbox_rows
from tests.support import (
    API_TOKEN,
    WAIT,
    RecordingSender,
    claim_eventually,
    handle,
    inbound,
    outlive,
    queue_items,
    wait_until,
)
from webhooks.api.sender import ApiCallbackSender
from webhooks.app import create_app
from webhooks.settings import Settings
from webhooks.wiring import build, senders

CHANNEL = "test"


def reply_to(text: str, turn: int = 0) -> str:
    """The fake's reply to `text`, its learner's `turn`-th (0 first): the message it answers,
    so that each reply tells which message it was for, and an ending that is not the one of
    the learner's previous reply (a reply that only says the learner's message or Pam's last
    reply back is no reply)."""
    return f"re: {text} {ENDINGS[turn % 2]}"


def echo(messages: Sequence[ChatMessage]) -> str:
    """A reply naming the message it answers, so order and pairing can be checked."""
    return reply_json(f"re: {messages[-1]['content']} {fresh_ending(messages)}")


@pytest.fixture
def fake_model() -> FakeChatModel:
    fake = FakeChatModel()
    fake.defaults["reply"] = echo
    return fake


def pam_with(
    settings: Settings,
    engine: Engine,
    fake: FakeChatModel,
    clock: Clock = utcnow,
    **knobs: object,
) -> Pam:
    """Pam with inline memory jobs, some settings changed, and its leases on `clock`."""
    return build(
        settings.replace(**knobs), model=fake, submit=lambda w: w(), engine=engine, clock=clock
    )


def worker_for(pam: Pam, sender: Sender | None) -> Worker:
    return Worker(pam, {CHANNEL: sender} if sender is not None else {})


def chat_of(user: str) -> str:
    return inbound(user).chat_id


def conversation(pam: Pam, user: str) -> list[tuple[str, str]]:
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    return [(m.role, m.content) for m in pam.store.conversation.messages(learner.id)]


def inbox_rows(engine: Engine, address: str) -> list[InboxItem]:
    return queue_items(engine, InboxItem, InboxItem.address == address)


def inbox_rows_by_id(engine: Engine, ids: Sequence[int]) -> list[InboxItem]:
    """Inbox rows by id: finished items of a forgotten or never-known learner name nobody."""
    return queue_items(engine, InboxItem, InboxItem.id.in_(ids))


# -- exactly one reply, in order ----------------------------------------------------------


def test_every_message_gets_one_reply_in_order_per_learner(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    worker = worker_for(pam, sender)
    users = [unique_user(f"learner{n}") for n in range(3)]
    for k in range(4):  # interleaved: learner0 #0, learner1 #0, learner2 #0, learner0 #1, ...
        for user in users:
            assert worker.inbox.accept(inbound(user, f"{user} mensaje {k}"))
    assert worker.drain() == 12  # 12 turns, each sending its own reply

    for user in users:
        texts = [f"{user} mensaje {k}" for k in range(4)]
        assert sender.texts_to(chat_of(user)) == [reply_to(t, n) for n, t in enumerate(texts)]
        assert conversation(pam, user) == [
            pair for n, t in enumerate(texts) for pair in ((LEARNER, t), (PAM, reply_to(t, n)))
        ]
    assert len(sender.calls) == 12
    assert len(fake_model.of("reply")) == 12
    assert worker.inbox.counts() == {DONE: 12}
    assert worker.outbox.counts() == {SENT: 12}


def test_a_duplicate_delivery_is_answered_once(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    message = inbound(user, "Hola, yo es Lena")
    assert worker.inbox.accept(message)
    assert not worker.inbox.accept(message)
    worker.drain()
    assert not worker.inbox.accept(message), "still recognised after it was answered"
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("Hola, yo es Lena")]
    assert len(fake_model.of("reply")) == 1


def test_two_workers_on_two_engines_answer_each_message_once_in_order(
    settings: Settings,
    engine: Engine,
    database_url: str,
    fake_model: FakeChatModel,
    sender: RecordingSender,
) -> None:
    """Two worker "processes" (separate engines), two lanes each, sharing one database."""
    other_engine = db.make_engine(database_url)
    first = worker_for(pam_with(settings, engine, fake_model), sender)
    second = worker_for(pam_with(settings, other_engine, fake_model), sender)
    users = [unique_user(f"learner{n}") for n in range(4)]
    expected = {user: [f"{user} #{k}" for k in range(5)] for user in users}
    for k in range(5):
        for user in users:
            first.inbox.accept(inbound(user, f"{user} #{k}"))

    errors: list[BaseException] = []

    def finished() -> bool:
        inbox, outbox = first.inbox.counts(), first.outbox.counts()
        return inbox == {DONE: 20} and outbox == {SENT: 20}

    def lane(worker: Worker) -> None:
        try:
            while not finished() and not errors:
                worker.answer_next() or worker.deliver_next()
        except BaseException as exc:
            errors.append(exc)

    lanes = [threading.Thread(target=lane, args=(w,), daemon=True) for w in (first, second) * 2]
    try:
        for thread in lanes:
            thread.start()
        for thread in lanes:
            thread.join(WAIT * 2)
        assert not any(t.is_alive() for t in lanes), "the lanes did not finish"
    finally:
        other_engine.dispose()
    assert not errors, errors
    assert len(sender.calls) == 20
    assert len(fake_model.of("reply")) == 20
    for user, texts in expected.items():
        assert sender.texts_to(chat_of(user)) == [reply_to(t, n) for n, t in enumerate(texts)]


def test_an_llm_failure_is_retried_from_the_inbox_and_answered_for_real(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    fake_model.queue("reply", failing())
    worker.inbox.accept(inbound(user, "Hola"))
    before = utcnow()
    worker.drain()
    [row] = inbox_rows(engine, user)
    assert (row.status, row.attempts) == (PENDING, 1)
    assert row.available_at > before, "retried after a backoff, not at once"
    assert row.last_error is not None and row.last_error.startswith("LLM unavailable")
    assert sender.calls == [], "no apology while the turn can still be retried"

    make_available_now(engine, InboxItem)
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("Hola")]
    assert conversation(pam, user) == [
        (LEARNER, "Hola"),
        (PAM, reply_to("Hola")),
    ], "the retried turn stored the learner's message once"


def test_an_llm_outage_is_answered_with_an_apology_and_the_message_is_kept(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    fake_model.queue("reply", *[failing() for _ in range(LLM_TURN_ATTEMPTS)])
    worker.inbox.accept(inbound(user, "Hola"))
    for _ in range(LLM_TURN_ATTEMPTS):
        assert sender.calls == []
        make_available_now(engine, InboxItem)
        worker.drain()
    assert len(fake_model.of("reply")) == LLM_TURN_ATTEMPTS
    assert sender.texts_to(chat_of(user)) == [phrases.apology(None)]
    assert conversation(pam, user) == [(LEARNER, "Hola")]
    assert [row.status for row in inbox_rows(engine, user)] == [DONE]


# -- crashes and failed turns -------------------------------------------------------------


def test_a_turn_that_crashed_mid_way_is_answered_once_without_a_second_llm_call(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    clock = ManualClock()
    worker = worker_for(pam := pam_with(settings, engine, fake_model, clock), sender)
    user = unique_user()
    worker.inbox.accept(inbound(user, "Ayer yo va al cine"))

    # A worker claims the message, runs the turn (the reply is stored)... and dies.
    crashed = worker.inbox.claim_next()
    assert crashed is not None
    replies = handle(pam, user, crashed.text, inbox_id=crashed.id)
    assert replies == [reply_to("Ayer yo va al cine")]
    assert len(fake_model.of("reply")) == 1

    # Its lease expires; another worker picks the message up again.
    outlive(clock, worker.inbox.lease)
    assert worker.answer_next()
    worker.drain()

    assert sender.texts_to(chat_of(user)) == replies
    assert len(fake_model.of("reply")) == 1, "the stored reply was reused"
    assert conversation(pam, user) == [(LEARNER, "Ayer yo va al cine"), (PAM, replies[0])]
    [item] = inbox_rows(engine, user)
    assert (item.status, item.attempts) == (DONE, 2)
    assert not worker.inbox.complete(crashed, replies), "the dead worker's claim is void"
    assert len(outbox_rows(engine, user)) == 1


class Gate:
    """A callable that reports it was called, then blocks until released."""

    def __init__(self, result: Callable[..., object]) -> None:
        self.result = result
        self.called = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.called.set()
        assert self.release.wait(WAIT), "the test never released the gate"
        return self.result(*args, **kwargs)


class Background(threading.Thread):
    """Runs `step` once on a thread, keeping its result or exception."""

    def __init__(self, step: Callable[[], bool]) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.result: bool | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.step()
        except BaseException as exc:
            self.error = exc

    def finish(self) -> bool | None:
        self.join(WAIT)
        assert not self.is_alive(), "the step never finished"
        if self.error is not None:
            raise self.error
        return self.result


@dataclass
class GatedSender:
    """A Sender whose every send goes through `gate`."""

    gate: Gate
    max_chars: int = 4096

    def length(self, text: str) -> int:
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        sent = self.gate(chat_id, text, idempotency_key=idempotency_key)
        assert isinstance(sent, Sent)
        return sent


def lease_of(engine: Engine, model: type[InboxItem] | type[OutboxItem], item_id: int) -> datetime:
    """The committed lease expiry of a claimed item."""
    with Session(engine) as session:
        lease = session.scalar(select(model.lease_expires_at).where(model.id == item_id))
        assert lease is not None, "the item is not claimed"
        return lease


def test_a_slow_turn_keeps_its_claim_alive_and_is_answered_once(
    settings: Settings,
    engine: Engine,
    database_url: str,
    fake_model: FakeChatModel,
    sender: RecordingSender,
) -> None:
    """A turn stuck in the LLM for longer than the lease is not taken over by another worker:
    its heartbeat renews the lease."""
    gate = Gate(echo)
    fake_model.defaults["reply"] = lambda messages: str(gate(messages))
    first = worker_for(
        pam_with(settings, engine, fake_model, service={"inbox_lease_seconds": 1.0}), sender
    )
    other_engine = db.make_engine(database_url)
    second = worker_for(
        pam_with(settings, other_engine, fake_model, service={"inbox_lease_seconds": 1.0}), sender
    )
    user = unique_user()
    first.inbox.accept(inbound(user, "una pregunta difícil"))
    slow = Background(first.answer_next)
    try:
        assert gate.called.wait(WAIT)
        [item] = inbox_rows(engine, user)
        assert item.lease_expires_at is not None
        leases = [item.lease_expires_at]
        for _ in range(3):  # three renewals, each moving the lease past the one before
            wait_until(lambda: lease_of(engine, InboxItem, item.id) != leases[-1], "a renewal")
            leases.append(lease_of(engine, InboxItem, item.id))
            assert second.answer_next() is False, "the live claim was taken over"
        assert leases == sorted(leases)
    finally:
        gate.release.set()
        assert slow.finish() is True
        other_engine.dispose()
    first.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("una pregunta difícil")]
    assert len(fake_model.of("reply")) == 1
    [item] = inbox_rows(engine, user)
    assert (item.status, item.attempts) == (DONE, 1)


def test_a_message_that_keeps_crashing_its_worker_is_failed_with_an_apology(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    clock = ManualClock()
    worker = worker_for(
        pam_with(settings, engine, fake_model, clock, service={"max_turn_attempts": 2}), sender
    )
    user = unique_user()
    worker.inbox.accept(inbound(user, "a message that kills workers"))
    worker.inbox.accept(inbound(user, "the next one"))
    ids = [row.id for row in inbox_rows(engine, user)]
    for attempt in (1, 2):  # two workers claim it and die
        claim = claim_eventually(worker.inbox.claim_next, clock, worker.inbox.lease)
        assert claim.attempts == attempt

    outlive(clock, worker.inbox.lease)
    assert worker.answer_next()
    [poison, following] = inbox_rows_by_id(engine, ids)
    assert (poison.status, poison.attempts, poison.text) == (FAILED, 3, "")
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [phrases.apology(None), reply_to("the next one")]
    assert [c.text.splitlines()[-1] for c in fake_model.of("reply")] == ["the next one"]
    assert following.status == PENDING


def test_an_exception_in_a_turn_is_retried_later_and_not_lost(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    fake_model.queue("reply", RuntimeError("model client bug"))
    worker.inbox.accept(inbound(user, "uno"))
    worker.inbox.accept(inbound(user, "dos"))
    before = utcnow()
    worker.drain()

    first, second = inbox_rows(engine, user)
    assert (first.status, first.attempts, first.last_error) == (
        PENDING,
        1,
        "RuntimeError: model client bug",
    )
    assert first.available_at > before and first.text == "uno"
    assert (second.status, second.attempts) == (PENDING, 0), "dos waits behind uno"
    assert sender.calls == []
    assert conversation(pam, user) == [(LEARNER, "uno")]

    make_available_now(engine, InboxItem)
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("uno"), reply_to("dos", 1)]
    assert conversation(pam, user) == [
        (LEARNER, "uno"),
        (PAM, reply_to("uno")),
        (LEARNER, "dos"),
        (PAM, reply_to("dos", 1)),
    ], "the retried turn stored the learner's message once"
    assert len(fake_model.of("reply")) == 3


# -- delivery -----------------------------------------------------------------------------


def answered(worker: Worker, user: str, *texts: str) -> None:
    """Accept and answer `texts` from `user`, their replies queued for the delivery lanes (as
    when a worker dies before sending, or a reply waits behind an older one): nothing is
    delivered yet."""
    for text in texts:
        worker.inbox.accept(inbound(user, text))
    while (claim := worker.inbox.claim_next()) is not None:
        replies = handle(worker.pam, claim.address, claim.text, inbox_id=claim.id)
        assert worker.inbox.complete(claim, replies)


def test_a_reply_is_sent_by_the_turn_that_made_it(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    """No hop through a delivery lane: the lane that answered sends the reply."""
    worker = worker_for(pam, sender)
    user = unique_user()
    worker.inbox.accept(inbound(user, "uno"))

    assert worker.answer_next()

    assert sender.texts_to(chat_of(user)) == [reply_to("uno")]
    [row] = outbox_rows(engine, user)
    assert (row.status, row.attempts, row.text) == (SENT, 1, "")
    assert row.platform_message_id == f"p-pam-{row.id}"
    assert not worker.deliver_next()


def test_an_inbox_lane_looks_for_more_at_once_only_when_a_message_waits(
    pam: Pam, fake_model: FakeChatModel, sender: RecordingSender, engine: Engine
) -> None:
    """After its turn a lane looks for another message at once only if the turn's write saw
    one ready for a claim: the learner's next message (held back until this one was
    answered) or another learner's. Else it waits for a wake-up (a message stored later
    wakes the lanes) or its poll: the look would find nothing. A message waiting for its
    retry is not ready; a turn that did not write its reply cannot tell, and looks."""
    worker = worker_for(pam, sender)
    user, other = unique_user(), unique_user()
    worker.inbox.accept(inbound(user, "uno"))
    worker.inbox.accept(inbound(user, "dos"))  # held back while "uno" is answered

    assert worker.inbox_step() is True  # "uno"; "dos" is ready now
    assert worker.inbox_step() is False  # "dos"; nothing waits
    assert worker.inbox_step() is False  # nothing to claim

    fake_model.queue("reply", failing())
    worker.inbox.accept(inbound(other, "hola"))
    assert worker.inbox_step() is True  # deferred: the write never ran
    worker.inbox.accept(inbound(user, "tres"))
    assert worker.inbox_step() is False  # "tres"; "hola" waits for its retry
    assert sender.texts_to(chat_of(user)) == [
        reply_to("uno"),
        reply_to("dos", 1),
        reply_to("tres", 2),
    ]
    make_available_now(engine, InboxItem)
    worker.inbox.accept(inbound(user, "cuatro"))
    assert worker.inbox_step() is True  # "hola"; "cuatro" is ready
    assert worker.inbox_step() is False
    assert sender.texts_to(chat_of(other)) == [reply_to("hola")]


def test_another_learners_undelivered_reply_does_not_hold_this_one_back(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    waiting, user = unique_user(), unique_user()
    answered(worker, waiting, "uno")  # their reply is still queued
    worker.inbox.accept(inbound(user, "dos"))

    assert worker.answer_next()

    assert sender.texts_to(chat_of(user)) == [reply_to("dos")], "sent by the turn, not queued"
    assert [r.status for r in outbox_rows(engine, waiting)] == [PENDING]


def test_memory_jobs_start_once_the_reply_is_sent(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    """Starting a job writes to the database and schedules it: the reply does not wait."""
    events: list[str] = []

    @dataclass
    class Noting(RecordingSender):
        def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
            events.append("reply sent")
            return super().send(chat_id, text, idempotency_key=idempotency_key)

    def submit(work: Callable[[], None]) -> None:
        events.append("job started")
        work()

    knobs = settings.replace(memory={"profile_every": 1})
    pam = build(knobs, model=fake_model, submit=submit, engine=engine)
    worker = worker_for(pam, Noting())
    worker.inbox.accept(inbound(unique_user(), "Trabajo de enfermera en Bremen"))

    assert worker.answer_next()

    assert events == ["reply sent", "job started"]
    assert len(fake_model.of("profile")) == 1


def test_a_reply_waits_behind_an_older_undelivered_one(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    answered(worker, user, "uno")  # its reply is still queued
    worker.inbox.accept(inbound(user, "dos"))

    assert worker.answer_next()

    assert sender.calls == [], "dos must not overtake uno"
    assert [(r.status, r.attempts) for r in outbox_rows(engine, user)] == [(PENDING, 0)] * 2
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("uno"), reply_to("dos", 1)]


def test_a_failed_send_in_the_turn_leaves_the_rest_to_the_lanes_in_order(
    pam: Pam, fake_model: FakeChatModel, engine: Engine
) -> None:
    sender = RecordingSender(max_chars=40)  # the reply is sent in parts
    worker = worker_for(pam, sender)
    user = unique_user()
    fake_model.queue("reply", reply_json("Primera parte de la respuesta. " * 3))
    sender.failures.append(TransientSendError("429 Too Many Requests", retry_after=30))
    worker.inbox.accept(inbound(user, "uno"))

    assert worker.answer_next()

    first, *rest = outbox_rows(engine, user)
    assert (first.status, first.attempts, first.last_error) == (PENDING, 1, "429 Too Many Requests")
    assert rest and [(r.status, r.attempts, r.claim_token) for r in rest] == [
        (PENDING, 0, None)
    ] * len(rest), "the parts never tried are handed back untouched"
    assert not worker.deliver_next(), "the later parts wait for the first"
    make_available_now(engine, OutboxItem)
    worker.drain()
    assert [r.status for r in outbox_rows(engine, user)] == [SENT] * (1 + len(rest))
    keys = [d.idempotency_key for d in sender.calls]
    assert len(keys) == len(rest) + 2 and keys[0] == keys[1], "part one again, then the rest"
    assert keys[1:] == [f"pam-{r.id}" for r in [first, *rest]], "in order, each once"


def test_replies_held_by_a_worker_that_died_are_delivered_after_their_lease(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    clock = ManualClock()
    worker = worker_for(pam := pam_with(settings, engine, fake_model, clock), sender)
    user = unique_user()
    worker.inbox.accept(inbound(user, "uno"))
    claim = worker.inbox.claim_next()
    assert claim is not None
    replies = handle(pam, claim.address, claim.text, inbox_id=claim.id)
    held = worker.inbox.finish(claim, replies, deliver_lease=worker.outbox.lease)
    assert held and sender.calls == []  # ...and the worker dies before sending

    outlive(clock, worker.outbox.lease)
    assert worker.deliver_next()
    assert [(d.text, d.idempotency_key) for d in sender.calls] == [
        (reply_to("uno"), f"pam-{held[0].id}")
    ]
    assert not worker.outbox.mark_sent(held[0], None), "the dead worker's claim is void"


def test_a_transient_send_error_is_retried_after_the_platforms_retry_after(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    answered(worker, user, "uno", "dos")
    sender.failures.append(TransientSendError("429 Too Many Requests", retry_after=30))
    before = utcnow()
    assert worker.deliver_next()

    first, _ = outbox_rows(engine, user)
    assert (first.status, first.attempts, first.last_error) == (
        PENDING,
        1,
        "429 Too Many Requests",
    )
    assert first.available_at >= before + timedelta(seconds=30)
    assert first.text == reply_to("uno")
    assert not worker.deliver_next(), "nothing is due, and dos must not overtake uno"

    make_available_now(engine, OutboxItem)
    worker.drain()
    assert sender.texts_to(chat_of(user)) == [reply_to("uno"), reply_to("uno"), reply_to("dos", 1)]
    keys = [d.idempotency_key for d in sender.calls]
    assert keys[0] == keys[1] != keys[2], "a retry reuses the idempotency key"
    assert [r.status for r in outbox_rows(engine, user)] == [SENT, SENT]


def test_a_permanent_send_error_fails_the_reply_without_retrying(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    answered(worker, user, "uno", "dos")
    sender.failures.append(PermanentSendError("the user blocked the bot"))
    worker.drain()
    first, second = outbox_rows(engine, user)
    assert (first.status, first.last_error, first.attempts) == (
        FAILED,
        "the user blocked the bot",
        1,
    )
    assert second.status == SENT
    make_available_now(engine, OutboxItem)
    assert not worker.deliver_next()
    assert sender.texts_to(chat_of(user)) == [reply_to("uno"), reply_to("dos", 1)]


def test_a_crashing_sender_is_retried(pam: Pam, sender: RecordingSender, engine: Engine) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    answered(worker, user, "uno")
    sender.failures.append(ValueError("sender bug"))
    assert worker.deliver_next()
    [row] = outbox_rows(engine, user)
    assert (row.status, row.last_error) == (PENDING, "ValueError: sender bug")
    make_available_now(engine, OutboxItem)
    worker.drain()
    assert [r.status for r in outbox_rows(engine, user)] == [SENT]


def test_a_channel_without_a_sender_is_retried_then_failed(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_with(settings, engine, fake_model, service={"max_send_attempts": 3})
    worker = worker_for(pam, None)
    user = unique_user()
    answered(worker, user, "uno")
    for attempt in (1, 2):
        assert worker.deliver_next()
        [row] = outbox_rows(engine, user)
        assert (row.status, row.attempts) == (PENDING, attempt)
        assert "no sender" in (row.last_error or "")
        assert not worker.deliver_next()
        make_available_now(engine, OutboxItem)
    assert worker.deliver_next()
    [row] = outbox_rows(engine, user)
    assert (row.status, row.attempts) == (FAILED, 3)
    assert (row.last_error or "").startswith("gave up after 3 attempts")
    make_available_now(engine, OutboxItem)
    assert not worker.deliver_next()


def test_a_delivery_whose_worker_died_is_sent_again_with_the_same_key(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    clock = ManualClock()
    worker = worker_for(pam_with(settings, engine, fake_model, clock), sender)
    user = unique_user()
    answered(worker, user, "uno")
    dead = worker.outbox.claim_next()
    assert dead is not None
    outlive(clock, worker.outbox.lease)
    assert worker.deliver_next()
    assert [(d.text, d.idempotency_key) for d in sender.calls] == [
        (reply_to("uno"), f"pam-{dead.id}")
    ]
    assert not worker.outbox.mark_sent(dead, None)
    assert [r.status for r in outbox_rows(engine, user)] == [SENT]


def test_a_send_outliving_its_first_lease_is_not_sent_twice(
    settings: Settings,
    engine: Engine,
    database_url: str,
    fake_model: FakeChatModel,
    sender: RecordingSender,
) -> None:
    """The sending lane renews its claim while the platform call runs, so a second worker
    cannot take the reply over however long the call takes. (A lease of 1 s, renewed every
    third of it: at 0.2 s a renewal held up 0.13 s on a loaded machine let the claim lapse.)"""
    gate = Gate(sender.send)
    first = worker_for(
        pam_with(settings, engine, fake_model, service={"delivery_lease_seconds": 1.0}),
        GatedSender(gate),
    )
    user = unique_user()
    answered(first, user, "uno")
    other_engine = db.make_engine(database_url)
    second = worker_for(
        pam_with(settings, other_engine, fake_model, service={"delivery_lease_seconds": 1.0}),
        sender,
    )
    sending = Background(first.deliver_next)
    try:
        assert gate.called.wait(WAIT)
        [reply] = outbox_rows(engine, user)  # the committed row: claimed, with its lease
        expires = reply.lease_expires_at
        assert expires is not None
        wait_until(lambda: utcnow() > expires, "the delivery lease to run out")
        assert second.deliver_next() is False, "the reply was taken over mid-send"
    finally:
        gate.release.set()
        assert sending.finish() is True
        other_engine.dispose()
    assert [d.text for d in sender.calls] == [reply_to("uno")], "sent once"
    assert [r.status for r in outbox_rows(engine, user)] == [SENT]


def test_backoff_grows_is_capped_and_honours_retry_after() -> None:
    for attempts in range(1, 30):
        delay = backoff(attempts)
        assert 0 < delay <= MAX_BACKOFF_SECONDS * 1.2
        assert backoff(attempts, retry_after=MAX_BACKOFF_SECONDS * 3) >= MAX_BACKOFF_SECONDS * 3
    assert backoff(1) <= 1.2 < backoff(4)
    assert backoff(2, retry_after=30) >= 30


# -- /forget through the queue --------------------------------------------------------------


def test_forget_through_the_queue_erases_everything_and_still_confirms(
    pam: Pam, sender: RecordingSender, engine: Engine
) -> None:
    worker = worker_for(pam, sender)
    user = unique_user()
    for text in ("Hola, soy Lena", "Trabajo de enfermera", "/level B1", "Me gusta cocinar"):
        worker.inbox.accept(inbound(user, text))
    worker.drain()
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    # A reply still undelivered, and /forget's question (undelivered too), then the yes.
    answered(worker, user, "a reply to this is still undelivered", "/forget")
    worker.inbox.accept(inbound(user, "yes"))
    [forget_id] = [row.id for row in inbox_rows(engine, user) if row.text == "yes"]
    worker.drain()

    assert sender.texts_to(chat_of(user))[-1] == phrases.FORGOTTEN
    assert reply_to("a reply to this is still undelivered") not in sender.texts_to(chat_of(user))
    rows = pam.store.inspection.rows_about(learner.id, user)
    assert rows == dict.fromkeys(rows, 0)  # the /forget and its confirmation name nobody now
    [kept_in] = inbox_rows_by_id(engine, [forget_id])
    assert (kept_in.status, kept_in.text, kept_in.address, kept_in.chat_id) == (DONE, "", "", "")
    assert kept_in.display_name is None
    [kept_out] = queue_items(engine, OutboxItem, OutboxItem.inbox_id == forget_id)
    assert (kept_out.status, kept_out.text, kept_out.address, kept_out.chat_id) == (
        SENT,
        "",
        "",
        "",
    )
    assert pam.store.learners.find_learner(user) is None


def test_a_message_sent_after_forget_is_still_answered(
    pam: Pam, sender: RecordingSender, fake_model: FakeChatModel
) -> None:
    """The learner writes /forget, confirms it, and then, before a worker got to either, "Hola
    otra vez". The new message must start the fresh conversation, not be erased unanswered."""
    worker = worker_for(pam, sender)
    user = unique_user()
    worker.inbox.accept(inbound(user, "Hola, soy Lena"))
    worker.drain()
    for text in ("/forget", "yes", "Hola otra vez"):
        worker.inbox.accept(inbound(user, text))
    worker.drain()
    said = sender.texts_to(chat_of(user))
    assert said[0] == reply_to("Hola, soy Lena") and said[1].startswith(forgetting.ASK)
    assert said[2:] == [phrases.FORGOTTEN, reply_to("Hola otra vez")]
    assert conversation(pam, user) == [(LEARNER, "Hola otra vez"), (PAM, reply_to("Hola otra vez"))]


# -- the API channel's callback sender, against a real HTTP server ---------------------------


@dataclass
class Received:
    """One request the callback server received."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class CallbackServer:
    """An HTTP server on 127.0.0.1 recording requests; answers are scripted (status, headers)."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    answers: deque[tuple[int, dict[str, str]]] = field(default_factory=deque)
    stall: threading.Event | None = None


@pytest.fixture
def callback() -> Iterator[CallbackServer]:
    state = CallbackServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.received.append(Received(self.path, dict(self.headers.items()), body))
            if state.stall is not None:
                state.stall.wait(WAIT)
            status, headers = state.answers.popleft() if state.answers else (200, {})
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that timed out and hung up: nothing to report

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/pam/replies"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    if state.stall is not None:
        state.stall.set()
    server.shutdown()
    server.server_close()
    thread.join(WAIT)


@pytest.fixture
def api_sender(callback: CallbackServer) -> Iterator[ApiCallbackSender]:
    sender = ApiCallbackSender(callback.url, API_TOKEN, timeout=5)
    yield sender
    sender.session.close()


def verify(received: Received) -> dict[str, str]:
    """Check the request's signature the way an operator's endpoint would; the parsed body."""
    expected = hmac.new(API_TOKEN.encode(), received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["X-Pam-Signature"], f"sha256={expected}")
    body: dict[str, str] = json.loads(received.body)
    return body


def test_the_callback_posts_signed_json_with_an_idempotency_key(
    callback: CallbackServer, api_sender: ApiCallbackSender
) -> None:
    sent = api_sender.send("user-7", "¡Hola, Lena! 🇪🇸\n¿Qué tal?", idempotency_key="pam-41")
    assert sent.platform_id is None
    [request] = callback.received
    assert request.path == "/pam/replies"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == "pam-41"
    assert verify(request) == {
        "id": "pam-41",
        "user": "user-7",
        "text": "¡Hola, Lena! 🇪🇸\n¿Qué tal?",
    }
    assert "🇪🇸".encode() in request.body, "UTF-8, not escaped"


def test_a_tampered_body_fails_the_signature_check(
    callback: CallbackServer, api_sender: ApiCallbackSender
) -> None:
    api_sender.send("user-7", "Hola", idempotency_key="pam-1")
    [request] = callback.received
    forged = Received(request.path, request.headers, request.body.replace(b"Hola", b"Adi\xc3\xb3s"))
    with pytest.raises(AssertionError):
        verify(forged)


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [
        (429, {"Retry-After": "17"}, 17.0),
        (429, {}, None),
        (500, {}, None),
        (502, {}, None),
        (503, {"Retry-After": "3"}, 3.0),
    ],
)
def test_rate_limits_and_server_errors_are_transient(
    callback: CallbackServer,
    api_sender: ApiCallbackSender,
    status: int,
    headers: dict[str, str],
    retry_after: float | None,
) -> None:
    callback.answers.append((status, headers))
    with pytest.raises(TransientSendError) as raised:
        api_sender.send("user-7", "Hola", idempotency_key="pam-2")
    assert raised.value.retry_after == retry_after


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
def test_client_errors_are_permanent(
    callback: CallbackServer, api_sender: ApiCallbackSender, status: int
) -> None:
    callback.answers.append((status, {}))
    with pytest.raises(PermanentSendError):
        api_sender.send("user-7", "Hola", idempotency_key="pam-3")


def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = ApiCallbackSender(f"http://127.0.0.1:{port}/x", API_TOKEN, timeout=5)
    try:
        with pytest.raises(TransientSendError) as raised:
            sender.send("user-7", "Hola", idempotency_key="pam-4")
    finally:
        sender.session.close()
    assert raised.value.retry_after is None


def test_a_callback_that_times_out_is_transient(callback: CallbackServer) -> None:
    callback.stall = threading.Event()
    sender = ApiCallbackSender(callback.url, API_TOKEN, timeout=0.2)
    try:
        with pytest.raises(TransientSendError):
            sender.send("user-7", "Hola", idempotency_key="pam-5")
    finally:
        callback.stall.set()
        sender.session.close()


def test_web_to_worker_to_callback(
    pam: Pam, settings: Settings, callback: CallbackServer, fake_model: FakeChatModel
) -> None:
    """The whole path: POST /api/messages → inbox → turn → outbox → signed callback."""
    api = settings.replace(api={"token": API_TOKEN, "callback_url": callback.url})
    outbound = senders(api)
    worker = Worker(pam, outbound)
    client = create_app(api, engine=pam.engine).test_client()
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    user = unique_user().split(":", 1)[1]
    try:
        callback.answers.append((429, {"Retry-After": "1"}))
        for n, text in enumerate(["Hola", "Yo es Lena"]):
            body = {"id": f"{user}-{n}", "user": user, "text": text}
            assert client.post("/api/messages", json=body, headers=headers).status_code == 202
        worker.drain()
        assert len(callback.received) == 1, "rate-limited: the rest waits"
        make_available_now(pam.engine, OutboxItem)
        worker.drain()
    finally:
        outbound["api"].session.close()  # type: ignore[attr-defined]

    bodies = [verify(r) for r in callback.received]
    assert [(b["user"], b["text"]) for b in bodies] == [
        (user, reply_to("Hola")),
        (user, reply_to("Hola")),
        (user, reply_to("Yo es Lena", 1)),
    ]
    assert bodies[0]["id"] == bodies[1]["id"] != bodies[2]["id"]
    assert [r.headers["Idempotency-Key"] for r in callback.received] == [b["id"] for b in bodies]
    assert len(fake_model.of("reply")) == 2


def test_a_turn_counts_as_in_flight_until_its_reply_is_sent(pam: Pam) -> None:
    """`pam_turns_in_flight` (the busy inbox lanes) counts the turn while its lane sends the
    reply, and no more once the lane is done; its seconds add up for the workers' sum."""
    seen: list[float] = []

    class Watching(RecordingSender):
        def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
            seen.append(in_flight())
            return super().send(chat_id, text, idempotency_key=idempotency_key)

    def in_flight() -> float | None:
        return metrics.REGISTRY.get_sample_value("pam_turns_in_flight")

    def lane_seconds() -> float:
        return metrics.REGISTRY.get_sample_value("pam_turn_lane_seconds_total") or 0.0

    worker = Worker(pam, {"test": Watching()})
    before = lane_seconds()
    assert worker.inbox.accept(inbound(unique_user(), "Hola"))
    assert worker.answer_next()
    assert seen == [1.0] and in_flight() == 0
    assert lane_seconds() > before
