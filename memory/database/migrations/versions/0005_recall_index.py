"""recall: the index of folded-out messages and their corrections (issue 17)

Creates recall_entries; on SQLite an external-content FTS5 table over it kept in step by
triggers, on Postgres a GIN index on its tsvector (and the `unaccent` extension where it can
be created). Then indexes what existing summaries have already folded: every message up to
each summary's watermark, and those messages' corrections.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from memory.database.backends import backend_for
from memory.database.backends.sqlite import FTS_SECURE_DELETE
from memory.database.extensions import create_extension
from memory.recall.search import index_folded

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

FTS = "recall_fts"
# What FTS5 indexes: each entry's terms, its words' Snowball stems prefixed with the
# learner's id (memory/recall_terms.py: a search reads only that learner's postings). External
# content: the text is kept once, in recall_entries; the triggers feed the index. Entries are
# never updated.
SQLITE_FTS = [
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        terms, content='recall_entries', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    )""",
    f"""CREATE TRIGGER recall_entries_insert AFTER INSERT ON recall_entries BEGIN
        INSERT INTO {FTS}(rowid, terms) VALUES (new.id, new.terms);
    END""",
    f"""CREATE TRIGGER recall_entries_delete AFTER DELETE ON recall_entries BEGIN
        INSERT INTO {FTS}({FTS}, rowid, terms) VALUES ('delete', old.id, old.terms);
    END""",
]


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "recall_entries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column(
            "terms", sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql"), nullable=False
        ),
        sa.Column("said_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "source_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_recall_entries_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recall_entries")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_recall_entries_learner_id_said_at", "recall_entries", ["learner_id", "said_at"]
    )
    if bind.dialect.name == "postgresql":
        # `unaccent` where it can be had; otherwise recall on Postgres keeps accents.
        if not create_extension(bind, "unaccent"):
            log.warning("recall: no unaccent extension; Postgres searches will keep accents")
        op.create_index(
            "ix_recall_entries_terms", "recall_entries", ["terms"], postgresql_using="gin"
        )
    else:
        for statement in SQLITE_FTS:
            bind.exec_driver_sql(statement)
        if FTS_SECURE_DELETE:
            bind.exec_driver_sql(f"INSERT INTO {FTS}({FTS}, rank) VALUES ('secure-delete', 1)")
    _index_what_was_folded(bind)


def _index_what_was_folded(bind: sa.Connection) -> None:
    """Entries for every message a summary has already folded, and their corrections."""
    backend = backend_for(bind.engine)
    learners = bind.execute(
        sa.text("SELECT learner_id, watermark FROM summaries WHERE watermark > 0")
    ).all()
    indexed = sum(index_folded(bind, backend, row.learner_id, 0, row.watermark) for row in learners)
    if learners:
        log.info("recall: indexed %d entries of %d learners", indexed, len(learners))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.drop_index("ix_recall_entries_terms", table_name="recall_entries")
    else:
        bind.exec_driver_sql("DROP TRIGGER recall_entries_delete")
        bind.exec_driver_sql("DROP TRIGGER recall_entries_insert")
        bind.exec_driver_sql(f"DROP TABLE {FTS}")
    op.drop_index("ix_recall_entries_learner_id_said_at", table_name="recall_entries")
    op.drop_table("recall_entries")
