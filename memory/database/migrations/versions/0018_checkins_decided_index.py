"""Check-ins indexed by state and decided_at: the sending rate counts those written in the last
minute, and each round looks at the queued ones of the last 30 days, without reading every
check-in ever written (a month of 10,000 learners writes 100,000); and the waiting check-ins by
learner, which each round asks about every learner

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

WAITING = "state IN ('scheduled', 'claimed')"

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_checkins_state_decided_at", "checkins", ["state", "decided_at"], unique=False
    )
    op.create_index(
        "ix_checkins_waiting_learner_id",
        "checkins",
        ["learner_id"],
        unique=False,
        postgresql_where=sa.text(WAITING),
        sqlite_where=sa.text(WAITING),
    )


def downgrade() -> None:
    op.drop_index("ix_checkins_waiting_learner_id", table_name="checkins")
    op.drop_index("ix_checkins_state_decided_at", table_name="checkins")
