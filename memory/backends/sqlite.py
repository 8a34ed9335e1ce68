"""SQLite: the hot writes as short transactions of plain statements (its round trips are
in-process and cost next to nothing), compare-and-set claims, a WAL checkpoint after /forget,
and workers that poll."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql.dml import Insert

from memory.backends.base import Backend, ContextRead
from memory.claims import Finishing
from memory.models import InboxItem, MemoryJob
from memory.records import PAM, ActivityWindow, Backlog, ReplyRecord, StoredMessage
from memory.statements import (
    INSERT_CORRECTIONS,
    INSERT_USAGE,
    correction_rows,
    insert_message,
    read_backlog,
)
from memory.wakeup import InboxListener

_ACCEPT = insert(InboxItem)


class SqliteBackend(Backend):
    """SQLite's way: one writer at a time, so a claim's compare-and-set needs no row lock."""

    def lock_next(self, query: Any, table: Any) -> Any:
        """SQLite has no SKIP LOCKED: the claim's compare-and-set keeps claims apart."""
        return query

    def accept(self, row: Mapping[str, Any], now: datetime) -> None:
        """A plain INSERT; nobody listens (SQLite workers poll)."""
        with self.engine.begin() as connection:
            connection.execute(_ACCEPT, {**row, "received_at": now, "available_at": now})

    def finish(self, finishing: Finishing, parts: Sequence[str]) -> list[int] | None:
        """The finish and the replies' INSERT in one transaction."""
        with self.engine.begin() as connection:
            return finishing.run(connection, parts)

    def save_reply(
        self,
        reply: ReplyRecord,
        backlog_limit: int,
        now: datetime,
        finish: tuple[Finishing, Sequence[str]] | None = None,
    ) -> tuple[StoredMessage, Backlog, list[int] | None]:
        """Reply, usage, corrections, the backlog read and the finish in one transaction."""
        model, input_tokens, output_tokens = reply.usage
        with self.engine.begin() as connection:
            stored = insert_message(
                connection,
                reply.learner_id,
                PAM,
                reply.content,
                reply.tokens,
                now,
                reply_to=reply.reply_to,
            )
            usage = {
                "learner_id": reply.learner_id,
                "model": model,
                "purpose": "reply",
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "created_at": now,
            }
            connection.execute(INSERT_USAGE, usage)
            if reply.corrections:
                rows = correction_rows(reply.learner_id, reply.reply_to, reply.corrections, now)
                connection.execute(INSERT_CORRECTIONS, rows)
            backlog = read_backlog(connection, reply.learner_id, backlog_limit)
            ids = finish[0].run(connection, finish[1]) if finish else None
        return stored, backlog, ids

    def begin_turn(
        self,
        learner_id: int,
        message: StoredMessage,
        inbox_id: int | None,
        window: ActivityWindow | None,
        now: datetime,
    ) -> ContextRead | None:
        """Never in one statement: SQLite's RETURNING cannot feed a read in a CTE."""
        return None

    def mark_job(self, values: Mapping[str, Any], on_conflict_set: Mapping[str, Any]) -> Insert:
        """SQLite's INSERT … ON CONFLICT DO UPDATE."""
        statement = sqlite.insert(MemoryJob).values(**values)
        return statement.on_conflict_do_update(
            index_elements=["learner_id", "kind"], set_=dict(on_conflict_set)
        )

    def after_forget(self) -> None:
        """secure_delete zeroes the freed pages, but the write-ahead log still holds the old
        ones until a checkpoint copies it back and truncates it: do that now."""
        with self.engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def inbox_listener(self, wake: Callable[[], None]) -> InboxListener | None:
        """None: SQLite cannot notify another process; its workers poll."""
        return None
