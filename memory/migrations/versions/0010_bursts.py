"""bursts: the (status, id) queue indexes dropped: SQLite's planner took them for the claim's
lookups over the partial indexes and read every unfinished item (issue 27)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("inbox", "outbox"):
        op.drop_index(f"ix_{table}_status_id", table_name=table)


def downgrade() -> None:
    for table in ("inbox", "outbox"):
        op.create_index(f"ix_{table}_status_id", table, ["status", "id"])
