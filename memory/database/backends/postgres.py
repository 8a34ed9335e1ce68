"""Postgres: the reply's write in one statement and one round trip (data-modifying CTEs, built in
memory/database/backends/postgres_statements.py) where the shared transaction takes 7 to 10,
claims that skip the rows other workers hold, and a NOTIFY in the statement that stores each
message, so that idle workers wake at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, TextClause, bindparam, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.selectable import TextualSelect

from memory.database.backends.base import RECALL_COLUMNS, Backend
from memory.database.backends.postgres_statements import (
    ACCEPTING,
    SAVE_REPLY,
    SAVE_REPLY_AND_FINISH,
    correction_arrays,
    review_values,
)
from memory.database.claims import Finishing
from memory.database.models import MemoryJob, UTCDateTime
from memory.database.records import (
    PAM,
    Backlog,
    ReplyRecord,
    SavedReply,
    StoredMessage,
)
from memory.database.statements import (
    REVIEW_JOB_AGAIN,
    backlog_in,
)
from memory.recall_terms import pg_config
from memory.wakeup import InboxListener

# -- recall ------------------------------------------------------------------------------------

# Where the `unaccent` extension lives ("" when it is not installed: words keep their accents).
_UNACCENT_SCHEMA = text(
    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace "
    "WHERE e.extname = 'unaccent'"
)


def _recall_statements(unaccent: str) -> tuple[TextClause, TextualSelect]:
    """The INSERT of recall entries and the search, with accents removed by the `unaccent`
    function in schema `unaccent` (an identifier, quoted), or kept when it is "". Each
    entry's vector is the learner's language's (stems, its stopwords dropped) and the plain
    words' ('simple': names and unstemmed words match too); a query is made the same way."""

    def plain(value: str) -> str:
        if not unaccent:
            return value
        return f"{unaccent}.unaccent(CAST(:accents AS regdictionary), {value})"

    vector = (
        f"to_tsvector(CAST(:config AS regconfig), {plain(':text')}) "
        f"|| to_tsvector('simple', {plain(':text')})"
    )
    index = text(
        "INSERT INTO recall_entries (learner_id, kind, role, text, said_at, source_id, terms) "
        f"VALUES (:learner_id, :kind, :role, :text, :said_at, :source_id, {vector})"
    ).bindparams(bindparam("said_at", type_=UTCDateTime()))
    # The query: each word (a quoted operand) in the learner's language's configuration (its
    # stems) OR as written ('simple'), the words ORed; a word that configuration drops as a
    # stopword ("estoy", "tengo") is left out of both, for ts_rank does not weigh words by how
    # rare they are, and such a word would count as much as "entrenando". The OR is written
    # as text by Postgres itself (tsquery's output quotes every lexeme) and read back.
    # ts_rank's normalization 1 divides by 1 + log(length): a long message that mentions a
    # word once does not outrank a short one about it. The GIN index on (learner_id, terms)
    # reads only the learner's entries of the words (with `btree_gin`, migration 0019; its
    # operator class has no bigint = integer, hence the CAST); the btree on (learner_id,
    # said_at) serves a learner with few.
    search = text(
        f"""
        WITH operand AS (
            SELECT to_tsquery(CAST(:config AS regconfig), {plain("o")}) AS stemmed,
                   to_tsquery('simple', {plain("o")}) AS exact
            FROM unnest(CAST(:operands AS text[])) AS o
        ),
        q AS (
            SELECT CAST(string_agg('(' || CAST(stemmed || exact AS text) || ')', ' | ')
                        AS tsquery) AS q
            FROM operand
            WHERE numnode(stemmed) > 0
        )
        SELECT e.id, e.kind, e.role, e.text, e.said_at, ts_rank(e.terms, q.q, 1) AS relevance
        FROM recall_entries AS e, q
        WHERE e.learner_id = CAST(:learner_id AS bigint) AND e.terms @@ q.q
        ORDER BY relevance DESC, e.said_at DESC
        LIMIT :limit
        """
    ).columns(**RECALL_COLUMNS)
    return index, search


def _operand(word: str) -> str:
    """`word` as a quoted tsquery operand, so it is only ever a word to match."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


class PostgresBackend(Backend):
    """Postgres' way: many writers at once, row locks, and a round trip per statement."""

    accepting = ACCEPTING
    ask_review_job = postgresql.insert(MemoryJob).on_conflict_do_update(
        index_elements=["learner_id", "kind"], set_=REVIEW_JOB_AGAIN
    )

    def lock_next(self, query: Any, table: Any) -> Any:
        """FOR UPDATE SKIP LOCKED: a claim passes over the rows other claims are taking."""
        return query.with_for_update(skip_locked=True, of=table)

    def save_reply(
        self,
        reply: ReplyRecord,
        backlog_limit: int,
        now: datetime,
        finish: tuple[Finishing, Sequence[str]] | None = None,
    ) -> SavedReply:
        """One statement, one round trip, with the finish in two more CTEs."""
        model, input_tokens, output_tokens = reply.usage
        values: dict[str, Any] = {
            "now": now,
            "learner_id": reply.learner_id,
            "reply_to": reply.reply_to,
            "reply_content": reply.content,
            "reply_tokens": reply.tokens,
            "usage_model": model,
            "usage_input": input_tokens,
            "usage_output": output_tokens,
            "limit": backlog_limit,
        }
        values |= correction_arrays(reply.corrections) | review_values(reply)
        statement, more = (
            (SAVE_REPLY_AND_FINISH, finish[0].values(finish[1])) if finish else (SAVE_REPLY, {})
        )
        with self.single.connect() as connection:
            rows = connection.execute(statement, more | values).all()
        count, unfolded, unread = backlog_in(rows)
        # The statement's snapshot predates the reply; it is unfolded too.
        backlog = Backlog(count + 1, unfolded + reply.tokens, unread)
        stored = StoredMessage(rows[0].reply_id, PAM, reply.content, reply.tokens)
        if finish is None:
            return SavedReply(stored, backlog, None)
        head = rows[0]  # queued_ids: NULL when no reply was queued
        ids = (head.queued_ids or []) if head.held else None
        return SavedReply(stored, backlog, ids, head.inbox_ready)

    def mark_job(self, values: Mapping[str, Any], on_conflict_set: Mapping[str, Any]) -> Insert:
        """Postgres' INSERT … ON CONFLICT DO UPDATE."""
        statement = postgresql.insert(MemoryJob).values(**values)
        return statement.on_conflict_do_update(
            index_elements=["learner_id", "kind"], set_=dict(on_conflict_set)
        )

    def _recall(self, connection: Connection) -> tuple[TextClause, TextualSelect, dict[str, str]]:
        """The recall statements for this database (whether it has `unaccent` is looked up
        once) and the parameter they need for it."""
        if not hasattr(self, "_recall_sql"):
            schema = connection.execute(_UNACCENT_SCHEMA).scalar() or ""
            quoted = connection.dialect.identifier_preparer.quote_schema(schema) if schema else ""
            accents = {"accents": f"{quoted}.unaccent"} if quoted else {}
            self._recall_sql = (*_recall_statements(quoted), accents)
        return self._recall_sql

    def index_recall(
        self, connection: Connection, rows: Sequence[Mapping[str, Any]], language: str | None
    ) -> None:
        """Each entry's tsvector made by Postgres in the INSERT."""
        if not rows:
            return
        index, _, accents = self._recall(connection)
        extra = {"config": pg_config(language), **accents}
        connection.execute(index, [{**row, **extra} for row in rows])

    def recall_candidates(
        self,
        connection: Connection,
        learner_id: int,
        found: Sequence[str],
        language: str | None,
        limit: int,
    ) -> list[Row[Any]]:
        """One statement: the words, each a quoted operand, in both configurations, ORed."""
        _, search, accents = self._recall(connection)
        values = {
            "learner_id": learner_id,
            "operands": [_operand(word) for word in found],
            "config": pg_config(language),
            "limit": limit,
            **accents,
        }
        return list(connection.execute(search, values))

    def after_forget(self, *, indexed: bool) -> None:
        """Nothing: the deleted rows are gone from every index at once. Their bytes stay in
        the table's and the write-ahead log's files until VACUUM reuses the space and the
        segments are recycled (docs/how/remembers.md, "Forgetting")."""

    def inbox_listener(self, wake: Callable[[], None]) -> InboxListener | None:
        """A LISTEN on the channel every stored message notifies (see `accept`)."""
        return InboxListener(self.engine, wake)
