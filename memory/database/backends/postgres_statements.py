"""The two hot writes Postgres runs as one statement and one round trip each (data-modifying
CTEs), built once at import, where the transaction both backends share would cost round trips
that bench/write_paths.py measured on every message: storing the reply with its usage,
corrections and review grades and the read of the memory backlog (with the claim finished and
the parts queued, when the writer asks: 1 round trip instead of 7 to 10), and accepting an
inbound message with the NOTIFY that wakes the workers (1 instead of 4).
memory/database/backends/postgres.py runs them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    select,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import aggregate_order_by

from memory.database.claims import (
    ACCEPT,
    ADMIT,
    FINISH,
    INBOX_READY,
    NOTE_TURNED_AWAY,
    SAME_FOR_EVERY_REPLY,
    TIMES_OF_A_REPLY,
    Accepting,
)
from memory.database.models import Correction, MemoryJob, Message, Usage, UTCDateTime
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.models_review import ReviewPending
from memory.database.records import PAM, CorrectionRecord, ReplyRecord
from memory.database.statements import (
    COUNTS,
    REVIEW_JOB_AGAIN,
    REVIEW_JOB_ROW,
    UNREAD_BY_PROFILE,
)
from memory.wakeup import CHANNEL

# -- storing a reply --------------------------------------------------------------------------


def _save_reply() -> Any:
    """Pam's reply, the call's usage, the corrections and the review grades left for the
    review job (with the ask for that job) inserted in CTEs, and the memory backlog read, in
    one statement and one round trip: the reply's id (`reply_id`) on every row of the
    backlog's. The backlog is read from the snapshot the statement started with, so it leaves
    out the reply itself: `PostgresBackend.save_reply` adds it."""
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


def _save_reply_and_finish() -> Any:
    """`SAVE_REPLY` with the claim finished and the reply queued in two more CTEs, one
    statement for the turn's whole write. Three columns more on every row: whether the claim
    was still held (`held`), the queued replies' ids in order (`queued_ids`), and whether
    another inbox message was ready for a claim as the statement began (`inbox_ready`)."""
    finished, queued = _finish_and_queue_ctes()
    held = select(func.count()).select_from(finished).scalar_subquery().label("held")
    ids = select(func.array_agg(aggregate_order_by(queued.c.id, queued.c.seq)))
    return SAVE_REPLY.add_cte(finished, queued).add_columns(
        held, ids.scalar_subquery().label("queued_ids"), INBOX_READY.label("inbox_ready")
    )


SAVE_REPLY_AND_FINISH = _save_reply_and_finish()

# -- accepting a message ----------------------------------------------------------------------

# `Backend.accept`'s statements, each in a CTE of a SELECT that sends the NOTIFY which wakes the
# workers: a row if it inserted, the NOTIFY going out once that commits (none for a
# redelivery, or a message turned away).
ACCEPTING = Accepting(
    *(
        select(func.pg_notify(CHANNEL, "")).select_from(
            statement.returning(InboxItem.id).cte("accepted")
        )
        for statement in (ACCEPT, ADMIT, NOTE_TURNED_AWAY)
    )
)
