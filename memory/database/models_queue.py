"""The durable queues' tables: the inbox (messages received, persisted before they are
acknowledged) and the outbox (reply parts to deliver), each a per-address queue with claims and
leases. Alembic migrations mirror this file, with the other table modules
(memory/database/schema.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Index, Integer, String, Text, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from memory.clock import utcnow
from memory.database.models import Base, Id, UTCDateTime

UNFINISHED_SQL = "status IN ('pending', 'claimed')"


def unfinished_indexes(table: str) -> tuple[Index, Index]:
    """Partial indexes over a queue's unfinished items only: finished ones pile up for as long
    as Pam runs, and a claim must not read past them (it did: 20 ms a claim at 200,000)."""
    where = text(UNFINISHED_SQL)
    return (
        Index(f"ix_{table}_unfinished_id", "id", postgresql_where=where, sqlite_where=where),
        Index(
            f"ix_{table}_unfinished_address_id",
            "address",
            "id",
            postgresql_where=where,
            sqlite_where=where,
        ),
    )


class QueueItem:
    """Columns shared by the inbox and the outbox: a per-address queue with claims and leases.

    status: pending → claimed → done/sent, or failed; a claim whose lease expired (its worker
    died) can be claimed again. `available_at` delays a retry."""

    address: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claim_token: Mapped[str | None] = mapped_column(String(36))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    available_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_error: Mapped[str | None] = mapped_column(String(300))


class InboxItem(QueueItem, Base):
    """A message received from a channel, persisted before it is acknowledged. Unique per
    channel and platform message id, so a redelivery is recognised."""

    __tablename__ = "inbox"
    __table_args__ = (
        UniqueConstraint("channel", "platform_id"),
        Index("ix_inbox_address_id", "address", "id"),
        *unfinished_indexes("inbox"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    channel: Mapped[str] = mapped_column(String(20))
    platform_id: Mapped[str] = mapped_column(String(100))
    chat_id: Mapped[str] = mapped_column(String(100))
    display_name: Mapped[str | None] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)
    # "text", or what the learner sent instead (voice, photo, …) for a friendly answer.
    kind: Mapped[str] = mapped_column(String(20), default="text", server_default="text")
    # A voice note: where its audio is (memory.messages.VoiceNote as JSON), until answered.
    voice: Mapped[str | None] = mapped_column(Text)
    # The language the sender's app is set to, as the platform tells it (Telegram's
    # language_code, e.g. "de" or "pt-br"): Pam's guess at their native language.
    language_hint: Mapped[str | None] = mapped_column(String(35))
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class OutboxItem(QueueItem, Base):
    """One reply text to deliver; `seq` orders the texts answering one inbox item."""

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("inbox_id", "seq"),
        Index("ix_outbox_address_id", "address", "id"),
        *unfinished_indexes("outbox"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    inbox_id: Mapped[int | None] = mapped_column(Id)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    channel: Mapped[str] = mapped_column(String(20))
    chat_id: Mapped[str] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)
    # A /progress chart sent with the text as its caption (a photo on Telegram, media on
    # WhatsApp, an image URL in the API's callback); None for text alone.
    chart_id: Mapped[int | None] = mapped_column(Id)
    # A spoken reply (a VoiceClip), sent as a voice message after the reply's text.
    voice_id: Mapped[int | None] = mapped_column(Id)
    # A part to speak: its text is the words, spoken by a speech lane (bot/voice/speaking.py) into
    # `voice_id` after the reply's text went out. Until it is spoken it holds no newer reply
    # to the address back, and delivery passes it over.
    speak: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Buttons under the text, as JSON: [[label, command], ...] (bot/channels.py Button); a
    # tap comes back as the command, said by the learner.
    buttons: Mapped[str | None] = mapped_column(Text)
    # A check-in (issue 31): Pam wrote first (inbox_id is None). `template`: outside WhatsApp's
    # 24-hour window, it goes through the operator's approved template, the text its variable.
    checkin: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    template: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # A check-in's deadline: it is not sent from then on (the learner's quiet hours begin, or
    # WhatsApp's 24-hour window closes), but ended as failed and the check-in skipped, "late"
    # (bot/worker/delivery.py). None: no deadline, as for every reply.
    send_before: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    platform_message_id: Mapped[str | None] = mapped_column(String(100))
