"""Chat retention: llm_usage.calls, the calls a row stands for once a month's rows are rolled
into one; llm_usage indexed by learner and time instead of learner alone; and an index on
corrections.message_id, by which a pruned message's corrections are deleted (issue 30)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every row so far is one call.
    op.add_column("llm_usage", sa.Column("calls", sa.Integer(), server_default="1", nullable=False))
    op.create_index("ix_corrections_message_id", "corrections", ["message_id"])
    # By learner and time (the learner alone was indexed): the budgets read a learner's rows
    # of today, retention a month's.
    op.create_index("ix_llm_usage_learner_id_created_at", "llm_usage", ["learner_id", "created_at"])
    op.drop_index("ix_llm_usage_learner_id", table_name="llm_usage")


def downgrade() -> None:
    op.create_index("ix_llm_usage_learner_id", "llm_usage", ["learner_id"])
    op.drop_index("ix_llm_usage_learner_id_created_at", table_name="llm_usage")
    op.drop_index("ix_corrections_message_id", table_name="corrections")
    # A rolled-up row counts as one call again (its token sums stay): the rows it merged
    # can't be told apart any more.
    with op.batch_alter_table("llm_usage") as batch:
        batch.drop_column("calls")
