"""The learner's side (issue 29): the native language Pam guessed, the correction density,
a /forget waiting for its confirmation, the platform's language hint on an inbox item, and
buttons under a reply.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs: on SQLite a batch would copy the table and drop its AUTOINCREMENT.
    op.add_column("learners", sa.Column("native_guess", sa.String(length=60), nullable=True))
    op.add_column(
        "learners",
        sa.Column("corrections", sa.String(length=10), server_default="normal", nullable=False),
    )
    op.add_column("learners", sa.Column("forget_code", sa.String(length=32), nullable=True))
    op.add_column(
        "learners", sa.Column("forget_asked_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("inbox", sa.Column("language_hint", sa.String(length=35), nullable=True))
    op.add_column("outbox", sa.Column("buttons", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("buttons")
    with op.batch_alter_table("inbox") as batch:
        batch.drop_column("language_hint")
    with op.batch_alter_table("learners") as batch:
        for column in ("forget_asked_at", "forget_code", "corrections", "native_guess"):
            batch.drop_column(column)
