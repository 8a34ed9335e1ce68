"""A durable queue that any number of processes share through the database: the inbox and the
outbox are two. A claim takes the oldest unfinished item of an address whose turn it is (a row
lock where the database has one, compare-and-set everywhere), under a lease; an item whose
worker died is claimed again once the lease expires. Addresses are served in order: an item
waits while an older one of the same address is unfinished."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Engine,
    and_,
    bindparam,
    delete,
    exists,
    func,
    literal_column,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.orm import aliased

from memory import db
from memory.backends import backend_for
from memory.claims import (
    CLAIMED,
    DONE,
    FAILED,
    PENDING,
    SENT,
    UNFINISHED,
    Claim,
    claimable,
    held,
    held_params,
    unfinished,
    unlinked_if_forgotten,
    unspoken,
)
from memory.clock import Clock, utcnow
from memory.messages import VoiceNote
from memory.models import Learner, UTCDateTime
from memory.models_queue import InboxItem, OutboxItem
from memory.records import LearnerInfo
from memory.statements import LEARNER_COLUMNS

# Retention: finished items are deleted this many rows per statement, each in a transaction
# of its own, so a prune never holds many row locks (or SQLite's write lock) for long.
PRUNE_BATCH = 500
# A claim looks for the next item among this many of the oldest unfinished ones first: it is
# almost always there, unless they are one address's burst behind its item in flight.
OLDEST_LOOKED_AT = 8
# On SQLite a claim reads the next item, then takes it; if another lane took it in between,
# it reads again, this many times at most (then the lane looks again at its next poll).
CLAIM_TRIES = 3


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


class Queue:
    """A queue of items claimed under a lease, in order per address; `Inbox` and `Outbox` are
    the two."""

    model: type[InboxItem] | type[OutboxItem]

    def __init__(self, engine: Engine, lease_seconds: float, clock: Clock = utcnow) -> None:
        self.engine = engine
        self.single = db.autocommit(engine)  # for work of one statement
        self.backend = backend_for(engine)
        self.lease = timedelta(seconds=lease_seconds)
        self.clock = clock  # leases and availability run on it: tests move it forward
        self._claim = self._claim_statement()

    # Whether an item waits for the older unfinished items of its address (`holds_back`).
    in_order = True

    def takes(self, item: Any) -> Any:
        """Which unfinished items this queue's claims take: all of them."""
        return true()

    def holds_back(self, older: Any) -> Any:
        """Which older unfinished items of an address hold a newer one back: all of them."""
        return true()

    def next_item_query(self, now: Any) -> Any:
        """The query for the id of the next claimable item as of `now`: the oldest unfinished
        item whose address has no older unfinished one. It reads only the partial indexes
        over unfinished items, however many finished ones have piled up, and never more than
        a few items of any one address, however many it has queued (a burst): the oldest
        `OLDEST_LOOKED_AT` unfinished items are looked at first, where the next item almost
        always is; failing that, the first item of each address that has any (`_heads`)."""
        item: Any = aliased(self.model, name="candidate")
        query = select(item.id).where(
            unfinished(item),  # lets the database use the partial index
            claimable(item, now),
            self.takes(item),
        )
        if not self.in_order:
            return self.backend.lock_next(query.order_by(item.id).limit(1), item)
        oldest: Any = aliased(self.model, name="oldest")
        looked_at = (
            select(oldest.id).where(unfinished(oldest)).order_by(oldest.id).limit(OLDEST_LOOKED_AT)
        )
        older: Any = aliased(self.model, name="older")
        first_of_its_address = ~exists().where(
            older.address == item.address,
            older.id < item.id,
            unfinished(older),
            self.holds_back(older),
        )
        among_oldest = query.where(item.id.in_(looked_at), first_of_its_address)
        among_oldest = self.backend.lock_next(among_oldest.order_by(item.id).limit(1), item)
        return select(
            func.coalesce(among_oldest.scalar_subquery(), self._heads(now).scalar_subquery())
        )

    def _heads(self, now: Any) -> Any:
        """The oldest claimable item among the first unfinished item of each address. The
        first items are walked through the index over (address, id), one lookup each to the
        next address's first (a loose index scan): the work grows with the addresses waiting,
        not with their items."""
        model = self.model

        def first_after(column: str, address: Any) -> Any:
            """`column` of the first unfinished item (that holds others back) of the first
            address after `address` (None: of the first address)."""
            after: Any = aliased(model, name="after")
            query = select(getattr(after, column)).where(unfinished(after))
            query = query.where(self.holds_back(after))
            if address is not None:
                query = query.where(after.address > address)
            return query.order_by(after.address, after.id).limit(1).scalar_subquery()

        heads = select(
            first_after("address", None).label("address"), first_after("id", None).label("id")
        ).cte("heads", recursive=True)
        following = (first_after(column, heads.c.address) for column in ("address", "id"))
        heads = heads.union_all(select(*following).where(heads.c.address.is_not(None)))
        # Each first item is looked up by its id in a subquery of its own: a join would let
        # Postgres walk every unfinished item in id order to find the first one ready.
        head: Any = aliased(model, name="head")
        ready = (
            select(and_(claimable(head, now), self.takes(head)))
            .where(head.id == heads.c.id)
            .scalar_subquery()
        )
        first_ready = select(heads.c.id).where(ready).order_by(heads.c.id).limit(1)
        chosen: Any = aliased(model, name="chosen")
        query = select(chosen.id).where(chosen.id == first_ready.scalar_subquery())
        return self.backend.lock_next(query, chosen)

    def _claim_statement(self) -> Any:
        """One statement that takes the next item and returns a Claim's fields, by name: built
        once (statement building was a fifth of a worker's CPU), one round trip per claim.
        Where the database has one write lock (SQLite), it takes the item the parameter
        `item_id` names, read before by `_next` without the lock."""
        model = self.model
        now = bindparam("now", type_=UTCDateTime())
        if self.backend.one_writer:
            self._next = self.next_item_query(now)
            target: Any = bindparam("item_id")
        else:
            target = self.next_item_query(now).scalar_subquery()
        columns: list[Any] = [model.id, model.attempts, model.address, model.channel]
        columns += [model.chat_id, model.text]
        if model is InboxItem:
            columns += [InboxItem.display_name, InboxItem.received_at, InboxItem.kind]
            columns += [InboxItem.voice]
            # Named with its table: SQLite's RETURNING is rendered with bare column names, and
            # a bare `address` in the subquery would be the outbox's own.
            claimed_address: Any = literal_column(f"{InboxItem.__tablename__}.address")
            waiting = exists().where(
                OutboxItem.address == claimed_address,
                unfinished(OutboxItem),
                ~unspoken(OutboxItem),  # a slow spoken copy holds no newer reply back
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
            columns += [OutboxItem.inbox_id, OutboxItem.chart_id, OutboxItem.voice_id]
            columns += [OutboxItem.speak]
        return (
            update(model)
            # Compare-and-set on top of the row lock: SQLite has no SKIP LOCKED.
            .where(model.id == target, claimable(model, now))
            .values(
                status=CLAIMED,
                claim_token=bindparam("token"),
                lease_expires_at=bindparam("lease_expires_at", type_=UTCDateTime()),
                attempts=model.attempts + 1,
            )
            .returning(*columns)
        )

    def claim_next(self) -> Claim | None:
        """Claim the next item whose turn it is, or None when there is none right now. Where
        a claim takes the database's one write lock (SQLite), the next item is read first,
        without it, and then taken by its id (compare-and-set): idle lanes polling an empty
        queue never hold up a writer (the web storing a message)."""
        now = self.clock()
        token = str(uuid.uuid4())
        values = {"now": now, "token": token, "lease_expires_at": now + self.lease}
        with self.single.connect() as connection:
            if not self.backend.one_writer:
                with connection.begin():
                    row = connection.execute(self._claim, values).first()
            else:
                for _ in range(CLAIM_TRIES):
                    item_id = connection.execute(self._next, {"now": now}).scalar()
                    connection.rollback()  # the read's end: the claim is a write of its own
                    if item_id is None:
                        return None
                    with connection.begin():
                        row = connection.execute(self._claim, values | {"item_id": item_id}).first()
                    if row is not None:
                        break  # else another lane took it between the read and the write
        if row is None:
            return None
        fields = dict(row._mapping)
        if self.model is not InboxItem:
            return Claim(token=token, **fields)
        learner = {column.key: fields.pop(f"learner_{column.key}") for column in LEARNER_COLUMNS}
        known = LearnerInfo(**learner) if learner["id"] is not None else None
        fields["voice"] = VoiceNote.from_json(fields["voice"])
        return Claim(token=token, learner=known, **fields)

    def _release(self, claim: Claim, *, finished: bool = False, **values: Any) -> bool:
        model = self.model
        if finished:
            values |= unlinked_if_forgotten(model)
        statement = update(model).where(held(model))
        statement = statement.values(claim_token=None, lease_expires_at=None, **values)
        with self.engine.begin() as connection:
            return bool(connection.execute(statement, held_params(claim)).rowcount)

    def renew(self, claim: Claim) -> bool:
        """Extend a live claim's lease (its worker is alive). False if the claim is gone."""
        statement = update(self.model).where(held(self.model))
        statement = statement.values(lease_expires_at=self.clock() + self.lease)
        with self.single.begin() as connection:
            return bool(connection.execute(statement, held_params(claim)).rowcount)

    def retry_later(self, claim: Claim, delay_seconds: float, error: str) -> bool:
        """Give the item back to be tried again after `delay_seconds`."""
        return self._release(
            claim,
            status=PENDING,
            available_at=self.clock() + timedelta(seconds=delay_seconds),
            last_error=error[:300],
        )

    def counts(self) -> dict[str, int]:
        """How many items are in each status."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(self.model.status, func.count().label("items")).group_by(self.model.status)
            )
            return {row.status: int(row.items) for row in rows}

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
