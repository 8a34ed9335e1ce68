"""A check-in's send deadline: outbox.send_before, past which delivery drops the part instead
of sending it (the learner's quiet hours have begun, or WhatsApp's 24-hour window has closed),
and the check-in is skipped as late (issue 31)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    # Parts queued before it have no deadline (NULL), as replies never do.
    op.add_column("outbox", sa.Column("send_before", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("send_before")
