"""What operators look at: the learners Pam knows (found by channel address, or listed a page
at a time), one learner's memory-job state, and the rows /forget must leave at zero."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from memory.database.claims import CLAIMED, PENDING
from memory.database.db import Tables
from memory.database.models import Learner, MemoryJob, Message
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER_TABLES

# The largest id a learner can have (a signed 64-bit key): a bigger one names no learner.
MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class LearnerEntry:
    """One learner as an operator's directory lists them: who, where, since when, their
    explicit settings, and when they (or Pam) last wrote."""

    id: int
    address: str
    display_name: str | None
    target_language: str | None
    native_language: str | None
    level: str | None
    voice_replies: bool
    created_at: datetime
    last_message_at: datetime | None


# The newest message's time, read through (learner_id, id): the message with the highest id
# is the newest, so no index on the time is needed.
_LAST_MESSAGE_AT = (
    select(Message.created_at)
    .where(Message.learner_id == Learner.id)
    .order_by(Message.id.desc())
    .limit(1)
    .correlate(Learner)
    .scalar_subquery()
)
_ENTRY = select(
    Learner.id,
    Learner.external_id,
    Learner.display_name,
    Learner.target_language,
    Learner.native_language,
    Learner.level,
    Learner.voice_replies,
    Learner.created_at,
    _LAST_MESSAGE_AT.label("last_message_at"),
)


@dataclass(frozen=True)
class QueueState:
    """How much of a queue is waiting: items pending and claimed, and when the oldest of
    them came in (None when none waits)."""

    pending: int
    claimed: int
    oldest_at: datetime | None


def _entry(row: Any) -> LearnerEntry:
    return LearnerEntry(
        id=row.id,
        address=row.external_id,
        display_name=row.display_name,
        target_language=row.target_language,
        native_language=row.native_language,
        level=row.level,
        voice_replies=bool(row.voice_replies),
        created_at=row.created_at,
        last_message_at=row.last_message_at,
    )


class Inspection(Tables):
    """Read-only states and counts for operators and for proving /forget."""

    def learner_at(self, address: str) -> LearnerEntry | None:
        """The learner whose channel address is exactly `address`, or None."""
        with self.single.connect() as connection:
            row = connection.execute(_ENTRY.where(Learner.external_id == address)).first()
        return _entry(row) if row is not None else None

    def learner_by_id(self, learner_id: int) -> LearnerEntry | None:
        """The learner with id `learner_id`, or None (also for an id no learner can have)."""
        if not 0 < learner_id <= MAX_ID:
            return None
        with self.single.connect() as connection:
            row = connection.execute(_ENTRY.where(Learner.id == learner_id)).first()
        return _entry(row) if row is not None else None

    def learners_after(self, after: int, limit: int) -> list[LearnerEntry]:
        """Up to `limit` learners with an id above `after`, by id (keyset paging: a page
        never skips or repeats a learner, however many come and go meanwhile)."""
        if after >= MAX_ID:
            return []
        with self.single.connect() as connection:
            rows = connection.execute(
                _ENTRY.where(Learner.id > after).order_by(Learner.id).limit(limit)
            )
            return [_entry(row) for row in rows]

    def queue_state(self, queue: type[InboxItem] | type[OutboxItem]) -> QueueState:
        """The inbox's or the outbox's waiting items (read through their partial indexes of
        unfinished items: the finished ones, however many, are not read)."""
        arrived = InboxItem.received_at if queue is InboxItem else OutboxItem.created_at
        unfinished = queue.status.in_((PENDING, CLAIMED))
        with self.single.connect() as connection:
            counts = dict(
                connection.execute(
                    select(queue.status, func.count()).where(unfinished).group_by(queue.status)
                ).all()
            )
            oldest = connection.execute(
                select(arrived).where(unfinished).order_by(queue.id).limit(1)
            ).scalar_one_or_none()
        return QueueState(int(counts.get(PENDING, 0)), int(counts.get(CLAIMED, 0)), oldest)

    def job_states(self, learner_id: int) -> list[dict[str, Any]]:
        """The learner's memory-job coordination rows (for operators)."""
        with self.sessions() as session:
            rows = session.scalars(
                select(MemoryJob).where(MemoryJob.learner_id == learner_id).order_by(MemoryJob.kind)
            )
            return [
                {
                    "kind": row.kind,
                    "running": row.running,
                    "dirty": row.dirty,
                    "lease_expires_at": row.lease_expires_at,
                    "runs": row.runs,
                    "failures": row.failures,
                    "last_error": row.last_error,
                    "updated_at": row.updated_at,
                }
                for row in rows
            ]

    def rows_about(self, learner_id: int, external_id: str) -> dict[str, int]:
        """How many rows in each table are about the learner (used to prove /forget)."""
        counts: dict[str, int] = {}
        with self.sessions() as session:
            for model in LEARNER_TABLES:
                counts[model.__tablename__] = int(
                    session.scalar(
                        select(func.count())
                        .select_from(model)
                        .where(model.learner_id == learner_id)
                    )
                    or 0
                )
            for queue in (InboxItem, OutboxItem):
                counts[queue.__tablename__] = int(
                    session.scalar(
                        select(func.count()).select_from(queue).where(queue.address == external_id)
                    )
                    or 0
                )
            counts["learners"] = int(
                session.scalar(
                    select(func.count())
                    .select_from(Learner)
                    .where((Learner.id == learner_id) | (Learner.external_id == external_id))
                )
                or 0
            )
        return counts
