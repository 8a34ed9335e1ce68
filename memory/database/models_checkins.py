"""Check-ins' tables (issue 31): each learner's check-in state (whether they want Pam to write
first, their timezone, the hour they like, how their last check-ins went) and the check-ins
themselves, one row per learner and local day — scheduled, claimed by a worker, queued as Pam's
turn in the outbox, answered, or skipped and why. UNIQUE (learner_id, local_day) makes "at
most one a day" and "exactly once" facts of the database. Alembic migrations mirror this file,
with the other table modules (memory/database/schema.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from memory.clock import utcnow
from memory.database.models import Base, Id, UTCDateTime

# A check-in's states: planned for its due time; taken by a worker under a lease; written as
# Pam's turn and queued in the outbox; answered by the learner's next message; or skipped
# (`skip_reason` says why). Only the first two are unfinished.
SCHEDULED, CLAIMED, QUEUED, ANSWERED, SKIPPED = (
    "scheduled",
    "claimed",
    "queued",
    "answered",
    "skipped",
)
WAITING = (SCHEDULED, CLAIMED)
# The skip reason of a check-in written but not sent by its outbox part's deadline (quiet hours
# began, or WhatsApp's window closed, while its delivery was retried or waited): delivery's.
LATE = "late"
# The same, as a partial index's condition (a query that states it literally can use it).
WAITING_SQL = "state IN ('scheduled', 'claimed')"


class CheckinState(Base):
    """One learner's check-in preferences and history. `preference`: "on", "off" or None (never
    said: no check-ins, since a learner opts in). `timezone`: an IANA name, `timezone_stated`
    when the learner said it (/timezone), else Pam's guess. `disabled_reason`: why Pam stopped
    on her own (the learner blocked the bot), until the learner turns check-ins on again."""

    __tablename__ = "checkin_states"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    preference: Mapped[str | None] = mapped_column(String(3))
    preference_set_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    timezone: Mapped[str | None] = mapped_column(String(64))
    timezone_stated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The local hour the learner usually writes at, as last learned (for operators to see).
    preferred_hour: Mapped[int | None] = mapped_column(Integer)
    last_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    unanswered: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    disabled_reason: Mapped[str | None] = mapped_column(String(40))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Checkin(Base):
    """One check-in: due at `due_at`, on the learner's `local_day` (YYYY-MM-DD in their
    timezone). Once written it names Pam's message (`message_id`) and the outbox part that
    delivers it (`outbox_id`); `follows_up` and `topic` are the composer's operator-facing
    labels, never the message's text."""

    __tablename__ = "checkins"
    __table_args__ = (
        UniqueConstraint("learner_id", "local_day"),
        Index("ix_checkins_state_due_at", "state", "due_at"),
        # The rate's count of those written in the last minute, and the rounds' look at the
        # queued ones of the last 30 days: by decided_at, not every one ever written.
        Index("ix_checkins_state_decided_at", "state", "decided_at"),
        # Whether a learner has a check-in waiting, which a round asks of every learner: the
        # waiting ones only, one per learner, not every one they ever had.
        Index(
            "ix_checkins_waiting_learner_id",
            "learner_id",
            postgresql_where=text(WAITING_SQL),
            sqlite_where=text(WAITING_SQL),
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    local_day: Mapped[str] = mapped_column(String(10))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(10), default=SCHEDULED)
    skip_reason: Mapped[str | None] = mapped_column(String(40))
    claim_token: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    template: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    follows_up: Mapped[str | None] = mapped_column(String(20))
    topic: Mapped[str | None] = mapped_column(String(100))
    message_id: Mapped[int | None] = mapped_column(Id)
    outbox_id: Mapped[int | None] = mapped_column(Id)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
