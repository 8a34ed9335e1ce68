"""What Pam remembers of a learner beyond the unfolded messages: the rolling summary and the
learned profile, each written compare-and-set so a racing writer wins over a slow one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from memory.clock import Clock, utcnow
from memory.database.backends import backend_for
from memory.database.db import Tables
from memory.database.models import Profile, Summary
from memory.database.records import LearnerGone, ProfileState, SummaryState
from memory.recall.search import index_folded


def _summary_state(row: Summary) -> SummaryState:
    return SummaryState(row.text, row.tokens, row.watermark, row.version, row.folds, row.updated_at)


def _profile_state(row: Profile) -> ProfileState:
    return ProfileState(
        dict(row.data or {}), row.watermark, row.version, row.messages_processed, row.updated_at
    )


class MemoryState(Tables):
    """The summary and the profile, read and written."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        super().__init__(engine, clock)
        self.backend = backend_for(engine)

    @staticmethod
    def _get(session: Session, model: type[Summary] | type[Profile], learner_id: int) -> Any:
        row = session.get(model, learner_id)
        if row is None:
            raise LearnerGone(learner_id)
        return row

    def summary(self, learner_id: int) -> SummaryState:
        """The learner's current rolling summary."""
        with self.sessions() as session:
            return _summary_state(self._get(session, Summary, learner_id))

    def profile(self, learner_id: int) -> ProfileState:
        """The learner's current learned profile."""
        with self.sessions() as session:
            return _profile_state(self._get(session, Profile, learner_id))

    def save_summary(
        self,
        learner_id: int,
        expected_version: int,
        text: str,
        tokens: int,
        watermark: int,
        previous_watermark: int | None = None,
    ) -> bool:
        """Write a new summary and its watermark together, only if nobody wrote since
        `expected_version` and the learner still exists. True if written. What the new
        watermark folds out of the conversation (the messages after `previous_watermark`,
        the watermark at `expected_version` as the caller read it) goes into the recall index
        in the same transaction, so a write that loses its race indexes nothing. Without
        `previous_watermark` it is read first, which on SQLite can fail with "database is
        locked" when another write lands between that read and the update: the fold passes it."""
        with self.sessions.begin() as session:
            previous = previous_watermark
            if previous is None:
                previous = session.scalar(
                    select(Summary.watermark).where(
                        Summary.learner_id == learner_id, Summary.version == expected_version
                    )
                )
                if previous is None:
                    return False
            result = session.execute(
                update(Summary)
                .where(Summary.learner_id == learner_id, Summary.version == expected_version)
                .values(
                    text=text,
                    tokens=tokens,
                    watermark=watermark,
                    folds=Summary.folds + 1,
                    version=Summary.version + 1,
                    updated_at=self.clock(),
                )
            )
            if not result.rowcount:  # type: ignore[attr-defined]
                return False  # another writer (or /forget) came between the read and here
            index_folded(session.connection(), self.backend, learner_id, previous, watermark)
            return True

    def save_profile_data(
        self, learner_id: int, expected_version: int, data: dict[str, Any]
    ) -> bool:
        """Replace the profile's data with `data` — Pam's own change, such as a plan marked
        followed up: the watermark, the count of messages learned from and the time learned
        stay — only if nobody wrote since `expected_version` (a profile update that came
        between wins; the caller reads again). True if written."""
        with self.sessions.begin() as session:
            result = session.execute(
                update(Profile)
                .where(Profile.learner_id == learner_id, Profile.version == expected_version)
                .values(data=data, version=Profile.version + 1)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def save_profile(
        self,
        learner_id: int,
        expected_version: int,
        data: dict[str, Any] | None,
        watermark: int,
        processed: int,
    ) -> bool:
        """Advance the profile watermark (and replace the data unless `data` is None), only if
        nobody wrote since `expected_version` and the learner still exists. True if written."""
        values: dict[str, Any] = {
            "watermark": watermark,
            "messages_processed": Profile.messages_processed + processed,
            "version": Profile.version + 1,
            "updated_at": self.clock(),
        }
        if data is not None:
            values["data"] = data
        with self.sessions.begin() as session:
            result = session.execute(
                update(Profile)
                .where(Profile.learner_id == learner_id, Profile.version == expected_version)
                .values(**values)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]
