"""voice: voice notes in the inbox until transcribed, spoken messages marked with their length,
learners' spoken-replies switch, audio usage, spoken replies kept for delivery (issue 19)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ADD COLUMNs: on SQLite a batch would copy each table and drop its AUTOINCREMENT
    # (ids must never be handed out again: see memory/database/models.py).
    op.add_column("inbox", sa.Column("voice", sa.Text(), nullable=True))
    op.add_column("outbox", sa.Column("voice_id", ID, nullable=True))
    op.add_column("messages", sa.Column("spoken_seconds", sa.Float(), nullable=True))
    op.add_column(
        "learners",
        sa.Column("voice_replies", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column(
        "llm_usage", sa.Column("audio_seconds", sa.Float(), server_default="0", nullable=False)
    )
    op.add_column(
        "llm_usage", sa.Column("speech_chars", sa.Integer(), server_default="0", nullable=False)
    )
    op.create_table(
        "voice_clips",
        sa.Column("id", ID, nullable=False),
        sa.Column("learner_id", ID, nullable=False),
        sa.Column("nonce", sa.String(length=32), nullable=False),
        sa.Column("audio", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(length=40), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name=op.f("fk_voice_clips_learner_id_learners"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_voice_clips")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_voice_clips_learner_id", "voice_clips", ["learner_id"])
    op.create_index("ix_voice_clips_created_at", "voice_clips", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_voice_clips_created_at", table_name="voice_clips")
    op.drop_index("ix_voice_clips_learner_id", table_name="voice_clips")
    op.drop_table("voice_clips")
    with op.batch_alter_table("llm_usage") as batch:
        batch.drop_column("speech_chars")
        batch.drop_column("audio_seconds")
    with op.batch_alter_table("learners") as batch:
        batch.drop_column("voice_replies")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("spoken_seconds")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("voice_id")
    with op.batch_alter_table("inbox") as batch:
        batch.drop_column("voice")
