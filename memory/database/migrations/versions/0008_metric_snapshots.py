"""metric snapshots: each worker process's metrics, copied for the web app's /metrics to add up
across machines (issue 25)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "metric_snapshots",
        sa.Column("instance", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("samples", sa.Text(), nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.PrimaryKeyConstraint("instance", name=op.f("pk_metric_snapshots")),
    )
    op.create_index(
        "ix_metric_snapshots_updated_at", "metric_snapshots", ["updated_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_metric_snapshots_updated_at", table_name="metric_snapshots")
    op.drop_table("metric_snapshots")
