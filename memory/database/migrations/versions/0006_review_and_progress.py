"""review and progress: mistake patterns scheduled with FSRS, their grades, /review sessions,
/progress charts and the outbox's chart column, the service's own keys (issue 18)

Existing corrections get an empty rule; the review items start with the next mistake.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
WHEN = sa.DateTime(timezone=True)


def _learner_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["learner_id"],
        ["learners.id"],
        name=op.f(f"fk_{table}_learner_id_learners"),
        ondelete="CASCADE",
    )


def _item_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["item_id"],
        ["review_items.id"],
        name=op.f(f"fk_{table}_item_id_review_items"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    with op.batch_alter_table("corrections") as batch:
        batch.add_column(
            sa.Column("rule", sa.String(length=200), server_default="", nullable=False)
        )
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("chart_id", ID, nullable=True))
    op.create_table(
        "review_items",
        sa.Column("id", ID, nullable=False),
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("rule", sa.String(length=200), nullable=False),
        sa.Column("rule_key", sa.String(length=200), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=40), nullable=False),
        sa.Column("original", sa.Text(), nullable=False),
        sa.Column("corrected", sa.Text(), nullable=False),
        sa.Column("explanation", sa.Text(), nullable=False),
        sa.Column("mistakes", sa.Integer(), nullable=False),
        sa.Column("successes", sa.Integer(), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("stability", sa.Float(), nullable=True),
        sa.Column("difficulty", sa.Float(), nullable=True),
        sa.Column("due", WHEN, nullable=False),
        sa.Column("last_review", WHEN, nullable=True),
        sa.Column("last_message_id", ID, nullable=False),
        sa.Column("offers", sa.Integer(), nullable=False),
        sa.Column("offered_at", WHEN, nullable=True),
        sa.Column("offered_message_id", ID, nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        _learner_fk("review_items"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_items")),
        sa.UniqueConstraint("learner_id", "rule_key", name=op.f("uq_review_items_learner_id")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_review_items_learner_id_due", "review_items", ["learner_id", "due"])
    op.create_table(
        "review_logs",
        sa.Column("id", ID, nullable=False),
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("item_id", ID, nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("message_id", ID, nullable=True),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", WHEN, nullable=False),
        _learner_fk("review_logs"),
        _item_fk("review_logs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_logs")),
        sa.UniqueConstraint("item_id", "message_id", name=op.f("uq_review_logs_item_id")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_review_logs_learner_id_reviewed_at", "review_logs", ["learner_id", "reviewed_at"]
    )
    op.create_table(
        "review_sessions",
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("item_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("exercise", sa.Text(), nullable=False),
        sa.Column("expected", sa.Text(), nullable=False),
        sa.Column("queue", sa.JSON(), nullable=False),
        sa.Column("asked", sa.Integer(), nullable=False),
        sa.Column("right", sa.Integer(), nullable=False),
        sa.Column("started_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        _learner_fk("review_sessions"),
        _item_fk("review_sessions"),
        sa.PrimaryKeyConstraint("learner_id", name=op.f("pk_review_sessions")),
    )
    op.create_table(
        "charts",
        sa.Column("id", ID, nullable=False),
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("nonce", sa.String(length=32), nullable=False),
        sa.Column("png", sa.LargeBinary(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        _learner_fk("charts"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_charts")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_charts_learner_id", "charts", ["learner_id"])
    op.create_index("ix_charts_created_at", "charts", ["created_at"])
    op.create_table(
        "service_keys",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_service_keys")),
    )


def downgrade() -> None:
    op.drop_table("service_keys")
    op.drop_index("ix_charts_created_at", table_name="charts")
    op.drop_index("ix_charts_learner_id", table_name="charts")
    op.drop_table("charts")
    op.drop_table("review_sessions")
    op.drop_index("ix_review_logs_learner_id_reviewed_at", table_name="review_logs")
    op.drop_table("review_logs")
    op.drop_index("ix_review_items_learner_id_due", table_name="review_items")
    op.drop_table("review_items")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("chart_id")
    with op.batch_alter_table("corrections") as batch:
        batch.drop_column("rule")
