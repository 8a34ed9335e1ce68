"""Postgres: each hot write in one statement and one round trip (data-modifying CTEs), claims
that skip the rows other workers hold, and a NOTIFY with every message stored, so that idle
workers wake at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Connection,
    Float,
    Integer,
    Row,
    Text,
    TextClause,
    and_,
    bindparam,
    case,
    func,
    insert,
    select,
    text,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.selectable import TextualSelect

from memory.backends.base import RECALL_COLUMNS, Backend, ContextRead
from memory.claims import (
    ADMIT,
    FINISH,
    NOTE_TURNED_AWAY,
    PENDING,
    SAME_FOR_EVERY_REPLY,
    TIMES_OF_A_REPLY,
    Finishing,
    admission_values,
    turned_away_values,
)
from memory.models import Correction, InboxItem, MemoryJob, Message, OutboxItem, Usage, UTCDateTime
from memory.recall_terms import pg_config
from memory.records import (
    LEARNER,
    PAM,
    ActivityWindow,
    Backlog,
    LearnerGone,
    ReplyRecord,
    StoredMessage,
)
from memory.statements import (
    ACTIVITIES,
    COUNTS,
    UNREAD_BY_PROFILE,
    activity_key,
    backlog_in,
    context_query,
    decode_context,
    window_values,
)
from memory.wakeup import CHANNEL, InboxListener

# -- storing a reply --------------------------------------------------------------------------


def _save_reply() -> Any:
    """Pam's reply, the call's usage and the corrections inserted in CTEs, and the memory
    backlog read, in one statement and one round trip: the reply's id (`reply_id`) on every
    row of the backlog's. The backlog is read from the snapshot the statement started with, so
    it leaves out the reply itself: `PostgresBackend.save_reply` adds it."""
    now = bindparam("now", type_=UTCDateTime())
    learner_id = bindparam("learner_id", type_=BigInteger)
    reply = (
        insert(Message)
        .values(
            learner_id=learner_id,
            role=PAM,
            content=bindparam("reply_content", type_=Text),
            tokens=bindparam("reply_tokens", type_=Integer),
            reply_to=bindparam("reply_to", type_=BigInteger),
            created_at=now,
        )
        .returning(Message.id)
        .cte("reply")
    )
    usage = (
        insert(Usage)
        .values(
            learner_id=learner_id,
            model=bindparam("usage_model", type_=Text),
            purpose="reply",
            input_tokens=bindparam("usage_input", type_=Integer),
            output_tokens=bindparam("usage_output", type_=Integer),
            created_at=now,
        )
        .cte("usage")
    )
    found = (
        func.unnest(*(bindparam(name, type_=ARRAY(Text)) for name in _CORRECTION_ARRAYS))
        .table_valued(*_CORRECTION_FIELDS)
        .render_derived(name="found")
    )
    made = select(learner_id, bindparam("reply_to", type_=BigInteger), *found.c, now)
    corrections = (
        insert(Correction)
        .from_select(
            ["learner_id", "message_id", *_CORRECTION_FIELDS, "created_at"],
            made,
            include_defaults=False,
        )
        .cte("corrections")
    )
    return (
        select(reply.c.id.label("reply_id"), *COUNTS.c, UNREAD_BY_PROFILE.c.unread)
        .select_from(reply.join(COUNTS, true()).outerjoin(UNREAD_BY_PROFILE, true()))
        .order_by(UNREAD_BY_PROFILE.c.id)
        .add_cte(usage, corrections)
    )


_CORRECTION_FIELDS = ("original", "corrected", "explanation", "category", "rule")
_CORRECTION_ARRAYS = ("originals", "correcteds", "explanations", "categories", "rules")
_SAVE_REPLY = _save_reply()


# -- finishing a claim ------------------------------------------------------------------------


def _finish_and_queue_ctes() -> tuple[Any, Any]:
    """`FINISH` and the replies' INSERT as two CTEs, "finished" (the inbox item's id, no row
    if the claim was lost) and "queued" (id and seq of each reply queued, only if the claim
    was held). The replies' seq and text come as two arrays; every other column is the same
    for all of them but the chart (the first one's) and the part to speak (the last one).
    Their parameters are `Finishing.values`."""
    finished = FINISH.returning(InboxItem.id).cte("finished")
    replies = (
        func.unnest(bindparam("seqs", type_=ARRAY(Integer)), bindparam("texts", type_=ARRAY(Text)))
        .table_valued("seq", "text")
        .render_derived(name="replies")
    )
    # Named apart from the columns: the UPDATE would take a same-named value as its own.
    columns: list[Any] = [
        bindparam(f"out_{name}", type_=OutboxItem.__table__.c[name].type)
        for name in SAME_FOR_EVERY_REPLY
    ]
    columns += [bindparam(f"out_{name}", type_=UTCDateTime()) for name in TIMES_OF_A_REPLY]
    # A /progress chart goes with the first reply, its caption.
    columns.append(case((replies.c.seq == 0, bindparam("out_chart_id", type_=BigInteger))))
    # The words to speak are the last part, the one the writer added for them.
    last = bindparam("out_last_seq", type_=Integer)
    speak = bindparam("out_speak", type_=Boolean)
    columns.append(and_(replies.c.seq == last, speak))
    names = ["inbox_id", "seq", "text", *SAME_FOR_EVERY_REPLY, *TIMES_OF_A_REPLY, "chart_id"]
    names.append("speak")
    rows = select(finished.c.id, replies.c.seq, replies.c.text, *columns).select_from(
        finished.join(replies, true())
    )
    queued = (
        insert(OutboxItem)
        .from_select(names, rows, include_defaults=False)
        .returning(OutboxItem.id, OutboxItem.seq)
        .cte("queued")
    )
    return finished, queued


def _finish_and_queue() -> Any:
    """Finish the claim and queue its replies in one statement: (id, seq) of each reply
    queued, no row if the claim was lost."""
    _, queued = _finish_and_queue_ctes()
    return select(queued.c.id, queued.c.seq)


def _save_reply_and_finish() -> Any:
    """`_SAVE_REPLY` with the claim finished and the reply queued in two more CTEs, one
    statement for the turn's whole write. Two columns more on every row: whether the claim
    was still held (`held`), and the queued replies' ids in order (`queued_ids`)."""
    finished, queued = _finish_and_queue_ctes()
    held = select(func.count()).select_from(finished).scalar_subquery().label("held")
    ids = select(func.array_agg(aggregate_order_by(queued.c.id, queued.c.seq)))
    return _SAVE_REPLY.add_cte(finished, queued).add_columns(
        held, ids.scalar_subquery().label("queued_ids")
    )


_FINISH_AND_QUEUE = _finish_and_queue()
_SAVE_REPLY_AND_FINISH = _save_reply_and_finish()

# -- a turn's first statement, and accepting a message ----------------------------------------

# The learner's message inserted in a CTE of the statement that reads the context.
_STORED = (
    insert(Message)
    .values(
        learner_id=bindparam("learner_id", type_=BigInteger),
        role=LEARNER,
        content=bindparam("stored_content", type_=Text),
        tokens=bindparam("stored_tokens", type_=Integer),
        inbox_id=bindparam("stored_inbox_id", type_=BigInteger),
        spoken_seconds=bindparam("stored_spoken_seconds", type_=Float),
        untranscribed=bindparam("stored_untranscribed", type_=Boolean),
        created_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(Message.id)
    .cte("stored")
)
_STORE_AND_READ = {
    key: context_query(*activity, stored=_STORED) for key, activity in ACTIVITIES.items()
}

_INBOUND = ("channel", "platform_id", "address", "chat_id", "display_name", "text", "kind", "voice")
_ACCEPTED = (
    insert(InboxItem)
    .values(
        {
            **{
                name: bindparam(f"in_{name}", type_=InboxItem.__table__.c[name].type)
                for name in _INBOUND
            },
            "received_at": bindparam("now", type_=UTCDateTime()),
            "available_at": bindparam("now", type_=UTCDateTime()),
            "status": PENDING,
            "attempts": 0,
        }
    )
    .returning(InboxItem.id)
    .cte("accepted")
)
# The NOTIFY goes out once the INSERT commits, and not at all if it is a redelivery.
_ACCEPT_AND_NOTIFY = select(func.pg_notify(CHANNEL, "")).select_from(_ACCEPTED)
# The same with admission bounded per address (a row if the message was stored), and for the
# note that one was turned away.
_ADMIT_AND_NOTIFY, _NOTE_AND_NOTIFY = (
    select(func.pg_notify(CHANNEL, "")).select_from(
        statement.returning(InboxItem.id).cte("admitted")
    )
    for statement in (ADMIT, NOTE_TURNED_AWAY)
)


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
    # word once does not outrank a short one about it. The btree on (learner_id, said_at)
    # reads only the learner's rows; the GIN index serves a learner with very many.
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
        WHERE e.learner_id = :learner_id AND e.terms @@ q.q
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

    def lock_next(self, query: Any, table: Any) -> Any:
        """FOR UPDATE SKIP LOCKED: a claim passes over the rows other claims are taking."""
        return query.with_for_update(skip_locked=True, of=table)

    def accept(self, row: Mapping[str, Any], now: datetime, max_queued: int = 0) -> bool:
        """One statement stores the message and notifies the workers (with `max_queued`, a
        second one the note, when it was turned away). Two web requests of one address at
        once may each count the other's message not there yet: the bound holds to within
        the web's concurrent requests."""
        if not max_queued:
            values = {f"in_{name}": value for name, value in row.items()}
            with self.single.begin() as connection:
                connection.execute(_ACCEPT_AND_NOTIFY, values | {"now": now})
            return True
        values = admission_values(dict(row), now, max_queued)
        with self.single.begin() as connection:
            if connection.execute(_ADMIT_AND_NOTIFY, values).first() is not None:
                return True
            connection.execute(_NOTE_AND_NOTIFY, turned_away_values(values))
        return False

    def finish(self, finishing: Finishing, parts: Sequence[str]) -> list[int] | None:
        """One statement when there are parts to queue: the UPDATE runs in a CTE, and the
        parts are inserted only if it found the claim still held."""
        if not parts:
            with self.engine.begin() as connection:
                return finishing.run(connection, parts)
        with self.single.connect() as connection:
            rows = connection.execute(_FINISH_AND_QUEUE, finishing.values(parts)).all()
        return [row.id for row in sorted(rows, key=lambda row: row.seq)] if rows else None

    def save_reply(
        self,
        reply: ReplyRecord,
        backlog_limit: int,
        now: datetime,
        finish: tuple[Finishing, Sequence[str]] | None = None,
    ) -> tuple[StoredMessage, Backlog, list[int] | None]:
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
        for array, field in zip(_CORRECTION_ARRAYS, _CORRECTION_FIELDS, strict=True):
            values[array] = [getattr(c, field) for c in reply.corrections]
        statement, more = (
            (_SAVE_REPLY_AND_FINISH, finish[0].values(finish[1])) if finish else (_SAVE_REPLY, {})
        )
        with self.single.connect() as connection:
            rows = connection.execute(statement, more | values).all()
        count, unfolded, unread = backlog_in(rows)
        # The statement's snapshot predates the reply; it is unfolded too.
        backlog = Backlog(count + 1, unfolded + reply.tokens, unread)
        stored = StoredMessage(rows[0].reply_id, PAM, reply.content, reply.tokens)
        if finish is None:
            return stored, backlog, None
        head = rows[0]  # queued_ids: NULL when no reply was queued
        return stored, backlog, (head.queued_ids or []) if head.held else None

    def begin_turn(
        self,
        learner_id: int,
        message: StoredMessage,
        inbox_id: int | None,
        window: ActivityWindow | None,
        now: datetime,
    ) -> ContextRead | None:
        """The learner's message inserted in a CTE of the statement that reads the context."""
        values = {"learner_id": learner_id} | window_values(window)
        values |= {
            "stored_content": message.content,
            "stored_tokens": message.tokens,
            "stored_inbox_id": inbox_id,
            "stored_spoken_seconds": message.spoken_seconds,
            "stored_untranscribed": message.untranscribed,
            "now": now,
        }
        try:
            with self.single.connect() as connection:
                rows = connection.execute(_STORE_AND_READ[activity_key(window)], values).all()
        except IntegrityError:
            return None  # stored before (a re-run), or the learner is gone: the two steps say which
        if not rows:
            raise LearnerGone(learner_id)
        stored = dataclasses.replace(message, id=rows[0].stored_id)
        return decode_context(rows, window, stored)

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
