"""review_pending: a turn's grades, written with its reply and graded by the "review" memory
job, off the reply lanes (issue 30)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "review_pending",
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("used", sa.JSON(), nullable=False),
        sa.Column("missed", sa.JSON(), nullable=False),
        sa.Column("offered", sa.JSON(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_review_pending_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_review_pending_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("learner_id", "message_id", name=op.f("pk_review_pending")),
    )


def downgrade() -> None:
    op.drop_table("review_pending")
