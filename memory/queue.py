"""The durable inbox and outbox: per-address queues that any number of processes share through
the database. A claim takes the oldest unfinished item of an address whose turn it is
(`FOR UPDATE SKIP LOCKED` on Postgres, compare-and-set everywhere), under a lease; an item
whose worker died is claimed again once the lease expires. Addresses are served in order:
an item waits while an older one of the same address is unfinished."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    Connection,
    Engine,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import aliased

from memory import db
from memory.messages import Inbound, Sent
from memory.models import InboxItem, Learner, OutboxItem, UTCDateTime, utcnow
from memory.records import LearnerInfo
from memory.statements import LEARNER_COLUMNS, SAVE_REPLY
from memory.wakeup import CHANNEL

log = logging.getLogger(__name__)

PENDING, CLAIMED, DONE, SENT, FAILED = "pending", "claimed", "done", "sent", "failed"
UNFINISHED = (PENDING, CLAIMED)
# Retention: finished items are deleted this many rows per statement, each in a transaction
# of its own, so a prune never holds many row locks (or SQLite's write lock) for long.
PRUNE_BATCH = 500


@dataclass(frozen=True)
class Claim:
    """A claimed queue item: the fields a worker needs, and the token that proves the claim."""

    id: int
    token: str
    attempts: int
    address: str
    channel: str
    chat_id: str
    text: str
    display_name: str | None = None
    inbox_id: int | None = None
    received_at: datetime | None = None
    kind: str = "text"
    # An inbox claim: whether an older reply to the address was still undelivered when it was
    # claimed. Only its own finish adds replies to the address, so "no" stays true until then.
    replies_waiting: bool = False
    # An inbox claim: the learner the address belonged to when it was claimed (None: nobody
    # yet), so that the turn need not look them up again.
    learner: LearnerInfo | None = None


def _held(model: Any) -> Any:
    """The item's row as long as the claim in the parameters `item_id` and `held_token` still
    holds it."""
    return and_(
        model.id == bindparam("item_id"),
        model.claim_token == bindparam("held_token"),
        model.status == CLAIMED,
    )


def _held_params(claim: Claim) -> dict[str, Any]:
    return {"item_id": claim.id, "held_token": claim.token}


def _unlinked_if_forgotten(model: Any) -> dict[str, Any]:
    """SET values for finishing an item: one whose learner was forgotten (the /forget itself,
    its confirmation) keeps nothing that names them; its platform id still recognises a
    redelivery."""
    known = exists().where(Learner.external_id == model.address)
    values = {
        "address": case((known, model.address), else_=""),
        "chat_id": case((known, model.chat_id), else_=""),
    }
    if model is InboxItem:
        values["display_name"] = case((known, InboxItem.display_name), else_=None)
    return values


def _claimable(model: Any, now: Any) -> Any:
    return or_(
        and_(model.status == PENDING, model.available_at <= now),
        and_(model.status == CLAIMED, model.lease_expires_at < now),
    )


def _prunable(model: Any, cutoff: datetime) -> Any:
    """Items that nothing needs any more: finished (answered or given up; sent or failed for
    good, never one waiting for a retry) before `cutoff`, and for an inbox item, no reply of
    it still waiting to be delivered."""
    if model is InboxItem:
        replies_waiting = exists().where(
            OutboxItem.inbox_id == InboxItem.id, OutboxItem.status.in_(UNFINISHED)
        )
        return and_(
            InboxItem.status.in_((DONE, FAILED)),
            func.coalesce(InboxItem.finished_at, InboxItem.received_at) < cutoff,
            ~replies_waiting,
        )
    return and_(
        OutboxItem.status.in_((SENT, FAILED)),
        func.coalesce(OutboxItem.sent_at, OutboxItem.created_at) < cutoff,
    )


def _stored_at(model: Any) -> Any:
    """When an item was stored: it grows with the id (both are set as the row is inserted)."""
    return InboxItem.received_at if model is InboxItem else OutboxItem.created_at


class _Queue:
    model: type[InboxItem] | type[OutboxItem]

    def __init__(self, engine: Engine, lease_seconds: float) -> None:
        self.engine = engine
        self.single = db.autocommit(engine)  # for work of one statement
        self.lease = timedelta(seconds=lease_seconds)
        self._claim = self._claim_statement()

    def next_item_query(self, now: Any) -> Any:
        """The query for the id of the next claimable item as of `now`: the oldest unfinished
        item whose address has no older unfinished one. It reads only the partial indexes
        over unfinished items, however many finished ones have piled up."""
        item: Any = aliased(self.model, name="candidate")
        older: Any = aliased(self.model, name="older")
        query = (
            select(item.id)
            .where(
                item.status.in_(UNFINISHED),  # lets the database use the partial index
                _claimable(item, now),
                ~exists().where(
                    older.address == item.address,
                    older.id < item.id,
                    older.status.in_(UNFINISHED),
                ),
            )
            .order_by(item.id)
            .limit(1)
        )
        if self.engine.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True, of=item)
        return query

    def _claim_statement(self) -> Any:
        """One statement that takes the next item and returns a Claim's fields, by name: built
        once (statement building was a fifth of a worker's CPU), one round trip per claim."""
        model = self.model
        now = bindparam("now", type_=UTCDateTime())
        columns: list[Any] = [model.id, model.attempts, model.address, model.channel]
        columns += [model.chat_id, model.text]
        if model is InboxItem:
            columns += [InboxItem.display_name, InboxItem.received_at, InboxItem.kind]
            # Named with its table: SQLite's RETURNING is rendered with bare column names, and
            # a bare `address` in the subquery would be the outbox's own.
            claimed_address: Any = literal_column(f"{InboxItem.__tablename__}.address")
            waiting = exists().where(
                OutboxItem.address == claimed_address, OutboxItem.status.in_(UNFINISHED)
            )
            columns += [
                InboxItem.id.label("inbox_id"),
                type_coerce(waiting, Boolean).label("replies_waiting"),  # SQLite says 0/1
                *(
                    select(column)
                    .where(Learner.external_id == claimed_address)
                    .scalar_subquery()
                    .label(f"learner_{column.key}")
                    for column in LEARNER_COLUMNS
                ),
            ]
        else:
            columns += [OutboxItem.inbox_id]
        return (
            update(model)
            # Compare-and-set on top of the row lock: SQLite has no SKIP LOCKED.
            .where(model.id == self.next_item_query(now).scalar_subquery(), _claimable(model, now))
            .values(
                status=CLAIMED,
                claim_token=bindparam("token"),
                lease_expires_at=bindparam("lease_expires_at", type_=UTCDateTime()),
                attempts=model.attempts + 1,
            )
            .returning(*columns)
        )

    def claim_next(self) -> Claim | None:
        """Claim the next item whose turn it is, or None when there is none right now."""
        now = utcnow()
        token = str(uuid.uuid4())
        values = {"now": now, "token": token, "lease_expires_at": now + self.lease}
        with self.single.begin() as connection:
            row = connection.execute(self._claim, values).first()
        if row is None:
            return None
        fields = dict(row._mapping)
        if self.model is not InboxItem:
            return Claim(token=token, **fields)
        learner = [fields.pop(f"learner_{column.key}") for column in LEARNER_COLUMNS]
        known = LearnerInfo(*learner) if learner[0] is not None else None
        return Claim(token=token, learner=known, **fields)

    def _release(self, claim: Claim, *, finished: bool = False, **values: Any) -> bool:
        model = self.model
        if finished:
            values |= _unlinked_if_forgotten(model)
        statement = update(model).where(_held(model))
        statement = statement.values(claim_token=None, lease_expires_at=None, **values)
        with self.engine.begin() as connection:
            return bool(connection.execute(statement, _held_params(claim)).rowcount)

    def renew(self, claim: Claim) -> bool:
        """Extend a live claim's lease (its worker is alive). False if the claim is gone."""
        statement = update(self.model).where(_held(self.model))
        statement = statement.values(lease_expires_at=utcnow() + self.lease)
        with self.single.begin() as connection:
            return bool(connection.execute(statement, _held_params(claim)).rowcount)

    def retry_later(self, claim: Claim, delay_seconds: float, error: str) -> bool:
        """Give the item back to be tried again after `delay_seconds`."""
        return self._release(
            claim,
            status=PENDING,
            available_at=utcnow() + timedelta(seconds=delay_seconds),
            last_error=error[:300],
        )

    def counts(self) -> dict[str, int]:
        """How many items are in each status."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(self.model.status, func.count()).group_by(self.model.status)
            )
            return {status: int(n) for status, n in rows}

    def prune(self, cutoff: datetime, batch: int = PRUNE_BATCH) -> int:
        """Delete the items finished before `cutoff` that nothing needs any more (see
        `_prunable`); the number deleted. Unfinished items, retries and the replies still to
        deliver are never touched, however old.

        It walks the table in id order, `batch` ids at a time, each page one short DELETE
        by primary key range: no statement reads or locks more than a page, whatever the
        table holds, and it stops at the first page stored after `cutoff` (later ones are
        newer still). Claims read only the unfinished items, so they never wait for it."""
        model = self.model
        stored_at = _stored_at(model)
        page_end = (
            select(model.id, stored_at.label("stored_at"))
            .where(model.id > bindparam("after"))
            .order_by(model.id)
            .offset(batch - 1)
            .limit(1)
        )
        deleted, after = 0, 0
        while True:
            with self.single.begin() as connection:
                end = connection.execute(page_end, {"after": after}).first()
            page = [model.id > after] + ([model.id <= end.id] if end is not None else [])
            statement = delete(model).where(*page, _prunable(model, cutoff))
            with self.single.begin() as connection:
                deleted += connection.execute(statement).rowcount
            if end is None or end.stored_at >= cutoff:
                return deleted
            after = end.id


class Inbox(_Queue):
    """Messages received from the channels, kept until a worker has answered them."""

    model = InboxItem

    def accept(self, message: Inbound) -> bool:
        """Persist an inbound message. False if this channel delivered it before."""
        # Postgres cannot store NUL in text; no learner means one, so it goes here, for every
        # channel at once.
        display_name = message.display_name.replace("\x00", "") if message.display_name else None
        row = {
            "channel": message.channel,
            "platform_id": message.platform_id,
            "address": message.address,
            "chat_id": message.chat_id,
            "display_name": display_name,
            "text": message.text.replace("\x00", ""),
            "kind": message.kind,
        }
        try:
            # On Postgres one statement stores it and notifies the workers (the NOTIFY goes out
            # once it commits, and not at all if it is a redelivery).
            postgres = self.engine.dialect.name == "postgresql"
            with self.single.begin() as connection:
                if postgres:
                    values = {f"in_{name}": value for name, value in row.items()}
                    connection.execute(_ACCEPT_AND_NOTIFY, values | {"now": utcnow()})
                else:
                    connection.execute(_ACCEPT, row)
        except IntegrityError:
            return False
        return True

    def complete(self, claim: Claim, replies: Sequence[str], *, failed: bool = False) -> bool:
        """Mark the message answered and queue its replies for the delivery lanes, in one
        transaction. False (and nothing written) if the claim was lost meanwhile."""
        return self.finish(claim, replies, failed=failed) is not None

    def finish(
        self,
        claim: Claim,
        replies: Sequence[str],
        *,
        failed: bool = False,
        deliver_lease: timedelta | None = None,
    ) -> list[Claim] | None:
        """Mark the message answered and queue its replies, atomically (on Postgres in one
        statement). The message text is cleared: it lives on in the conversation, not in the
        queue. None (and nothing written) if the claim was lost meanwhile.

        With `deliver_lease`, the replies are queued already claimed by the caller for that
        long, so it can send them at once instead of handing them to a delivery lane; their
        claims are returned. Not when an older reply to the same address was still undelivered
        at the claim: replies go out in order, so these wait behind it (and an empty list is
        returned). A caller that dies before sending leaves them to the delivery lanes once
        the lease ends."""
        finishing = Finishing(claim, failed=failed, deliver_lease=deliver_lease)
        if replies and self.engine.dialect.name == "postgresql":
            # One statement, one round trip: the UPDATE runs in a CTE, and the replies are
            # inserted only if it found the claim still held.
            with self.single.connect() as connection:
                rows = connection.execute(_FINISH_AND_QUEUE, finishing.values(replies)).all()
            return finishing.claims(replies, [id for id, _ in sorted(rows)] if rows else None)
        with self.engine.begin() as connection:
            return finishing.run(connection, replies)


@dataclass(frozen=True)
class Finished:
    """A claim finished together with the turn's reply: what `Inbox.finish` would have
    returned (the replies the caller holds to send; None if the claim was lost)."""

    held: list[Claim] | None


@dataclass(frozen=True)
class Finishing:
    """Finishing one inbox claim (see `Inbox.finish`), on a connection a caller shares: a
    turn finishes its claim in the statement or transaction that stores its reply.
    `split` makes the messages to queue of a reply (a channel's length limit)."""

    claim: Claim
    split: Callable[[str], list[str]] = lambda reply: [reply]
    failed: bool = False
    deliver_lease: timedelta | None = None

    @property
    def token(self) -> str | None:
        """The claim token the replies are queued under for the caller to send them at once
        (None: they go to the delivery lanes)."""
        held = self.deliver_lease is not None and not self.claim.replies_waiting
        return self._token if held else None

    @functools.cached_property
    def _token(self) -> str:
        return str(uuid.uuid4())

    def values(self, replies: Sequence[str]) -> dict[str, Any]:
        """The parameters of `_FINISH_AND_QUEUE` (and of the statements built on it)."""
        now = utcnow()
        token, lease = self.token, self.deliver_lease
        values = _held_params(self.claim) | {
            "status_now": FAILED if self.failed else DONE,
            "now": now,
            "out_channel": self.claim.channel,
            "out_address": self.claim.address,
            "out_chat_id": self.claim.chat_id,
            "out_status": CLAIMED if token else PENDING,
            "out_claim_token": token,
            "out_attempts": 1 if token else 0,
            "out_lease_expires_at": now + lease if token and lease is not None else None,
            "out_created_at": now,
            "out_available_at": now,
        }
        return values | {"seqs": list(range(len(replies))), "texts": list(replies)}

    def run(self, connection: Connection, replies: Sequence[str]) -> list[Claim] | None:
        """Finish on `connection`, in the caller's transaction: `_FINISH`, then the replies
        queued in one INSERT."""
        values = self.values(replies)
        if not connection.execute(_FINISH, values).rowcount:
            return None
        rows = [
            {name: values[f"out_{name}"] for name in (*_SAME_FOR_EVERY_REPLY, *_TIMES_OF_A_REPLY)}
            | {"inbox_id": self.claim.id, "seq": seq, "text": text}
            for seq, text in enumerate(replies)
        ]
        ids = list(connection.execute(_QUEUE_REPLIES, rows).scalars()) if rows else []
        return self.claims(replies, ids)

    def claims(self, replies: Sequence[str], ids: list[int] | None) -> list[Claim] | None:
        """What `Inbox.finish` returns, given the ids of the queued replies in order (None:
        the claim was lost)."""
        if ids is None:
            return None
        token = self.token
        if token is None:
            return []
        claim = self.claim
        return [
            Claim(
                id=id,
                token=token,
                attempts=1,
                address=claim.address,
                channel=claim.channel,
                chat_id=claim.chat_id,
                text=text,
                inbox_id=claim.id,
            )
            for id, text in zip(ids, replies, strict=True)
        ]


class Outbox(_Queue):
    """Replies waiting to be delivered, in order per address."""

    model = OutboxItem

    def deliver(self, claim: Claim, send: Callable[[], Sent]) -> None:
        """Send a claimed reply and record it as sent, in one round trip after the send.
        Exceptions from `send` propagate with nothing recorded. The claim's lease keeps other
        workers off the row while it is sent (a send gives up long before a delivery lease
        ends). If the database fails after the platform accepted (a restart, a failover), the
        delivery is recorded once the database is back, so it is not sent again."""
        sent = send()
        try:
            recorded = self.mark_sent(claim, sent.platform_id)
        except SQLAlchemyError:
            self._record_when_back(claim, sent)
            return
        if not recorded:  # /forget removed the row meanwhile, or the lease ran out mid-send
            log.warning("delivery outbox=%s sent, but its claim was gone", claim.id)

    def _record_when_back(self, claim: Claim, sent: Sent) -> None:
        """The platform has the reply but the database did not hear it: keep trying to record
        it while the claim can still be ours (a lease, and then some). Until then no other
        worker can take the row: its lease has not expired, or the database is down."""
        deadline = time.monotonic() + max(self.lease.total_seconds(), 1.0) * 2
        log.warning("delivery outbox=%s sent but not recorded; retrying the record", claim.id)
        while True:
            try:
                recorded = self.mark_sent(claim, sent.platform_id)
            except SQLAlchemyError:
                if time.monotonic() > deadline:
                    log.error(
                        "delivery outbox=%s sent but never recorded: it may go out twice",
                        claim.id,
                    )
                    return
                time.sleep(0.25)
                continue
            if recorded:
                log.info("delivery outbox=%s recorded after the outage", claim.id)
            # Not recorded: the failed COMMIT had landed after all, /forget removed the row,
            # or (after an outage longer than the lease) another worker took it over.
            return

    def mark_sent(self, claim: Claim, platform_message_id: str | None) -> bool:
        """Record a delivery; the text is cleared, since the learner has it now."""
        values = {"now": utcnow(), "platform_id": platform_message_id}
        with self.single.begin() as connection:  # one UPDATE
            return bool(connection.execute(_SENT, _held_params(claim) | values).rowcount)

    def unclaim(self, claim: Claim) -> bool:
        """Hand a claimed reply that was never tried to the delivery lanes, as if it had never
        been claimed (its attempt is given back)."""
        return self._release(claim, status=PENDING, attempts=OutboxItem.attempts - 1)

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a delivery that can never succeed; it is not retried."""
        return self._release(claim, finished=True, status=FAILED, text="", last_error=error[:300])


# The hot path's statements, built once (statement building was a large part of a worker's
# CPU); the parameters are named apart from the columns they set.
_ACCEPT = insert(InboxItem)
_INBOUND = ("channel", "platform_id", "address", "chat_id", "display_name", "text", "kind")
_ACCEPTED = (
    insert(InboxItem)
    .values(
        {
            **{
                name: bindparam(f"in_{name}", type_=InboxItem.__table__.c[name].type)
                for name in _INBOUND
            },
            "received_at": bindparam("now", type_=UTCDateTime()),
            "available_at": bindparam("now", type_=UTCDateTime()),
            "status": PENDING,
            "attempts": 0,
        }
    )
    .returning(InboxItem.id)
    .cte("accepted")
)
_ACCEPT_AND_NOTIFY = select(func.pg_notify(CHANNEL, "")).select_from(_ACCEPTED)
_FINISH = (
    update(InboxItem)
    .where(_held(InboxItem))
    .values(
        status=bindparam("status_now"),
        text="",
        claim_token=None,
        lease_expires_at=None,
        finished_at=bindparam("now", type_=UTCDateTime()),
        **_unlinked_if_forgotten(InboxItem),
    )
)
_QUEUE_REPLIES = insert(OutboxItem).returning(OutboxItem.id, sort_by_parameter_order=True)
_SENT = (
    update(OutboxItem)
    .where(_held(OutboxItem))
    .values(
        status=SENT,
        text="",
        sent_at=bindparam("now", type_=UTCDateTime()),
        claim_token=None,
        lease_expires_at=None,
        platform_message_id=bindparam("platform_id"),
        **_unlinked_if_forgotten(OutboxItem),
    )
)


_SAME_FOR_EVERY_REPLY = ("channel", "address", "chat_id", "status", "claim_token", "attempts")
_TIMES_OF_A_REPLY = ("lease_expires_at", "created_at", "available_at")


def finish_and_queue_ctes() -> tuple[Any, Any]:
    """Postgres: `_FINISH` and `_QUEUE_REPLIES` as two CTEs, "finished" (the inbox item's id,
    no row if the claim was lost) and "queued" (id and seq of each reply queued, only if the
    claim was held). The replies' seq and text come as two arrays; every other column is the
    same for all of them. Their parameters are `Finishing.values`."""
    finished = _FINISH.returning(InboxItem.id).cte("finished")
    replies = (
        func.unnest(bindparam("seqs", type_=ARRAY(Integer)), bindparam("texts", type_=ARRAY(Text)))
        .table_valued("seq", "text")
        .render_derived(name="replies")
    )
    # Named apart from the columns: the UPDATE would take a same-named value as its own.
    columns: list[Any] = [
        bindparam(f"out_{name}", type_=OutboxItem.__table__.c[name].type)
        for name in _SAME_FOR_EVERY_REPLY
    ]
    columns += [bindparam(f"out_{name}", type_=UTCDateTime()) for name in _TIMES_OF_A_REPLY]
    names = ["inbox_id", "seq", "text", *_SAME_FOR_EVERY_REPLY, *_TIMES_OF_A_REPLY]
    rows = select(finished.c.id, replies.c.seq, replies.c.text, *columns).select_from(
        finished.join(replies, true())
    )
    queued = (
        insert(OutboxItem)
        .from_select(names, rows, include_defaults=False)
        .returning(OutboxItem.id, OutboxItem.seq)
        .cte("queued")
    )
    return finished, queued


def _finish_and_queue() -> Any:
    """Postgres: finish the claim and queue its replies in one statement; (id, seq) of each
    reply queued, no row if the claim was lost."""
    _, queued = finish_and_queue_ctes()
    return select(queued.c.id, queued.c.seq)


_FINISH_AND_QUEUE = _finish_and_queue()


def _save_reply_and_finish() -> Any:
    """Postgres: `SAVE_REPLY` with the claim finished and the reply queued in two more CTEs,
    one statement for the turn's whole write. Two columns more on every row: whether the
    claim was still held, and the queued replies' ids in order."""
    finished, queued = finish_and_queue_ctes()
    held = select(func.count()).select_from(finished).scalar_subquery()
    ids = select(func.array_agg(aggregate_order_by(queued.c.id, queued.c.seq))).scalar_subquery()
    return SAVE_REPLY.add_cte(finished, queued).add_columns(held, ids)


SAVE_REPLY_AND_FINISH = _save_reply_and_finish()
