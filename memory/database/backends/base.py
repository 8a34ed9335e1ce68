"""The one interface to what differs between the databases Pam runs on, and the write path
both share: a message accepted (with each database's own statements: Postgres' wake the
workers), a claim finished and the reply stored in short transactions of plain statements,
which Postgres replaces with one statement only for the reply (bench/write_paths.py measured
what that saves); row locking, the memory-job upsert, the cleanup after /forget, and waking
workers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Connection, Engine, Float, Integer, Row, String, Text, select
from sqlalchemy.sql.dml import Insert
from sqlalchemy.types import TypeEngine

from memory.database import db
from memory.database.claims import (
    INBOX_READY,
    Accepting,
    Finishing,
    admission_values,
    turned_away_values,
)
from memory.database.models import UTCDateTime
from memory.database.records import (
    PAM,
    ReplyRecord,
    SavedReply,
)
from memory.database.statements import (
    INSERT_CORRECTIONS,
    INSERT_PENDING,
    INSERT_USAGE,
    REVIEW_JOB_ROW,
    correction_rows,
    insert_message,
    pending_row,
    read_backlog,
)
from memory.wakeup import InboxListener

# The columns of a recall search's rows (`Backend.recall_candidates`), typed as both
# backends' textual statements return them.
RECALL_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": Integer(),
    "kind": String(),
    "role": String(),
    "text": Text(),
    "said_at": UTCDateTime(),
    "relevance": Float(),
}


class Backend(ABC):
    """One database's way of running the statements that differ between databases, on
    `engine`."""

    # Whether the database has one write lock for all (SQLite): a statement that may write,
    # a claim, holds up every other writer while it runs, even when it finds nothing.
    one_writer = False
    # A worker's inbox lanes unless PAM_WORKER_THREADS says: as many turns in flight as a
    # worker keeps waiting on the model at once. Each holds a thread, never a connection
    # while it waits, so many cost little where writers do not queue for one lock.
    inbox_lanes = 128
    # Memory jobs (folds, profiles, review grading) a worker runs at once unless
    # PAM_MEMORY_THREADS says: like a turn, each mostly waits on the model without a
    # connection. Four kept 200 learners' profiles learned every 12 messages instead of 5.
    memory_lanes = 32
    # The memory_jobs upsert that asks for the review job, built at import in the database's
    # dialect; its parameters are the learner's id and `REVIEW_JOB_ROW`.
    ask_review_job: ClassVar[Insert]
    # `accept`'s statements in the database's way, built at import.
    accepting: ClassVar[Accepting]

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.single = db.autocommit(engine)  # for work of one statement

    @abstractmethod
    def lock_next(self, query: Any, table: Any) -> Any:
        """`query` (the next claimable queue item's id, from `table`) with the row locked as
        this database can, so that claims running at once take different items."""

    def accept(self, row: Mapping[str, Any], now: datetime, max_queued: int = 0) -> bool:
        """Insert one inbound message (`row`: the inbox columns it sets) received at `now`,
        waking the workers where the database can (`accepting`); True. With `max_queued`, not
        if its address has that many unfinished items already: then the note that it was
        turned away is stored instead, unless one is waiting, and False. Raises IntegrityError
        for a redelivery. Each INSERT counts as it inserts, one statement (on Postgres
        committed by itself); two web requests of one address at once may each count the
        other's message not there yet: the bound holds to within the web's concurrent
        requests."""
        values = admission_values(dict(row), now, max_queued)
        accept, admit, note = self.accepting
        with self.single.begin() as connection:
            if connection.execute(admit if max_queued else accept, values).first() is not None:
                return True
            connection.execute(note, turned_away_values(values))
        return False

    def finish(self, finishing: Finishing, parts: Sequence[str]) -> list[int] | None:
        """Finish the inbox claim and queue `parts` for delivery, in one transaction: the
        queued replies' ids in order, or None (and nothing written) if the claim was lost."""
        with self.engine.begin() as connection:
            return finishing.run(connection, parts)

    def save_reply(
        self,
        reply: ReplyRecord,
        backlog_limit: int,
        now: datetime,
        finish: tuple[Finishing, Sequence[str]] | None = None,
    ) -> SavedReply:
        """Store Pam's reply with its usage and corrections, the review grades it leaves for
        the review job (and the ask for that job), and read the memory backlog as of the reply
        (at most `backlog_limit` unread learner messages), in one transaction; with `finish`
        the inbox claim is finished and its parts queued in it too (`SavedReply.ids` is what
        `finish` returns), and whether another inbox message is ready for a claim is read
        with it. Raises IntegrityError if the message has a reply already or the learner is
        gone, with nothing written."""
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
            if reply.review is not None:
                connection.execute(INSERT_PENDING, pending_row(reply, now))
                job = {"learner_id": reply.learner_id, **REVIEW_JOB_ROW}
                connection.execute(self.ask_review_job, job)
            backlog = read_backlog(connection, reply.learner_id, backlog_limit)
            if finish is None:
                return SavedReply(stored, backlog, None)
            ids = finish[0].run(connection, finish[1])
            ready = connection.execute(select(INBOX_READY), {"now": now}).scalar()
        return SavedReply(stored, backlog, ids, bool(ready))

    @abstractmethod
    def mark_job(self, values: Mapping[str, Any], on_conflict_set: Mapping[str, Any]) -> Insert:
        """The INSERT of a memory-job row with `values` that sets `on_conflict_set` instead
        when the learner's row of that kind exists."""

    @abstractmethod
    def index_recall(
        self, connection: Connection, rows: Sequence[Mapping[str, Any]], language: str | None
    ) -> None:
        """Insert recall entries (`rows`: RecallEntry's columns but `id` and `terms`) of a
        learner whose target language is `language` (as their settings hold it), on
        `connection`, in its transaction."""

    @abstractmethod
    def recall_candidates(
        self,
        connection: Connection,
        learner_id: int,
        found: Sequence[str],
        language: str | None,
        limit: int,
    ) -> list[Row[Any]]:
        """The learner's `limit` entries most relevant to any of the words `found` (from
        recall_terms.query_words), best first: their id, kind, role, text, said_at and
        `relevance` (higher is better). `found` is never empty."""

    @abstractmethod
    def after_forget(self, *, indexed: bool) -> None:
        """Whatever the database needs, once /forget's rows are deleted, so that no live
        structure keeps what they held; `indexed`: whether the learner had anything in the
        recall index. The files are cleared afterwards, by `clear_files`."""

    # Whether what /forget erased stays in the database's files until Pam clears them
    # (`clear_files`): SQLite's write-ahead log. Postgres deletes logically; VACUUM reuses
    # the space in its own time (docs/how/remembers.md, "Forgetting").
    clears_files = False

    def clear_files(self, wait_seconds: float) -> bool:
        """Clear erased rows' bytes from the database's files, waiting at most `wait_seconds`
        for other connections; True if that completed (nothing to do where `clears_files`
        is False)."""
        return True

    @abstractmethod
    def inbox_listener(self, wake: Callable[[], None]) -> InboxListener | None:
        """A listener that calls `wake` when a message arrives, or None where the database
        cannot tell (its workers poll)."""
