"""A learner's /forget request, between the question and its answer: asked (with a one-time
code a confirmation must carry, and what the erase would take, counted), dropped when the
learner answers anything else. The erase that takes the request is
memory/store/learners.py's `forget_confirmed`, in one transaction with taking it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from memory.database.db import Tables
from memory.database.models import Chart, Correction, Learner, Message, Profile, Summary, VoiceClip
from memory.database.models_review import ReviewItem
from memory.database.records import LearnerGone


@dataclass(frozen=True)
class Holdings:
    """What Pam keeps about a learner, as /forget's question lists it: the conversation's
    messages (theirs and Pam's), whether there is a summary and a learned profile, the
    corrections, the review items, the /progress charts and the spoken replies kept."""

    messages: int
    summary: bool
    profile: bool
    corrections: int
    review_items: int
    charts: int
    voice_clips: int


def _count(model: Any, learner_id: int) -> Any:
    """How many of `model`'s rows are about the learner, as a scalar subquery."""
    return (
        select(func.count())
        .select_from(model)
        .where(model.learner_id == learner_id)
        .scalar_subquery()
    )


class ForgetRequests(Tables):
    """Asking a learner to confirm a /forget, and dropping the question."""

    def ask(self, learner_id: int, code: str, now: datetime) -> Holdings:
        """Record a /forget request with `code`, asked at `now` (an earlier one is replaced:
        its confirmation is stale from here), and count what the erase would take, in one
        transaction. Raises LearnerGone when there is no such learner."""
        holdings = select(
            _count(Message, learner_id).label("messages"),
            select(func.count())
            .select_from(Summary)
            .where(Summary.learner_id == learner_id, Summary.folds > 0)
            .scalar_subquery()
            .label("summary"),
            select(func.count())
            .select_from(Profile)
            .where(Profile.learner_id == learner_id, Profile.updated_at.is_not(None))
            .scalar_subquery()
            .label("profile"),
            _count(Correction, learner_id).label("corrections"),
            _count(ReviewItem, learner_id).label("review_items"),
            _count(Chart, learner_id).label("charts"),
            _count(VoiceClip, learner_id).label("voice_clips"),
        )
        asked = (
            update(Learner)
            .where(Learner.id == learner_id)
            .values(forget_code=code, forget_asked_at=now)
        )
        with self.engine.begin() as connection:
            if not connection.execute(asked).rowcount:
                raise LearnerGone(learner_id)
            row = connection.execute(holdings).one()
        return Holdings(
            messages=int(row.messages),
            summary=bool(row.summary),
            profile=bool(row.profile),
            corrections=int(row.corrections),
            review_items=int(row.review_items),
            charts=int(row.charts),
            voice_clips=int(row.voice_clips),
        )

    def drop(self, learner_id: int) -> bool:
        """Drop the learner's /forget request, if they have one: whether there was one."""
        statement = (
            update(Learner)
            .where(Learner.id == learner_id, Learner.forget_asked_at.is_not(None))
            .values(forget_code=None, forget_asked_at=None)
        )
        with self.single.begin() as connection:
            return bool(connection.execute(statement).rowcount)
