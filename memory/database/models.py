"""Pam's tables, as SQLAlchemy 2.0 typed models: the declarative base and column types every
table module shares, and the store's own tables (learners, their conversation, memory state,
corrections, usage, memory jobs, charts and voice clips, the service's keys, metrics and
scrubs). The queues', review's and recall's tables are in memory/database/models_queue.py,
models_review.py and models_recall.py; memory/database/schema.py gathers them all. Alembic
migrations mirror these modules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from memory.clock import utcnow

# Ids only ever grow (AUTOINCREMENT on SQLite too), so a forgotten learner's id or a
# deleted message's id is never handed out again: watermarks and stale jobs stay safe.
Id = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the database keeps."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; Pam stores UTC-aware timestamps only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Learner(Base):
    """A person chatting with Pam on one channel, with their explicit settings."""

    __tablename__ = "learners"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    external_id: Mapped[str] = mapped_column(String(200), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(100))
    target_language: Mapped[str | None] = mapped_column(String(60))
    native_language: Mapped[str | None] = mapped_column(String(60))
    level: Mapped[str | None] = mapped_column(String(2))
    # /voice on: Pam's replies come as speech too (the chat part; corrections stay text).
    voice_replies: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The native language Pam guessed before the learner said one (an English name, as
    # native_language): from Telegram's language_code or a WhatsApp number's country. Pam's
    # own words are in native_language, else in this, else in English (bot/i18n).
    native_guess: Mapped[str | None] = mapped_column(String(60))
    # /corrections few|normal|all: how many of the learner's mistakes a reply points out.
    corrections: Mapped[str] = mapped_column(String(10), default="normal", server_default="normal")
    # /forget asked and not yet confirmed: the code a confirmation must carry, and when it
    # was asked (an unconfirmed request expires).
    forget_code: Mapped[str | None] = mapped_column(String(32))
    forget_asked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # When Pam last said that a limit stopped the learner's turn ("slow down"): said once a
    # minute at most, not once per message of a burst (bot/turn/limits.py).
    limit_said_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Message(Base):
    """One message of the conversation, learner's or Pam's, with its token count."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_learner_id_id", "learner_id", "id"),
        Index("ix_messages_inbox_id", "inbox_id", unique=True),
        Index("ix_messages_reply_to", "reply_to", unique=True),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(10))  # "learner" or "pam"
    content: Mapped[str] = mapped_column(Text)
    tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Idempotent turns: a learner message knows the inbox item it came from, and Pam's reply
    # knows the learner message it answers, so a turn re-run after a crash stores nothing twice.
    inbox_id: Mapped[int | None] = mapped_column(Id)
    reply_to: Mapped[int | None] = mapped_column(Id)
    # A learner message that was a voice note: its length. `content` is then the transcript
    # (or, when it could not be transcribed, a note saying so: `untranscribed`).
    spoken_seconds: Mapped[float | None] = mapped_column(Float)
    untranscribed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class Summary(Base):
    """The rolling summary: everything up to `watermark` (a message id) folded into `text`."""

    __tablename__ = "summaries"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    text: Mapped[str] = mapped_column(Text, default="")
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    watermark: Mapped[int] = mapped_column(Id, default=0)
    folds: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Profile(Base):
    """The learned profile: learner messages up to `watermark` have been read into `data`."""

    __tablename__ = "profiles"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    watermark: Mapped[int] = mapped_column(Id, default=0)
    messages_processed: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Correction(Base):
    """One mistake Pam corrected: what the learner wrote, the fix, and why."""

    __tablename__ = "corrections"
    # By message: chat retention deletes a message's corrections with it (and the foreign
    # key's cascade looks them up so), without reading the whole table.
    __table_args__ = (
        Index("ix_corrections_message_id", "message_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    original: Mapped[str] = mapped_column(Text)
    corrected: Mapped[str] = mapped_column(Text)
    explanation: Mapped[str] = mapped_column(Text, default="")
    category: Mapped[str] = mapped_column(String(40), default="other")
    # The pattern's name as the model gave it ("bueno → buen before a masculine singular
    # noun"); "" when it gave none. Review groups corrections by it (memory/review/patterns.py).
    rule: Mapped[str] = mapped_column(String(200), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Chart(Base):
    """A /progress chart: the PNG as rendered and its two-line summary, kept until its signed
    link expires (retention) or the learner is forgotten. `nonce` goes into the link, so a
    link names one chart and can't be guessed from another."""

    __tablename__ = "charts"
    __table_args__ = (
        Index("ix_charts_learner_id", "learner_id"),
        Index("ix_charts_created_at", "created_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    nonce: Mapped[str] = mapped_column(String(32))
    png: Mapped[bytes] = mapped_column(LargeBinary)
    summary: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class VoiceClip(Base):
    """A spoken reply (OGG/Opus from the speech model), kept until it is delivered and its
    signed link (WhatsApp's media URL, as for charts) has expired, or the learner is
    forgotten."""

    __tablename__ = "voice_clips"
    __table_args__ = (
        Index("ix_voice_clips_learner_id", "learner_id"),
        Index("ix_voice_clips_created_at", "created_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    nonce: Mapped[str] = mapped_column(String(32))
    audio: Mapped[bytes] = mapped_column(LargeBinary)
    content_type: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ServiceKey(Base):
    """A secret the service makes for itself when the operator sets none (the chart links'
    signing key): made once, by whichever process needs it first, shared by all."""

    __tablename__ = "service_keys"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Usage(Base):
    """One LLM call's cost (or, past chat retention, a month's calls of one model and
    purpose: `calls`): model, purpose (reply / summary / profile / transcription / speech) and
    tokens. An audio call also records what it is billed by — seconds heard, characters
    spoken — and its tokens are those converted at the configured rates
    (PAM_TRANSCRIPTION_TOKENS_PER_SECOND, PAM_SPEECH_TOKENS_PER_CHAR), so that the budgets
    count it."""

    __tablename__ = "llm_usage"
    # By learner and time: a learner's budget counts today's rows, and chat retention rolls
    # up a month's, without reading the learner's others.
    __table_args__ = (
        Index("ix_llm_usage_learner_id_created_at", "learner_id", "created_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(20))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    # Server defaults only: a Python-side default would be bound as NULL in the hot path's
    # INSERTs, which name the columns they set (memory/database/backends/postgres_statements.py).
    audio_seconds: Mapped[float] = mapped_column(Float, server_default="0")
    speech_chars: Mapped[int] = mapped_column(Integer, server_default="0")
    # The calls this row stands for: 1 as recorded; chat retention rolls a month's rows of one
    # model and purpose into one (memory/store/history.py), their sums and this count.
    calls: Mapped[int] = mapped_column(Integer, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryJob(Base):
    """Coordination state of one learner's fold, profile or review job (running/dirty, with a
    lease)."""

    __tablename__ = "memory_jobs"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)  # "fold", "profile", "review"
    running: Mapped[bool] = mapped_column(Boolean, default=False)
    dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    claim_token: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    runs: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(300))
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class MetricSnapshot(Base):
    """One process's worker-side metrics (memory/metrics.py), as it last copied them: what a
    scrape of the web app adds up across machines (memory/metric_snapshots.py). The values
    are absolute, so a sum over instances only grows; an instance long gone is folded into
    the row "retired". No learner's data: labels are channels, purposes, models, kinds."""

    __tablename__ = "metric_snapshots"

    instance: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(20))  # "worker", "memory-jobs", "retired", …
    samples: Mapped[str] = mapped_column(Text)  # JSON: family → type, help, samples
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class Scrub(Base):
    """A /forget whose erased rows may still lie in the database's files: on SQLite in the
    write-ahead log and in the pages a checkpoint has not copied back yet, until a checkpoint
    truncates the log (memory/store/scrubs.py). It names nobody: `inbox_id` is the /forget message,
    whose own rows (it, its confirmation) must be unlinked first; None for the operator's."""

    __tablename__ = "scrubs"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    inbox_id: Mapped[int | None] = mapped_column(Id)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    tried_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(String(300))
