"""scrubs: a /forget whose erased bytes a SQLite checkpoint has yet to clear from the files,
retried until it can (issue 27)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "scrubs",
        sa.Column("id", ID, nullable=False),
        sa.Column("inbox_id", ID, nullable=True),
        sa.Column("requested_at", WHEN, nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("tried_at", WHEN, nullable=True),
        sa.Column("last_error", sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scrubs")),
    )


def downgrade() -> None:
    op.drop_table("scrubs")
