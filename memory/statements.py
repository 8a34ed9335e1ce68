"""The statements a turn runs, built once at import: every call only binds its values. With
them, the steps that run them on the caller's connection, so that several share one
transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    Text,
    bindparam,
    cast,
    func,
    insert,
    select,
    true,
)
from sqlalchemy.orm import aliased

from memory.models import (
    Correction,
    Learner,
    Message,
    Profile,
    Summary,
    Usage,
    UTCDateTime,
    utcnow,
)
from memory.records import (
    LEARNER,
    PAM,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    CorrectionRecord,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
)

# The columns of LearnerInfo, StoredMessage, SummaryState and ProfileState, in field order.
LEARNER_COLUMNS = (
    Learner.id,
    Learner.external_id,
    Learner.display_name,
    Learner.target_language,
    Learner.native_language,
    Learner.level,
)
_MESSAGE_COLUMNS = (Message.id, Message.role, Message.content, Message.tokens)
_SUMMARY_COLUMNS = (
    Summary.text,
    Summary.tokens,
    Summary.watermark,
    Summary.version,
    Summary.folds,
    Summary.updated_at,
)
_PROFILE_COLUMNS = (
    Profile.data,
    Profile.watermark,
    Profile.version,
    Profile.messages_processed,
    Profile.updated_at,
)

# Every query about one learner's messages filters by them ("learner_id" is bound per call).
_THEIR_MESSAGES = Message.learner_id == bindparam("learner_id")


def _after_watermark(model: type[Summary] | type[Profile]) -> ColumnElement[bool]:
    """The messages past the learner's summary or profile watermark (all, if it has no row)."""
    watermark = select(model.watermark).where(model.learner_id == bindparam("learner_id"))
    return Message.id > func.coalesce(watermark.scalar_subquery(), 0)


FIND_LEARNER = select(*LEARNER_COLUMNS).where(Learner.external_id == bindparam("external_id"))

_MESSAGES = (
    select(*_MESSAGE_COLUMNS)
    .where(_THEIR_MESSAGES, Message.id > bindparam("after"))
    .order_by(Message.id)
)
_MESSAGES_OF_ROLE = _MESSAGES.where(Message.role == bindparam("role"))

_INSERT_MESSAGE = insert(Message).returning(Message.id)
INSERT_USAGE = insert(Usage)
INSERT_CORRECTIONS = insert(Correction)

# The learner message stored for an inbox item, with Pam's reply to it if there is one.
_REPLY = aliased(Message, name="reply")
_STORED_WITH_REPLY = (
    select(*_MESSAGE_COLUMNS, _REPLY.id, _REPLY.role, _REPLY.content, _REPLY.tokens)
    .outerjoin_from(
        Message,
        _REPLY,
        (_REPLY.reply_to == Message.id) & (_REPLY.learner_id == Message.learner_id),
    )
    .where(_THEIR_MESSAGES, Message.inbox_id == bindparam("inbox_id"))
)

_UNFOLDED = select(func.count(Message.id), func.coalesce(func.sum(Message.tokens), 0)).where(
    _THEIR_MESSAGES, _after_watermark(Summary)
)
_UNREAD_BY_PROFILE = (
    select(Message.id, Message.content)
    .where(_THEIR_MESSAGES, Message.role == LEARNER, _after_watermark(Profile))
    .order_by(Message.id.desc())
    .limit(bindparam("limit", type_=Integer))
    .subquery("unread")
)
# Both in one round trip: the counts on every row, one row (content NULL) if none is unread.
_COUNTS = _UNFOLDED.subquery("unfolded")
_BACKLOG = (
    select(*_COUNTS.c, _UNREAD_BY_PROFILE.c.content)
    .select_from(_COUNTS.outerjoin(_UNREAD_BY_PROFILE, true()))
    .order_by(_UNREAD_BY_PROFILE.c.id)
)


def _save_reply() -> Any:
    """Postgres: Pam's reply, the call's usage and the corrections inserted in CTEs, and the
    memory backlog read, in one statement and one round trip. Returns the reply's id on every
    row of `_BACKLOG`'s. The backlog is read from the snapshot the statement started with, so
    it leaves out the reply itself: `save_reply_and_read_backlog` adds it."""
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
        select(reply.c.id, *_COUNTS.c, _UNREAD_BY_PROFILE.c.content)
        .select_from(reply.join(_COUNTS, true()).outerjoin(_UNREAD_BY_PROFILE, true()))
        .order_by(_UNREAD_BY_PROFILE.c.id)
        .add_cte(usage, corrections)
    )


_CORRECTION_FIELDS = ("original", "corrected", "explanation", "category")
_CORRECTION_ARRAYS = ("originals", "correcteds", "explanations", "categories")
SAVE_REPLY = _save_reply()

# The cost and abuse limits' counts, as scalar subqueries of one SELECT.
_SPENT = func.coalesce(func.sum(Usage.input_tokens + Usage.output_tokens), 0)
_TOKENS_SINCE = Usage.created_at >= bindparam("tokens_since")
_MY_ACTIVITY = (
    select(func.count(Message.id))
    .where(
        _THEIR_MESSAGES,
        Message.role == LEARNER,
        Message.created_at >= bindparam("messages_since"),
    )
    .scalar_subquery(),
    select(_SPENT)
    .where(_TOKENS_SINCE, Usage.learner_id == bindparam("learner_id"))
    .scalar_subquery(),
)
_EVERYONES_ACTIVITY = (*_MY_ACTIVITY, select(_SPENT).where(_TOKENS_SINCE).scalar_subquery())


def _context(*activity: Any, stored: Any = None) -> Any:
    """Learner, summary, profile (its data as text: parsed once, not on every row) and the
    `activity` counts on every row, with one unfolded message per row (NULLs if there is
    none), oldest first: a turn's whole read in one round trip and one snapshot. No row if the
    learner, summary or profile is gone. With `stored` (an INSERT … RETURNING id in a CTE),
    its id comes first on every row."""
    tables = (
        Learner.__table__.join(Summary, Summary.learner_id == Learner.id)
        .join(Profile, Profile.learner_id == Learner.id)
        .outerjoin(Message, (Message.learner_id == Learner.id) & (Message.id > Summary.watermark))
    )
    first = []
    if stored is not None:
        tables = stored.join(tables, true())
        first = [stored.c.id]
    return (
        select(
            *first,
            *LEARNER_COLUMNS,
            *_SUMMARY_COLUMNS,
            cast(Profile.data, Text),
            *_PROFILE_COLUMNS[1:],
            *activity,
            *_MESSAGE_COLUMNS,
        )
        .select_from(tables)
        .where(Learner.id == bindparam("learner_id"))
        .order_by(Message.id)
    )


# Postgres: the learner's message inserted in a CTE of the statement that reads the context.
_STORED = (
    insert(Message)
    .values(
        learner_id=bindparam("learner_id", type_=BigInteger),
        role=LEARNER,
        content=bindparam("stored_content", type_=Text),
        tokens=bindparam("stored_tokens", type_=Integer),
        inbox_id=bindparam("stored_inbox_id", type_=BigInteger),
        created_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(Message.id)
    .cte("stored")
)
_READS = {
    (window, everyone, stored): _context(*activity, stored=_STORED if stored else None)
    for window, everyone, activity in (
        (False, False, ()),
        (True, False, _MY_ACTIVITY),
        (True, True, _EVERYONES_ACTIVITY),
    )
    for stored in (False, True)
}


def read_context(
    connection: Connection,
    learner_id: int,
    window: ActivityWindow | None,
    store: StoredMessage | None = None,
    inbox_id: int | None = None,
) -> tuple[Context, Activity | None] | None:
    """The learner's `Context`, with the counts of `window` if given; None if the learner,
    their summary or their profile is gone.

    With `store` (Postgres only), that learner message is inserted by the same statement (its
    id is not known yet: give 0) and is the last message of the context; the returned
    context's last message has its id. Raises IntegrityError as an insert would."""
    values: dict[str, Any] = {"learner_id": learner_id}
    counts = 0 if window is None else 3 if window.everyone else 2
    if window is not None:
        values |= {"messages_since": window.messages_since, "tokens_since": window.tokens_since}
    if store is not None:
        values |= {
            "stored_content": store.content,
            "stored_tokens": store.tokens,
            "stored_inbox_id": inbox_id,
            "now": utcnow(),
        }
    statement = _READS[window is not None, bool(window and window.everyone), store is not None]
    rows: Sequence[Sequence[Any]] = connection.execute(statement, values).all()
    if not rows:
        return None
    if store is not None:  # the statement's snapshot predates the insert: add it here
        stored_id = rows[0][0]
        rows = [row[1:] for row in rows]
    summary_at = len(LEARNER_COLUMNS)
    profile_at = summary_at + len(_SUMMARY_COLUMNS)
    counts_at = profile_at + len(_PROFILE_COLUMNS)
    messages_at = counts_at + counts
    head = rows[0]
    data, *profile = head[profile_at:counts_at]
    messages = [StoredMessage(*row[messages_at:]) for row in rows if row[messages_at] is not None]
    if store is not None:
        messages.append(StoredMessage(stored_id, LEARNER, store.content, store.tokens))
    context = Context(
        LearnerInfo(*head[:summary_at]),
        ProfileState(dict(json.loads(data) if data else {}), *profile),
        SummaryState(*head[summary_at:profile_at]),
        messages,
    )
    if window is None:
        return context, None
    mine = head[counts_at : counts_at + counts]
    everyone = int(mine[2]) if window.everyone else None
    recent = int(mine[0]) + (store is not None)  # the message stored now is recent too
    return context, Activity(recent, int(mine[1]), everyone)


def correction_rows(
    learner_id: int, message_id: int | None, corrections: Sequence[CorrectionRecord]
) -> list[dict[str, Any]]:
    """The rows for the corrections Pam made to one learner message."""
    return [
        {
            "learner_id": learner_id,
            "message_id": message_id,
            "original": c.original,
            "corrected": c.corrected,
            "explanation": c.explanation,
            "category": c.category,
        }
        for c in corrections
    ]


# -- steps run on the caller's connection, so that several share one transaction -------------


def insert_message(
    connection: Connection,
    learner_id: int,
    role: str,
    content: str,
    tokens: int,
    inbox_id: int | None = None,
    reply_to: int | None = None,
) -> StoredMessage:
    """Insert one message and return it as stored."""
    values = {
        "learner_id": learner_id,
        "role": role,
        "content": content,
        "tokens": tokens,
        "inbox_id": inbox_id,
        "reply_to": reply_to,
    }
    message_id = connection.execute(_INSERT_MESSAGE, values).scalar_one()
    return StoredMessage(message_id, role, content, tokens)


def read_messages(
    connection: Connection, learner_id: int, after: int, role: str | None = None
) -> list[StoredMessage]:
    """The learner's messages (of `role`, if given) with id greater than `after`, oldest
    first."""
    values = {"learner_id": learner_id, "after": after}
    if role is None:
        rows = connection.execute(_MESSAGES, values)
    else:
        rows = connection.execute(_MESSAGES_OF_ROLE, {**values, "role": role})
    return [StoredMessage(*row) for row in rows]


def read_unfolded(connection: Connection, learner_id: int) -> tuple[int, int]:
    """(number, total tokens) of the learner's messages not yet folded into the summary."""
    count, tokens = connection.execute(_UNFOLDED, {"learner_id": learner_id}).one()
    return int(count), int(tokens)


def read_backlog(connection: Connection, learner_id: int, limit: int) -> Backlog:
    """The unfolded messages' count and tokens, and the newest (at most `limit`) learner
    messages the profile has not read, oldest first."""
    return _backlog(connection.execute(_BACKLOG, {"learner_id": learner_id, "limit": limit}))


def _backlog(rows: Iterable[Sequence[Any]]) -> Backlog:
    """A `Backlog` from rows of `_BACKLOG`'s columns: the counts on each, one unread message
    (or NULL) each."""
    rows = list(rows)
    count, tokens = int(rows[0][0]), int(rows[0][1])
    return Backlog(count, tokens, [row[2] for row in rows if row[2] is not None])


def save_reply_and_read_backlog(
    connection: Connection,
    learner_id: int,
    reply_to: int,
    content: str,
    tokens: int,
    corrections: Sequence[CorrectionRecord],
    usage: tuple[str, int, int],
    limit: int,
    *,
    also: tuple[Any, dict[str, Any]] | None = None,
) -> tuple[StoredMessage, Backlog, Sequence[Any]]:
    """Postgres: `SAVE_REPLY`. Pam's reply as stored, and the memory backlog with it. With
    `also`, a statement built on `SAVE_REPLY` with more CTEs and columns, and its parameters:
    what those columns hold (on the first row) comes third."""
    model, input_tokens, output_tokens = usage
    values: dict[str, Any] = {
        "now": utcnow(),
        "learner_id": learner_id,
        "reply_to": reply_to,
        "reply_content": content,
        "reply_tokens": tokens,
        "usage_model": model,
        "usage_input": input_tokens,
        "usage_output": output_tokens,
        "limit": limit,
    }
    for array, field_ in zip(_CORRECTION_ARRAYS, _CORRECTION_FIELDS, strict=True):
        values[array] = [getattr(c, field_) for c in corrections]
    statement, more = also or (SAVE_REPLY, {})
    rows = connection.execute(statement, more | values).all()
    columns = len(SAVE_REPLY.selected_columns)
    count, unfolded, unread = _backlog(row[1:columns] for row in rows)
    # The statement's snapshot predates the reply; it is unfolded too.
    backlog = Backlog(count + 1, unfolded + tokens, unread)
    return StoredMessage(rows[0][0], PAM, content, tokens), backlog, rows[0][columns:]


def read_stored_with_reply(
    connection: Connection, learner_id: int, inbox_id: int
) -> tuple[StoredMessage, StoredMessage | None] | None:
    """The learner message stored for inbox item `inbox_id` and Pam's reply to it, if any;
    None if no message is stored for it."""
    row: Sequence[Any] | None = connection.execute(
        _STORED_WITH_REPLY, {"learner_id": learner_id, "inbox_id": inbox_id}
    ).first()
    if row is None:
        return None
    stored, reply = row[: len(_MESSAGE_COLUMNS)], row[len(_MESSAGE_COLUMNS) :]
    return StoredMessage(*stored), None if reply[0] is None else StoredMessage(*reply)
