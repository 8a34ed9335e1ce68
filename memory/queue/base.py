"""A durable queue that any number of processes share through the database: the inbox and the
outbox are two. A claim takes the oldest unfinished item of an address whose turn it is (a row
lock where the database has one, compare-and-set everywhere), under a lease; an item whose
worker died is claimed again once the lease expires. Addresses are served in order: an item
waits while an older one of the same address is unfinished."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    select,
    true,
    update,
)
from sqlalchemy.orm import aliased

from memory.clock import Clock, utcnow
from memory.database import db
from memory.database.backends import backend_for
from memory.database.claims import (
    CLAIMED,
    PENDING,
    Lease,
    Standing,
    any_unfinished,
    claimable,
    held,
    held_params,
    unfinished,
)
from memory.database.models import UTCDateTime
from memory.database.models_queue import InboxItem, OutboxItem

# Retention: finished items are deleted this many rows per statement, each in a transaction
# of its own, so a prune never holds many row locks (or SQLite's write lock) for long.
PRUNE_BATCH = 500
# A claim looks for the next item among this many of the oldest pending ones first: it is
# almost always there, unless they are one address's burst behind its item in flight. Pending,
# not unfinished: with a worker's 128 turns in flight the oldest unfinished are all claimed,
# and every claim would walk every waiting address instead (`_heads`).
OLDEST_LOOKED_AT = 8
# On SQLite a claim reads the next item, then takes it; if another lane took it in between,
# it reads again, this many times at most (then the lane looks again at its next poll).
CLAIM_TRIES = 3

C = TypeVar("C", bound=Lease)  # a queue's claim type


class Queue(ABC, Generic[C]):
    """A queue of items claimed under a lease, in order per address; `Inbox` and `Outbox` are
    the two, each with its claim type `C` and what its claim reads of an item."""

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
        `OLDEST_LOOKED_AT` pending items are looked at first, where the next item almost
        always is; failing that (or for an item whose claim lapsed), the first item of each
        address that has any (`_heads`)."""
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
            select(oldest.id)
            .where(unfinished(oldest), oldest.status == PENDING)
            .order_by(oldest.id)
            .limit(OLDEST_LOOKED_AT)
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
        # The walk only where some item is claimable at all: a claim that finds nothing (a
        # poll, at 128 turns in flight) would otherwise walk every address in flight, 0.55 ms
        # of Postgres' time against 0.2 ms for a claim that takes an item.
        anything: Any = aliased(self.model, name="anything")
        claimable_at_all = any_unfinished(anything, claimable(anything, now), self.takes(anything))
        heads = case((claimable_at_all, self._heads(now).scalar_subquery()))
        return select(func.coalesce(among_oldest.scalar_subquery(), heads))

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
        """One statement that takes the next item and returns a claim's fields, by name: built
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
        columns = [model.id, model.attempts, *self.claimed_columns()]
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

    def claim_next(self) -> C | None:
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
        return self.claim_of(token, dict(row._mapping))

    @abstractmethod
    def claimed_columns(self) -> list[Any]:
        """What a claim reads of its item, beside its id and attempts, each by a name of
        `claim_of`'s fields."""

    @abstractmethod
    def claim_of(self, token: str, fields: dict[str, Any]) -> C:
        """The claim under `token` of the item whose `claimed_columns` are `fields`."""

    @abstractmethod
    def stored_at(self) -> Any:
        """When an item was stored: it grows with the id (both are set as the row is
        inserted)."""

    @abstractmethod
    def prunable(self, cutoff: datetime) -> Any:
        """The items nothing needs any more, finished before `cutoff` (see `prune`)."""

    def _release(self, lease: Lease, **values: Any) -> bool:
        """End the claim `lease` with `values` set. False if it was gone."""
        with self.engine.begin() as connection:
            return self._release_on(connection, lease, **values)

    def _release_on(self, connection: Connection, lease: Lease, **values: Any) -> bool:
        """`_release`, on `connection` (in the caller's transaction)."""
        model = self.model
        statement = update(model).where(held(model))
        statement = statement.values(claim_token=None, lease_expires_at=None, **values)
        return bool(connection.execute(statement, held_params(lease)).rowcount)

    def renew(self, lease: Lease) -> bool:
        """Extend a live claim's lease (its worker is alive). False if the claim is gone."""
        statement = update(self.model).where(held(self.model))
        statement = statement.values(lease_expires_at=self.clock() + self.lease)
        with self.single.begin() as connection:
            return bool(connection.execute(statement, held_params(lease)).rowcount)

    def standing(self, lease: Lease) -> Standing:
        """Renew `lease` and say where its claim stands: held, or why not (the item is gone
        with its forgotten learner, or another worker holds it now)."""
        if self.renew(lease):
            return Standing.HELD
        there = exists().where(self.model.id == lease.id)
        with self.single.connect() as connection:
            return (
                Standing.LOST if connection.execute(select(there)).scalar() else Standing.FORGOTTEN
            )

    def retry_later(self, lease: Lease, delay_seconds: float, error: str) -> bool:
        """Give the item back to be tried again after `delay_seconds`."""
        return self._release(
            lease,
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
        `prunable`); the number deleted. Unfinished items, retries and the replies still to
        deliver are never touched, however old.

        It walks the table in id order, `batch` ids at a time, each page one short DELETE
        by primary key range: no statement reads or locks more than a page, whatever the
        table holds, and it stops at the first page stored after `cutoff` (later ones are
        newer still). Claims read only the unfinished items, so they never wait for it."""
        model, stored_at = self.model, self.stored_at()
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
            statement = delete(model).where(*page, self.prunable(cutoff))
            with self.single.begin() as connection:
                deleted += connection.execute(statement).rowcount
            if end is None or end.stored_at >= cutoff:
                return deleted
            after = end.id
