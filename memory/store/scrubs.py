"""Scrubs: clearing what /forget erased from the database's files, after the rows are gone.

Deleting rows is not enough on SQLite: the write-ahead log keeps every page a transaction
wrote (the erased rows' old versions too), and the database file keeps them until a
checkpoint copies newer pages over them. A scrub is that checkpoint, with the log truncated.

It comes last. A /forget in chat is itself a message, stored with the learner's address and
name, and its confirmation a reply queued to that address: both are unlinked (their address
and name cleared) only when the /forget is answered and the confirmation sent. So /forget
records a scrub that waits for its message's own rows to be finished, and the worker runs it
then (bot/worker/scrubbing.py). The operator's /forget has no such rows: it scrubs at once.

A checkpoint cannot complete while another connection reads an older snapshot; it then says
so (`busy`), the scrub stays recorded with its attempts and the reason, and it is tried again
with a backoff until it completes. The rows hold no one's data: only the /forget message's
inbox id, times and counts. On Postgres nothing is recorded (docs/how/remembers.md: VACUUM)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, exists, insert, or_, select, update

from memory.database.backends import backend_for
from memory.database.claims import UNFINISHED
from memory.database.db import Tables
from memory.database.models import Scrub
from memory.database.models_queue import InboxItem, OutboxItem

# How long one checkpoint waits for other connections to let go: it blocks every new writer
# while it waits (a webhook's accept, a lane's claim), so briefly, and is tried again.
CHECKPOINT_WAIT_SECONDS = 0.2
# The first pause between tries within one run, doubled after each.
FIRST_PAUSE_SECONDS = 0.05
BUSY = "a checkpoint could not complete: another connection holds an older snapshot"


class Outcome(enum.Enum):
    """What a run of the scrubs came to."""

    NONE = "none"  # nothing recorded
    WAITING = "waiting"  # recorded, but each /forget's own rows are not finished yet
    DONE = "done"  # those ready are done (others may still wait for their confirmation)
    BUSY = "busy"  # those ready could not be done: tried again later


@dataclass(frozen=True)
class PendingScrub:
    """A scrub not done yet, as an operator sees it."""

    id: int
    inbox_id: int | None
    requested_at: datetime
    attempts: int
    tried_at: datetime | None
    last_error: str | None


def _ready() -> ColumnElement[bool]:
    """Scrubs whose /forget message (if any) is answered and its replies finished: sent or
    given up, and so unlinked from the learner."""
    unfinished_message = exists().where(
        InboxItem.id == Scrub.inbox_id, InboxItem.status.in_(UNFINISHED)
    )
    unfinished_reply = exists().where(
        OutboxItem.inbox_id == Scrub.inbox_id, OutboxItem.status.in_(UNFINISHED)
    )
    return or_(Scrub.inbox_id.is_(None), ~unfinished_message & ~unfinished_reply)


_READY = select(Scrub.id).where(_ready()).order_by(Scrub.id)
_ANY = select(Scrub.id).limit(1)


class Scrubs(Tables):
    """The scrubs /forget recorded, and running them."""

    def record(self, connection: Connection, inbox_id: int | None) -> None:
        """Record a scrub in the caller's transaction (the one that erased the rows), where
        the database needs one; `inbox_id`: the /forget message it waits for."""
        if not backend_for(self.engine).clears_files:
            return
        connection.execute(insert(Scrub).values(inbox_id=inbox_id, requested_at=self.clock()))

    def pending(self) -> list[PendingScrub]:
        """Every scrub not done yet, oldest first."""
        columns = (Scrub.id, Scrub.inbox_id, Scrub.requested_at, Scrub.attempts)
        query = select(*columns, Scrub.tried_at, Scrub.last_error).order_by(Scrub.id)
        with self.single.connect() as connection:
            return [PendingScrub(**row._mapping) for row in connection.execute(query)]

    def run(self, within: float = 0.0) -> Outcome:
        """Run the scrubs that are ready: checkpoint, trying again with a growing pause for
        `within` seconds while another connection holds an older snapshot. Done, they are
        deleted; not done, each records the attempt and why."""
        with self.single.connect() as connection:
            ready = list(connection.execute(_READY).scalars())
            if not ready:
                return Outcome.WAITING if connection.execute(_ANY).first() else Outcome.NONE
        backend = backend_for(self.engine)
        deadline = time.monotonic() + within
        pause = FIRST_PAUSE_SECONDS
        while not backend.clear_files(CHECKPOINT_WAIT_SECONDS):
            if time.monotonic() + pause > deadline:
                self._tried(ready)
                return Outcome.BUSY
            time.sleep(pause)
            pause *= 2
        # After the checkpoint: this write holds nothing of anyone, in the log or the file.
        with self.engine.begin() as connection:
            connection.execute(delete(Scrub).where(Scrub.id.in_(ready)))
        return Outcome.DONE

    def _tried(self, ids: list[int]) -> None:
        values = {"attempts": Scrub.attempts + 1, "tried_at": self.clock(), "last_error": BUSY}
        with self.engine.begin() as connection:
            connection.execute(update(Scrub).where(Scrub.id.in_(ids)).values(**values))
