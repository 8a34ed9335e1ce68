"""What Pam remembers of a learner beyond the unfolded messages: the rolling summary and the
learned profile, each written compare-and-set so a racing writer wins over a slow one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from memory.db import Tables
from memory.models import Profile, Summary
from memory.records import LearnerGone, ProfileState, SummaryState


def _summary_state(row: Summary) -> SummaryState:
    return SummaryState(row.text, row.tokens, row.watermark, row.version, row.folds, row.updated_at)


def _profile_state(row: Profile) -> ProfileState:
    return ProfileState(
        dict(row.data or {}), row.watermark, row.version, row.messages_processed, row.updated_at
    )


class MemoryState(Tables):
    """The summary and the profile, read and written."""

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
        self, learner_id: int, expected_version: int, text: str, tokens: int, watermark: int
    ) -> bool:
        """Write a new summary and its watermark together, only if nobody wrote since
        `expected_version` and the learner still exists. True if written."""
        with self.sessions.begin() as session:
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
