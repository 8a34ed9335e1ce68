"""What operators look at about one learner: memory-job state, and the rows /forget must
leave at zero."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from memory.db import Tables
from memory.models import InboxItem, Learner, MemoryJob, OutboxItem
from memory.records import LEARNER_TABLES


class Inspection(Tables):
    """Read-only states and counts for operators and for proving /forget."""

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
