"""The inbox's and outbox's rows as tests read them (detached, oldest first; the `engine`
fixture starts every test with empty queues), and pending rows made claimable at once."""

from __future__ import annotations

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from memory.clock import utcnow
from memory.database.claims import PENDING
from memory.database.models_queue import InboxItem, OutboxItem
from tests.support import queue_items


def inbox_items(engine: Engine) -> list[InboxItem]:
    """Every inbox row, oldest first."""
    return queue_items(engine, InboxItem)


def outbox_items(engine: Engine) -> list[OutboxItem]:
    """Every outbox row, oldest first."""
    return queue_items(engine, OutboxItem)


def outbox_rows(engine: Engine, address: str) -> list[OutboxItem]:
    """The outbox rows to `address`, oldest first."""
    return queue_items(engine, OutboxItem, OutboxItem.address == address)


def queue_rows(engine: Engine) -> int:
    """Inbox and outbox rows in the whole database."""
    with Session(engine) as session:
        inbox = session.scalar(select(func.count()).select_from(InboxItem)) or 0
        outbox = session.scalar(select(func.count()).select_from(OutboxItem)) or 0
        return int(inbox) + int(outbox)


def make_available_now(
    engine: Engine, model: type[InboxItem] | type[OutboxItem] = OutboxItem
) -> None:
    """Let every pending row of `model` be claimed at once: a test skips a retry's backoff
    instead of sleeping through it."""
    with engine.begin() as connection:
        connection.execute(
            update(model).where(model.status == PENDING).values(available_at=utcnow())
        )
