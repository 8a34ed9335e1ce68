"""Recall's table: what was folded out of the summary, indexed for search, and the names of
the FTS5 tables SQLite keeps beside it. Alembic migrations mirror this file, with the other table
modules (memory/database/schema.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memory.database.models import Base, Id, UTCDateTime


class RecallEntry(Base):
    """One thing recall can find (memory/recall/search.py): a folded-out message, learner's or
    Pam's, or a correction of a folded learner message, as "original → corrected (explanation)".
    Written in the fold's own transaction, so the index holds exactly what the summary has taken.
    `terms` is what the search matches: on Postgres the tsvector of the text (the learner's
    language's stems and the plain words, accents removed where `unaccent` is there), under a
    GIN index without a pending list, keyed by the learner's id too where `btree_gin` is there
    (migration 0019); on SQLite the Snowball stems of the text's words (the words themselves
    for a language without a stemmer), accent-free, each prefixed with the learner's id, which
    the FTS5 table `recall_fts` indexes (kept in step by triggers; see migration 0005 and
    memory/recall_terms.py)."""

    __tablename__ = "recall_entries"
    __table_args__ = (
        Index("ix_recall_entries_learner_id_said_at", "learner_id", "said_at"),
        Index(
            "ix_recall_entries_terms",
            "learner_id",
            "terms",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ).ddl_if(dialect="postgresql"),
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
# leave them out (memory/database/schema.py's `compared_on`).
RECALL_FTS = "recall_fts"
RECALL_FTS_TABLES = frozenset(
    {RECALL_FTS, *(f"{RECALL_FTS}_{part}" for part in ("data", "idx", "docsize", "config"))}
)
