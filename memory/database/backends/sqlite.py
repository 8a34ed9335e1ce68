"""SQLite: the hot writes as short transactions of plain statements (its round trips are
in-process and cost next to nothing), compare-and-set claims, a WAL checkpoint that clears
/forget's bytes from the files (and says when it could not), and workers that poll."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row, insert, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.dml import Insert

from memory.database.backends.base import RECALL_COLUMNS, Backend
from memory.database.claims import ACCEPT, ADMIT, NOTE_TURNED_AWAY, Accepting
from memory.database.db import SQLITE_BUSY_SECONDS
from memory.database.models import MemoryJob
from memory.database.models_queue import InboxItem
from memory.database.models_recall import RECALL_FTS, RecallEntry
from memory.database.statements import REVIEW_JOB_AGAIN
from memory.recall_terms import learner_terms, snowball_language, terms_of
from memory.wakeup import InboxListener

# Every connection's wait for the write lock (make_engine's), restored after a checkpoint.
BUSY_TIMEOUT_MS = int(SQLITE_BUSY_SECONDS * 1000)

# FTS5's own 'secure-delete' option (SQLite 3.42+) removes a deleted row's terms from the
# index at once. Without it they stay in old index segments until those are merged, so
# /forget merges the whole index (`optimize`) instead; see `after_forget`.
FTS_SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42)
# Whether the table has it on: a database migrated under an older SQLite has not.
_FTS_SECURE_DELETE_SET = text(f"SELECT v FROM {RECALL_FTS}_config WHERE k = 'secure-delete'")

_INDEX_RECALL = insert(RecallEntry)
# One MATCH of the learner's own terms (see recall_terms.learner_terms), ranked by bm25: its
# statistics are then the learner's own too (a word they use all the time weighs less).
_RECALL_CANDIDATES = text(
    f"""
    SELECT e.id, e.kind, e.role, e.text, e.said_at, -bm25({RECALL_FTS}) AS relevance
    FROM {RECALL_FTS} JOIN recall_entries AS e ON e.id = {RECALL_FTS}.rowid
    WHERE {RECALL_FTS} MATCH :match
    ORDER BY bm25({RECALL_FTS})
    LIMIT :limit
    """
).columns(**RECALL_COLUMNS)


def _phrase(term: str) -> str:
    """`term` as an FTS5 string: in double quotes, any inside doubled, so it is only ever a
    word to match, never query syntax."""
    return '"' + term.replace('"', '""') + '"'


def recall_match(learner_id: int, found: Sequence[str], language: str | None) -> str:
    """The FTS5 query: any of the learner's terms for the words `found` and their stems."""
    terms = learner_terms(learner_id, list(found), snowball_language(language))
    return " OR ".join(_phrase(term) for term in terms)


class SqliteBackend(Backend):
    """SQLite's way: one writer at a time, so a claim's compare-and-set needs no row lock."""

    one_writer = True
    # Each turn's writes queue for the one lock (and its busy timeout hides the wait), and
    # claims race their compare-and-set: fewer lanes, still far more than one model call.
    inbox_lanes = 16
    memory_lanes = 4

    accepting = Accepting(
        *(statement.returning(InboxItem.id) for statement in (ACCEPT, ADMIT, NOTE_TURNED_AWAY))
    )
    ask_review_job = sqlite.insert(MemoryJob).on_conflict_do_update(
        index_elements=["learner_id", "kind"], set_=REVIEW_JOB_AGAIN
    )

    def lock_next(self, query: Any, table: Any) -> Any:
        """SQLite has no SKIP LOCKED: the claim's compare-and-set keeps claims apart."""
        return query

    def mark_job(self, values: Mapping[str, Any], on_conflict_set: Mapping[str, Any]) -> Insert:
        """SQLite's INSERT … ON CONFLICT DO UPDATE."""
        statement = sqlite.insert(MemoryJob).values(**values)
        return statement.on_conflict_do_update(
            index_elements=["learner_id", "kind"], set_=dict(on_conflict_set)
        )

    def index_recall(
        self, connection: Connection, rows: Sequence[Mapping[str, Any]], language: str | None
    ) -> None:
        """The entries with their terms (Snowball stems, the learner's own); a trigger adds
        them to the FTS5 table."""
        if not rows:
            return
        snowball = snowball_language(language)
        entries = [
            {**row, "terms": terms_of(row["learner_id"], row["text"], snowball)} for row in rows
        ]
        connection.execute(_INDEX_RECALL, entries)

    def recall_candidates(
        self,
        connection: Connection,
        learner_id: int,
        found: Sequence[str],
        language: str | None,
        limit: int,
    ) -> list[Row[Any]]:
        """One FTS5 MATCH, every term quoted, ranked by bm25."""
        match = recall_match(learner_id, found, language)
        return list(connection.execute(_RECALL_CANDIDATES, {"match": match, "limit": limit}))

    def after_forget(self, *, indexed: bool) -> None:
        """secure_delete zeroes the freed pages, but the FTS5 index's old segments keep a
        deleted row's terms until they are merged, unless the table has FTS5's
        'secure-delete' option on (set by migration 0005 where SQLite is 3.42+, and only
        honoured there), so merge them all into one (at 1,000,000 entries about half a
        second, bench/recall_scale.py). A learner with nothing in the index (not `indexed`:
        no fold yet) costs no merge. The write-ahead log still holds the old pages: see
        `clear_files`."""
        with self.engine.begin() as connection:
            secure = FTS_SECURE_DELETE and connection.execute(_FTS_SECURE_DELETE_SET).scalar()
            if indexed and not secure:
                connection.exec_driver_sql(
                    f"INSERT INTO {RECALL_FTS}({RECALL_FTS}) VALUES ('optimize')"
                )

    clears_files = True

    def clear_files(self, wait_seconds: float) -> bool:
        """The write-ahead log holds every page a transaction wrote, erased rows' old
        versions too, and the database file holds them until a checkpoint copies the newer
        pages over them: one `wal_checkpoint(TRUNCATE)` does both and empties the log. It
        cannot while another connection reads an older snapshot (or writes): it waits for
        them, blocking new writers meanwhile, so only `wait_seconds`, and says whether it
        completed (`busy` is 0) instead of pretending it did."""
        wait_ms = max(0, int(wait_seconds * 1000))
        with self.engine.connect() as connection:
            connection.exec_driver_sql(f"PRAGMA busy_timeout = {wait_ms}")
            try:
                busy, _, _ = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
            except OperationalError:  # another checkpoint is under way: not done by us
                return False
            finally:
                connection.exec_driver_sql(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return not busy

    def inbox_listener(self, wake: Callable[[], None]) -> InboxListener | None:
        """None: SQLite cannot notify another process; its workers poll."""
        return None
