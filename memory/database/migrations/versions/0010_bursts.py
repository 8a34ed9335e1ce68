"""bursts: when Pam last said a limit stopped a learner's turn (said once a minute, not once
per message of a burst), and the (status, id) queue indexes dropped: SQLite's planner took
them for the claim's lookups over the partial indexes and read every unfinished item
(issue 27)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    op.add_column("learners", sa.Column("limit_said_at", sa.DateTime(timezone=True)))
    for table in ("inbox", "outbox"):
        op.drop_index(f"ix_{table}_status_id", table_name=table)


def downgrade() -> None:
    for table in ("inbox", "outbox"):
        op.create_index(f"ix_{table}_status_id", table, ["status", "id"])
    with op.batch_alter_table("learners") as batch:
        batch.drop_column("limit_said_at")
