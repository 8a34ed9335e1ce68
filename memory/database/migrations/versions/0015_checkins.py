"""checkins: Pam writes first (issue 31) — each learner's check-in state, the check-ins
themselves (one per learner and local day), and the outbox's check-in parts

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "checkin_states",
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("preference", sa.String(length=3), nullable=True),
        sa.Column("preference_set_at", WHEN, nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("timezone_stated", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("preferred_hour", sa.Integer(), nullable=True),
        sa.Column("last_sent_at", WHEN, nullable=True),
        sa.Column("unanswered", sa.Integer(), server_default="0", nullable=False),
        sa.Column("disabled_reason", sa.String(length=40), nullable=True),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_checkin_states_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("learner_id", name=op.f("pk_checkin_states")),
    )
    op.create_table(
        "checkins",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("local_day", sa.String(length=10), nullable=False),
        sa.Column("due_at", WHEN, nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("skip_reason", sa.String(length=40), nullable=True),
        sa.Column("claim_token", sa.String(length=36), nullable=True),
        sa.Column("lease_expires_at", WHEN, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("template", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("follows_up", sa.String(length=20), nullable=True),
        sa.Column("topic", sa.String(length=100), nullable=True),
        sa.Column("message_id", ID, nullable=True),
        sa.Column("outbox_id", ID, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("decided_at", WHEN, nullable=True),
        sa.Column("answered_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_checkins_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkins")),
        sa.UniqueConstraint("learner_id", "local_day", name=op.f("uq_checkins_learner_id")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_checkins_state_due_at", "checkins", ["state", "due_at"], unique=False)
    # Plain ADD COLUMNs: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    op.add_column(
        "outbox", sa.Column("checkin", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.add_column(
        "outbox", sa.Column("template", sa.Boolean(), server_default=sa.false(), nullable=False)
    )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("template")
        batch.drop_column("checkin")
    op.drop_index("ix_checkins_state_due_at", table_name="checkins")
    op.drop_table("checkins")
    op.drop_table("checkin_states")
