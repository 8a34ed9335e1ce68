"""partial indexes over unfinished queue items, so claims never read past finished ones

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UNFINISHED = "status IN ('pending', 'claimed')"


def upgrade() -> None:
    where = sa.text(UNFINISHED)
    for table in ("inbox", "outbox"):
        op.create_index(
            f"ix_{table}_unfinished_id",
            table,
            ["id"],
            postgresql_where=where,
            sqlite_where=where,
        )
        op.create_index(
            f"ix_{table}_unfinished_address_id",
            table,
            ["address", "id"],
            postgresql_where=where,
            sqlite_where=where,
        )


def downgrade() -> None:
    for table in ("inbox", "outbox"):
        op.drop_index(f"ix_{table}_unfinished_address_id", table_name=table)
        op.drop_index(f"ix_{table}_unfinished_id", table_name=table)
