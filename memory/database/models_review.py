"""Review's tables: each learner's recurring mistake patterns as FSRS-scheduled items, their
grades, the /review under way, and the grades a turn left for the review job. Alembic
migrations mirror this file, with the other table modules (memory/database/schema.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.clock import utcnow
from memory.database.models import Base, Id, UTCDateTime


class ReviewItem(Base):
    """One recurring mistake pattern of one learner, scheduled for review with FSRS: the
    card's fields (state, step, stability, difficulty, due, last_review) as the `fsrs` package
    keeps them, the pattern's name and key (memory/review/patterns.py groups corrections by it), its
    latest example, and when Pam last offered it in a reply prompt."""

    __tablename__ = "review_items"
    __table_args__ = (
        Index("ix_review_items_learner_id_due", "learner_id", "due"),
        UniqueConstraint("learner_id", "rule_key"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    rule: Mapped[str] = mapped_column(String(200))  # the name shown: the latest wording
    rule_key: Mapped[str] = mapped_column(String(200))  # the normalised name (exact matches)
    terms: Mapped[str] = mapped_column(Text, default="")  # its normalised words, for near ones
    category: Mapped[str] = mapped_column(String(40), default="other")
    original: Mapped[str] = mapped_column(Text)  # the latest example
    corrected: Mapped[str] = mapped_column(Text)
    explanation: Mapped[str] = mapped_column(Text, default="")
    mistakes: Mapped[int] = mapped_column(Integer, default=0)  # times made
    successes: Mapped[int] = mapped_column(Integer, default=0)  # times used correctly
    # The FSRS card.
    state: Mapped[int] = mapped_column(Integer)  # fsrs.State: 1 learning, 2 review, 3 relearning
    step: Mapped[int | None] = mapped_column(Integer)
    stability: Mapped[float | None] = mapped_column(Float)
    difficulty: Mapped[float | None] = mapped_column(Float)
    due: Mapped[datetime] = mapped_column(UTCDateTime())
    last_review: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The learner message of the latest mistake: the item is not offered while that message
    # is still in the reply prompt's verbatim window.
    last_message_id: Mapped[int] = mapped_column(Id, default=0)
    offers: Mapped[int] = mapped_column(Integer, default=0)  # prompts since its last grade
    offered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The learner message whose reply prompt last carried it: Pam invites one review at a
    # time, at most once per verbatim window, and looks at the next message for the answer.
    offered_message_id: Mapped[int] = mapped_column(Id, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ReviewLog(Base):
    """One grade of a review item: the FSRS rating and what earned it — "mistake" (made
    again), "used" (used correctly in chat), "missed" (got wrong again where the reply
    invited it), "review" (an answer in /review). At most one per item and learner message,
    so a turn run again after a crash never grades twice."""

    __tablename__ = "review_logs"
    __table_args__ = (
        UniqueConstraint("item_id", "message_id"),
        Index("ix_review_logs_learner_id_reviewed_at", "learner_id", "reviewed_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("review_items.id", ondelete="CASCADE"))
    rating: Mapped[int] = mapped_column(Integer)  # fsrs.Rating: 1 again … 4 easy
    source: Mapped[str] = mapped_column(String(10))
    message_id: Mapped[int | None] = mapped_column(Id)  # the learner message graded
    state: Mapped[int] = mapped_column(Integer)  # the card's state after this grade
    reviewed_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ReviewSession(Base):
    """A learner's /review under way: the exercise Pam asked, the items still to come, and
    the score so far. One per learner; chatting about something else ends it."""

    __tablename__ = "review_sessions"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    item_id: Mapped[int] = mapped_column(ForeignKey("review_items.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))  # "fix", "gap" or "translate"
    exercise: Mapped[str] = mapped_column(Text)  # what Pam asked
    expected: Mapped[str] = mapped_column(Text)  # the answer it takes
    queue: Mapped[list[int]] = mapped_column(JSON, default=list)  # item ids still to come
    asked: Mapped[int] = mapped_column(Integer, default=1)
    right: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ReviewPending(Base):
    """A turn's grades still to write: the learner message they grade (its corrections are
    stored with it) and the items its reply reported used or missed and its prompt offered.
    The reply's write adds it, in the same transaction; the "review" memory job grades it
    and deletes it (memory/review/reviews.py's `record_pending`), off the reply lanes."""

    __tablename__ = "review_pending"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    used: Mapped[list[int]] = mapped_column(JSON, default=list)
    missed: Mapped[list[int]] = mapped_column(JSON, default=list)
    offered: Mapped[list[int]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
