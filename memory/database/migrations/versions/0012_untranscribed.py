"""untranscribed: a learner message that is a voice note Pam could not transcribe says so in a
column, not by the words it was kept as (issue 28)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# How bot/voice/hearing.py kept such a note until now: "🎙 (a voice note of 0:42, not transcribed:
# too long)", with the caption after it when there was one.
KEPT_AS = "🎙 (a voice note of %"


def upgrade() -> None:
    # A plain ADD COLUMN: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    op.add_column(
        "messages",
        sa.Column("untranscribed", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    # The notes kept before: a turn run again after a crash must still know them.
    messages = sa.table(
        "messages",
        sa.column("role", sa.String()),
        sa.column("content", sa.Text()),
        sa.column("untranscribed", sa.Boolean()),
    )
    op.execute(
        messages.update()
        .where(messages.c.role == "learner", messages.c.content.like(KEPT_AS))
        .values(untranscribed=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("untranscribed")
