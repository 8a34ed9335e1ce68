"""Pam's tables, as SQLAlchemy 2.0 typed models. Alembic migrations mirror this file."""

from __future__ import annotations

from collections.abc import Callable
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
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
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
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # When Pam last said that a limit stopped the learner's turn ("slow down"): said once a
    # minute at most, not once per message of a burst (bot/limits.py).
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
    __table_args__ = {"sqlite_autoincrement": True}

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
    # noun"); "" when it gave none. Review groups corrections by it (memory/patterns.py).
    rule: Mapped[str] = mapped_column(String(200), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ReviewItem(Base):
    """One recurring mistake pattern of one learner, scheduled for review with FSRS: the
    card's fields (state, step, stability, difficulty, due, last_review) as the `fsrs` package
    keeps them, the pattern's name and key (memory/patterns.py groups corrections by it), its
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


class RecallEntry(Base):
    """One thing recall can find (memory/recall.py): a folded-out message, learner's or Pam's,
    or a correction of a folded learner message, as "original → corrected (explanation)".
    Written in the fold's own transaction, so the index holds exactly what the summary has
    taken. `terms` is what the search matches: on Postgres the tsvector of the text (the
    learner's language's stems and the plain words, accents removed where `unaccent` is
    there), GIN-indexed; on SQLite the Snowball stems of the text's words (the words
    themselves for a language without a stemmer), accent-free, each prefixed with the
    learner's id, which the FTS5 table `recall_fts` indexes (kept in step
    by triggers; see migration 0005 and memory/recall_terms.py)."""

    __tablename__ = "recall_entries"
    __table_args__ = (
        Index("ix_recall_entries_learner_id_said_at", "learner_id", "said_at"),
        Index("ix_recall_entries_terms", "terms", postgresql_using="gin").ddl_if(
            dialect="postgresql"
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(10))  # "message" or "correction"
    role: Mapped[str] = mapped_column(String(10))  # "learner" or "pam"
    text: Mapped[str] = mapped_column(Text)
    terms: Mapped[str] = mapped_column(Text().with_variant(TSVECTOR(), "postgresql"))
    said_at: Mapped[datetime] = mapped_column(UTCDateTime())
    source_id: Mapped[int] = mapped_column(Id)  # the message's id, or the correction's


# SQLite's full-text index over recall_entries and the tables FTS5 keeps it in: created by
# migration 0005, not by the models (SQLAlchemy has no virtual tables), so schema comparisons
# leave them out; and the indexes only Postgres has (see `compared_on`).
RECALL_FTS = "recall_fts"
RECALL_FTS_TABLES = frozenset(
    {RECALL_FTS, *(f"{RECALL_FTS}_{part}" for part in ("data", "idx", "docsize", "config"))}
)
POSTGRES_ONLY_INDEXES = frozenset({"ix_recall_entries_terms"})


def compared_on(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's `include_object` for a database of `dialect`: whether an object is one the
    models describe there (all but SQLite's FTS5 tables, and Postgres' own indexes
    elsewhere)."""

    def compared(item: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        if type_ == "table":
            return name not in RECALL_FTS_TABLES
        if type_ == "index" and dialect != "postgresql":
            return name not in POSTGRES_ONLY_INDEXES
        return True

    return compared


class Usage(Base):
    """One LLM call's cost: model, purpose (reply / summary / profile / transcription /
    speech) and tokens. An audio call also records what it is billed by — seconds heard,
    characters spoken — and its tokens are those converted at the configured rates
    (PAM_TRANSCRIPTION_TOKENS_PER_SECOND, PAM_SPEECH_TOKENS_PER_CHAR), so that the budgets
    count it."""

    __tablename__ = "llm_usage"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    model: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(20))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    # Server defaults only: a Python-side default would be bound as NULL in the hot path's
    # INSERTs, which name the columns they set (memory/backends/postgres.py).
    audio_seconds: Mapped[float] = mapped_column(Float, server_default="0")
    speech_chars: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryJob(Base):
    """Coordination state of one learner's fold or profile job (running/dirty, with a lease)."""

    __tablename__ = "memory_jobs"

    learner_id: Mapped[int] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(20), primary_key=True)  # "fold" or "profile"
    running: Mapped[bool] = mapped_column(Boolean, default=False)
    dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    claim_token: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    runs: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(300))
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


UNFINISHED_SQL = "status IN ('pending', 'claimed')"


def unfinished_indexes(table: str) -> tuple[Index, Index]:
    """Partial indexes over a queue's unfinished items only: finished ones pile up for as long
    as Pam runs, and a claim must not read past them (it did: 20 ms a claim at 200,000)."""
    where = text(UNFINISHED_SQL)
    return (
        Index(f"ix_{table}_unfinished_id", "id", postgresql_where=where, sqlite_where=where),
        Index(
            f"ix_{table}_unfinished_address_id",
            "address",
            "id",
            postgresql_where=where,
            sqlite_where=where,
        ),
    )


class QueueItem:
    """Columns shared by the inbox and the outbox: a per-address queue with claims and leases.

    status: pending → claimed → done/sent, or failed; a claim whose lease expired (its worker
    died) can be claimed again. `available_at` delays a retry."""

    address: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claim_token: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    available_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_error: Mapped[str | None] = mapped_column(String(300))


class InboxItem(QueueItem, Base):
    """A message received from a channel, persisted before it is acknowledged. Unique per
    channel and platform message id, so a redelivery is recognised."""

    __tablename__ = "inbox"
    __table_args__ = (
        UniqueConstraint("channel", "platform_id"),
        Index("ix_inbox_address_id", "address", "id"),
        *unfinished_indexes("inbox"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    channel: Mapped[str] = mapped_column(String(20))
    platform_id: Mapped[str] = mapped_column(String(100))
    chat_id: Mapped[str] = mapped_column(String(100))
    display_name: Mapped[str | None] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)
    # "text", or what the learner sent instead (voice, photo, …) for a friendly answer.
    kind: Mapped[str] = mapped_column(String(20), default="text", server_default="text")
    # A voice note: where its audio is (memory.messages.VoiceNote as JSON), until answered.
    voice: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class OutboxItem(QueueItem, Base):
    """One reply text to deliver; `seq` orders the texts answering one inbox item."""

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("inbox_id", "seq"),
        Index("ix_outbox_address_id", "address", "id"),
        *unfinished_indexes("outbox"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    inbox_id: Mapped[int | None] = mapped_column(Id)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    channel: Mapped[str] = mapped_column(String(20))
    chat_id: Mapped[str] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)
    # A /progress chart sent with the text as its caption (a photo on Telegram, media on
    # WhatsApp, an image URL in the API's callback); None for text alone.
    chart_id: Mapped[int | None] = mapped_column(Id)
    # A spoken reply (a VoiceClip), sent as a voice message after the reply's text.
    voice_id: Mapped[int | None] = mapped_column(Id)
    # A part to speak: its text is the words, spoken by a speech lane (bot/speaking.py) into
    # `voice_id` after the reply's text went out. Until it is spoken it holds no newer reply
    # to the address back, and delivery passes it over.
    speak: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    platform_message_id: Mapped[str | None] = mapped_column(String(100))


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
    truncates the log (memory/scrubs.py). It names nobody: `inbox_id` is the /forget message,
    whose own rows (it, its confirmation) must be unlinked first; None for the operator's."""

    __tablename__ = "scrubs"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    inbox_id: Mapped[int | None] = mapped_column(Id)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    tried_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(String(300))
