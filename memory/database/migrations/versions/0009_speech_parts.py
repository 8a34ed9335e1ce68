"""speech parts: a reply's spoken copy is queued as an outbox part of its own, spoken by a
speech lane after the text went out (issue 26)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    op.add_column(
        "outbox", sa.Column("speak", sa.Boolean(), server_default=sa.false(), nullable=False)
    )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("speak")
