"""The baseline of bench/write_paths.py: a turn's hot writes as Pam ran them on Postgres before
issue 30 gave both backends one write path (memory/database/backends/postgres_statements.py and
postgres.py as of commit 6750ae5), each one statement and one round trip (data-modifying CTEs):
storing the learner's message with the read of the context, storing the reply with its usage,
corrections and review grades and the memory backlog's read (with the claim finished and the
reply queued), finishing a claim, and accepting an inbound message with a NOTIFY. Kept here,
and only here, so the benchmark can still run the two ways side by side."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Float,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    select,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.exc import IntegrityError

from memory.database.backends.postgres import PostgresBackend
from memory.database.claims import (
    ADMIT,
    FINISH,
    INBOUND,
    NOTE_TURNED_AWAY,
    PENDING,
    SAME_FOR_EVERY_REPLY,
    TIMES_OF_A_REPLY,
    Finishing,
    admission_values,
    turned_away_values,
)
from memory.database.models import (
    Correction,
    Learner,
    MemoryJob,
    Message,
    Profile,
    Summary,
    Usage,
    UTCDateTime,
)
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.models_review import ReviewPending
from memory.database.records import (
    LEARNER,
    PAM,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    CorrectionRecord,
    LearnerGone,
    ReplyRecord,
    StoredMessage,
)
from memory.database.statements import (
    ACTIVITIES,
    COUNTS,
    LEARNER_COLUMNS,
    MESSAGE_COLUMNS,
    PROFILE_COLUMNS,
    REVIEW_JOB_AGAIN,
    REVIEW_JOB_ROW,
    SUMMARY_COLUMNS,
    UNREAD_BY_PROFILE,
    activity_key,
    backlog_in,
    decode_context,
    labelled,
    window_values,
)
from memory.wakeup import CHANNEL

# -- storing a reply --------------------------------------------------------------------------


def _save_reply() -> Any:
    """Pam's reply, the call's usage, the corrections and the review grades left for the
    review job (with the ask for that job) inserted in CTEs, and the memory backlog read, in
    one statement and one round trip: the reply's id (`reply_id`) on every row of the
    backlog's. The backlog is read from the snapshot the statement started with, so it leaves
    out the reply itself: `FusedWrites.save_reply` adds it."""
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
    pending, job = _review_ctes(learner_id, now)
    return (
        select(reply.c.id.label("reply_id"), *COUNTS.c, UNREAD_BY_PROFILE.c.unread)
        .select_from(reply.join(COUNTS, true()).outerjoin(UNREAD_BY_PROFILE, true()))
        .order_by(UNREAD_BY_PROFILE.c.id)
        .add_cte(usage, corrections, pending, job)
    )


def _review_ctes(learner_id: Any, now: Any) -> tuple[Any, Any]:
    """The review_pending row and the memory_jobs upsert that asks for the review job, each
    an INSERT … SELECT that inserts nothing unless the `review` parameter is true."""
    wanted = bindparam("review", type_=Boolean)
    columns = ReviewPending.__table__.c
    grades = [bindparam(f"review_{name}", type_=columns[name].type) for name in _GRADES]
    pending = (
        insert(ReviewPending)
        .from_select(
            ["learner_id", "message_id", *_GRADES, "created_at"],
            select(learner_id, bindparam("reply_to", type_=BigInteger), *grades, now).where(wanted),
            include_defaults=False,
        )
        .cte("pending")
    )
    names = list(REVIEW_JOB_ROW)
    asked = select(learner_id, *(literal(REVIEW_JOB_ROW[name]) for name in names)).where(wanted)
    job = (
        postgresql.insert(MemoryJob)
        .from_select(["learner_id", *names], asked, include_defaults=False)
        .on_conflict_do_update(index_elements=["learner_id", "kind"], set_=REVIEW_JOB_AGAIN)
        .cte("review_job")
    )
    return pending, job


_GRADES = ("used", "missed", "offered")


def review_values(reply: ReplyRecord) -> dict[str, Any]:
    """`SAVE_REPLY`'s parameters for the review grades of `reply` (none: nothing inserted)."""
    review = reply.review
    values: dict[str, Any] = {"review": review is not None}
    for name in _GRADES:
        values[f"review_{name}"] = list(getattr(review, name)) if review is not None else []
    return values


_CORRECTION_FIELDS = ("original", "corrected", "explanation", "category", "rule")
_CORRECTION_ARRAYS = ("originals", "correcteds", "explanations", "categories", "rules")
SAVE_REPLY = _save_reply()


def correction_arrays(corrections: Sequence[CorrectionRecord]) -> dict[str, list[str]]:
    """`SAVE_REPLY`'s parameters for the corrections: one array per field, in their order."""
    return {
        array: [getattr(c, field) for c in corrections]
        for array, field in zip(_CORRECTION_ARRAYS, _CORRECTION_FIELDS, strict=True)
    }


# -- finishing a claim ------------------------------------------------------------------------


def _finish_and_queue_ctes() -> tuple[Any, Any]:
    """`FINISH` and the replies' INSERT as two CTEs, "finished" (the inbox item's id, no row
    if the claim was lost) and "queued" (id and seq of each reply queued, only if the claim
    was held). The replies' seq and text come as two arrays; every other column is the same
    for all of them but the chart (the first one's), the part to speak (the last one) and the
    buttons (under the last text).
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
    # The buttons go under the last text (before a part to speak), as Finishing says.
    under = bindparam("out_buttons_seq", type_=Integer)
    columns.append(case((replies.c.seq == under, bindparam("out_buttons", type_=Text))))
    names = ["inbox_id", "seq", "text", *SAME_FOR_EVERY_REPLY, *TIMES_OF_A_REPLY, "chart_id"]
    names += ["speak", "buttons"]
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
    """`SAVE_REPLY` with the claim finished and the reply queued in two more CTEs, one
    statement for the turn's whole write. Two columns more on every row: whether the claim
    was still held (`held`), and the queued replies' ids in order (`queued_ids`)."""
    finished, queued = _finish_and_queue_ctes()
    held = select(func.count()).select_from(finished).scalar_subquery().label("held")
    ids = select(func.array_agg(aggregate_order_by(queued.c.id, queued.c.seq)))
    return SAVE_REPLY.add_cte(finished, queued).add_columns(
        held, ids.scalar_subquery().label("queued_ids")
    )


FINISH_AND_QUEUE = _finish_and_queue()
SAVE_REPLY_AND_FINISH = _save_reply_and_finish()

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


def _store_and_read(*activity: Any) -> Any:
    """memory/database/statements.py's `context_query` (learner, summary, profile, the
    `activity` counts and one unfolded message per row), with `_STORED`'s id on every row as
    `stored_id`: the insert and the read in one statement."""
    tables = (
        Learner.__table__.join(Summary, Summary.learner_id == Learner.id)
        .join(Profile, Profile.learner_id == Learner.id)
        .outerjoin(Message, (Message.learner_id == Learner.id) & (Message.id > Summary.watermark))
    )
    return (
        select(
            _STORED.c.id.label("stored_id"),
            *labelled("learner", LEARNER_COLUMNS),
            *labelled("summary", SUMMARY_COLUMNS),
            cast(Profile.data, Text).label("profile_data"),
            *labelled("profile", PROFILE_COLUMNS[1:]),
            *activity,
            *labelled("message", MESSAGE_COLUMNS),
        )
        .select_from(_STORED.join(tables, true()))
        .where(Learner.id == bindparam("learner_id"))
        .order_by(Message.id)
    )


STORE_AND_READ = {key: _store_and_read(*activity) for key, activity in ACTIVITIES.items()}

_ACCEPTED = (
    insert(InboxItem)
    .values(
        {
            **{
                name: bindparam(f"in_{name}", type_=InboxItem.__table__.c[name].type)
                for name in INBOUND
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
ACCEPT_AND_NOTIFY = select(func.pg_notify(CHANNEL, "")).select_from(_ACCEPTED)
# The same with admission bounded per address (a row if the message was stored), and for the
# note that one was turned away.
ADMIT_AND_NOTIFY, NOTE_AND_NOTIFY = (
    select(func.pg_notify(CHANNEL, "")).select_from(
        statement.returning(InboxItem.id).cte("admitted")
    )
    for statement in (ADMIT, NOTE_TURNED_AWAY)
)


class FusedWrites(PostgresBackend):
    """PostgresBackend with its hot writes fused, as they were (everything else Pam's own)."""

    def accept(self, row: Mapping[str, Any], now: datetime, max_queued: int = 0) -> bool:
        """One statement stores the message and notifies the workers (with `max_queued`, a
        second one the note, when it was turned away)."""
        if not max_queued:
            values = {f"in_{name}": value for name, value in row.items()}
            with self.single.begin() as connection:
                connection.execute(ACCEPT_AND_NOTIFY, values | {"now": now})
            return True
        values = admission_values(dict(row), now, max_queued)
        with self.single.begin() as connection:
            if connection.execute(ADMIT_AND_NOTIFY, values).first() is not None:
                return True
            connection.execute(NOTE_AND_NOTIFY, turned_away_values(values))
        return False

    def finish(self, finishing: Finishing, parts: Sequence[str]) -> list[int] | None:
        """One statement when there are parts to queue: the UPDATE runs in a CTE, and the
        parts are inserted only if it found the claim still held."""
        if not parts:
            with self.engine.begin() as connection:
                return finishing.run(connection, parts)
        with self.single.connect() as connection:
            rows = connection.execute(FINISH_AND_QUEUE, finishing.values(parts)).all()
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
    ) -> tuple[Context, Activity | None] | None:
        """The learner's message inserted in a CTE of the statement that reads the context:
        the context (the stored message last) and counts; None when the insert failed (a
        re-run, or the learner is gone: Pam then took the two plain steps)."""
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
                rows = connection.execute(STORE_AND_READ[activity_key(window)], values).all()
        except IntegrityError:
            return None
        if not rows:
            raise LearnerGone(learner_id)
        found = decode_context(rows, window)
        assert found is not None
        # The statement's snapshot predates the message: it is the last one, and recent.
        context, activity = found
        stored = dataclasses.replace(message, id=rows[0].stored_id)
        context = dataclasses.replace(context, messages=[*context.messages, stored])
        if activity is not None:
            activity = activity._replace(messages=activity.messages + 1)
        return context, activity
