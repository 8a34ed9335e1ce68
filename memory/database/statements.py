"""The statements a turn runs that every database shares, built once at import: every call
only binds its values. With them, the steps that run them on the caller's connection, so that
several share one transaction. Their rows are read by column name; what one database does
its own way is in memory/database/backends/."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Text,
    bindparam,
    case,
    cast,
    exists,
    func,
    insert,
    literal_column,
    null,
    nulls_first,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.orm import aliased

from memory.database.models import (
    Correction,
    Learner,
    Message,
    Profile,
    Summary,
    Usage,
)
from memory.database.models_checkins import ANSWERED, QUEUED, SKIPPED, Checkin, CheckinState
from memory.database.models_review import ReviewItem, ReviewPending, ReviewSession
from memory.database.records import (
    LEARNER,
    REVIEW_JOB,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    CorrectionRecord,
    LearnerInfo,
    ProfileState,
    ReplyRecord,
    ReviewOutlook,
    StoredMessage,
    SummaryState,
)

_Record = TypeVar("_Record")

# The columns of LearnerInfo, StoredMessage, SummaryState and ProfileState (named as their
# fields).
LEARNER_COLUMNS = (
    Learner.id,
    Learner.external_id,
    Learner.display_name,
    Learner.target_language,
    Learner.native_language,
    Learner.level,
    Learner.voice_replies,
    Learner.native_guess,
    Learner.corrections,
    Learner.forget_asked_at,
)
MESSAGE_COLUMNS = (
    Message.id,
    Message.role,
    Message.content,
    Message.tokens,
    Message.spoken_seconds,
    Message.untranscribed,
)
SUMMARY_COLUMNS = (
    Summary.text,
    Summary.tokens,
    Summary.watermark,
    Summary.version,
    Summary.folds,
    Summary.updated_at,
)
PROFILE_COLUMNS = (
    Profile.data,
    Profile.watermark,
    Profile.version,
    Profile.messages_processed,
    Profile.updated_at,
)


def labelled(prefix: str, columns: Iterable[Any]) -> list[Any]:
    """`columns`, each labelled `prefix_key`: a row names them apart from same-named ones."""
    return [column.label(f"{prefix}_{column.key}") for column in columns]


def named(row: Any, prefix: str, record: type[_Record]) -> _Record:
    """The `record` whose fields are the row's `prefix_field` columns (see `labelled`); a field
    the row has no column for keeps its default (StoredMessage.said_at, read where it is used)."""
    return _record(row, record, _keys(record, prefix, row._fields))


def named_all(rows: Sequence[Any], prefix: str, record: type[_Record]) -> list[_Record]:
    """`named` for each of `rows`, rows of one result: their columns are looked at once, not
    on every row (`row._fields` builds its tuple on each call, and the lookup hashes it: half
    of a 52-message context's decoding)."""
    if not rows:
        return []
    keys = _keys(record, prefix, rows[0]._fields)
    return [_record(row, record, keys) for row in rows]


def _record(row: Any, record: type[_Record], keys: tuple[tuple[str, str], ...]) -> _Record:
    values = row._mapping
    return record(**{name: values[key] for name, key in keys})


# Which of each record's fields a statement's columns hold, under which name: found once per
# statement's columns, not on every row (a context read decodes one row a message; a few
# statements' shapes in all).
_KEYS: dict[tuple[type, str, tuple[str, ...]], tuple[tuple[str, str], ...]] = {}


def _keys(record: type, prefix: str, columns: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(field, column) for each of `record`'s fields that `columns` hold as `prefix_field`."""
    shape = (record, prefix, columns)
    keys = _KEYS.get(shape)
    if keys is None:
        held = set(columns)
        keys = _KEYS[shape] = tuple(
            (field.name, f"{prefix}_{field.name}")
            for field in dataclasses.fields(record)
            if f"{prefix}_{field.name}" in held
        )
    return keys


# Every query about one learner's messages filters by them ("learner_id" is bound per call).
_THEIR_MESSAGES = Message.learner_id == bindparam("learner_id")


def _after_watermark(model: type[Summary] | type[Profile]) -> ColumnElement[bool]:
    """The messages past the learner's summary or profile watermark (all, if it has no row)."""
    watermark = select(model.watermark).where(model.learner_id == bindparam("learner_id"))
    return Message.id > func.coalesce(watermark.scalar_subquery(), 0)


FIND_LEARNER = select(*LEARNER_COLUMNS).where(Learner.external_id == bindparam("external_id"))

_MESSAGES = (
    select(*MESSAGE_COLUMNS, Message.created_at.label("said_at"))
    .where(_THEIR_MESSAGES, Message.id > bindparam("after"))
    .order_by(Message.id)
)
_MESSAGES_OF_ROLE = _MESSAGES.where(Message.role == bindparam("role"))

_INSERT_MESSAGE = insert(Message).returning(Message.id)
INSERT_USAGE = insert(Usage)
INSERT_CORRECTIONS = insert(Correction)
INSERT_PENDING = insert(ReviewPending)

# The learner message stored for an inbox item, with Pam's reply to it if there is one.
_REPLY = aliased(Message, name="reply")
_REPLY_COLUMNS = tuple(getattr(_REPLY, column.key) for column in MESSAGE_COLUMNS)
_STORED_WITH_REPLY = (
    select(*labelled("message", MESSAGE_COLUMNS), *labelled("reply", _REPLY_COLUMNS))
    .outerjoin_from(
        Message,
        _REPLY,
        (_REPLY.reply_to == Message.id) & (_REPLY.learner_id == Message.learner_id),
    )
    .where(_THEIR_MESSAGES, Message.inbox_id == bindparam("inbox_id"))
)

_UNFOLDED = select(
    func.count(Message.id).label("unfolded"),
    func.coalesce(func.sum(Message.tokens), 0).label("unfolded_tokens"),
).where(_THEIR_MESSAGES, _after_watermark(Summary))
UNREAD_BY_PROFILE = (
    select(Message.id, Message.content.label("unread"))
    .where(_THEIR_MESSAGES, Message.role == LEARNER, _after_watermark(Profile))
    .order_by(Message.id.desc())
    .limit(bindparam("limit", type_=Integer))
    .subquery("unread")
)
# Both in one round trip: the counts on every row, one row (unread NULL) if none is unread.
COUNTS = _UNFOLDED.subquery("counts")
_BACKLOG = (
    select(*COUNTS.c, UNREAD_BY_PROFILE.c.unread)
    .select_from(COUNTS.outerjoin(UNREAD_BY_PROFILE, true()))
    .order_by(UNREAD_BY_PROFILE.c.id)
)


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
    .scalar_subquery()
    .label("recent_messages"),
    select(_SPENT)
    .where(_TOKENS_SINCE, Usage.learner_id == bindparam("learner_id"))
    .scalar_subquery()
    .label("learner_tokens"),
)
_EVERYONES_ACTIVITY = (
    *_MY_ACTIVITY,
    select(_SPENT).where(_TOKENS_SINCE).scalar_subquery().label("everyone_tokens"),
)
# The counts a turn reads with its context, by (whether there is a window, whether it counts
# everyone's tokens too).
ACTIVITIES: dict[tuple[bool, bool], tuple[Any, ...]] = {
    (False, False): (),
    (True, False): _MY_ACTIVITY,
    (True, True): _EVERYONES_ACTIVITY,
}


def activity_key(window: ActivityWindow | None) -> tuple[bool, bool]:
    """Which of `ACTIVITIES` a read with `window` counts."""
    return window is not None, bool(window and window.everyone)


# What review could add to a prompt (`ReviewOutlook`): a turn asks review for its items only
# when one is due or a /review is under way (an item falls due 30 minutes after its mistake,
# then days and weeks apart as it is got right; one resting after two offers still counts as
# due, and its turns read as before). Two index lookups in the context's read spare the
# other turns review's own read: a round trip, and about 0.7 ms of the worker's time.
REVIEW_OUTLOOK = (
    exists().where(ReviewSession.learner_id == bindparam("learner_id")).label("review_session"),
    select(func.min(ReviewItem.due))
    .where(ReviewItem.learner_id == bindparam("learner_id"))
    .scalar_subquery()
    .label("review_next_due"),
)


def _nulls_like(columns: Sequence[Any]) -> list[Any]:
    """A typed NULL for each of `columns`, under its name: the other half of a union's row."""
    return [cast(null(), column.type).label(column.name) for column in columns]


def _context_query(*activity: Any) -> Any:
    """The learner, summary, profile (its data as text), review's outlook and the `activity`
    counts in a first row, then one row per unfolded message, oldest first (each half's
    columns NULL in the other's rows: the learner's data is sent once, not with every
    message): a turn's whole read in one round trip and one snapshot. No first row if the
    learner, summary or profile is gone."""
    head = [
        *labelled("learner", LEARNER_COLUMNS),
        *labelled("summary", SUMMARY_COLUMNS),
        cast(Profile.data, Text).label("profile_data"),
        *labelled("profile", PROFILE_COLUMNS[1:]),
        *REVIEW_OUTLOOK,
        *activity,
    ]
    said = labelled("message", MESSAGE_COLUMNS)
    first = (
        select(*head, *_nulls_like(said))
        .select_from(
            Learner.__table__.join(Summary, Summary.learner_id == Learner.id).join(
                Profile, Profile.learner_id == Learner.id
            )
        )
        .where(Learner.id == bindparam("learner_id"))
    )
    watermark = select(Summary.watermark).where(Summary.learner_id == bindparam("learner_id"))
    messages = select(*_nulls_like(head), *said).where(
        _THEIR_MESSAGES, Message.id > watermark.scalar_subquery()
    )
    return union_all(first, messages).order_by(nulls_first(literal_column("message_id")))


_READS = {key: _context_query(*activity) for key, activity in ACTIVITIES.items()}


def window_values(window: ActivityWindow | None) -> dict[str, Any]:
    """The parameters of a context read's counts over `window`."""
    if window is None:
        return {}
    return {"messages_since": window.messages_since, "tokens_since": window.tokens_since}


def read_context(
    connection: Connection, learner_id: int, window: ActivityWindow | None
) -> tuple[Context, Activity | None] | None:
    """The learner's `Context`, with the counts of `window` if given; None if the learner,
    their summary or their profile is gone."""
    values = {"learner_id": learner_id} | window_values(window)
    rows = connection.execute(_READS[activity_key(window)], values).all()
    return decode_context(rows, window)


def decode_context(
    rows: Sequence[Any], window: ActivityWindow | None
) -> tuple[Context, Activity | None] | None:
    """The context and counts in the rows of a context read; None if there are none, or the
    first is not the learner's (their summary or profile is gone)."""
    if not rows or rows[0].learner_id is None:
        return None
    head = rows[0]
    said = [row for row in rows if row.message_id is not None]
    messages = named_all(said, "message", StoredMessage)
    profile = named(head, "profile", ProfileState)
    data = dict(json.loads(head.profile_data) if head.profile_data else {})
    context = Context(
        named(head, "learner", LearnerInfo),
        dataclasses.replace(profile, data=data),
        named(head, "summary", SummaryState),
        messages,
        ReviewOutlook(bool(head.review_session), head.review_next_due),
    )
    if window is None:
        return context, None
    everyone = int(head.everyone_tokens) if window.everyone else None
    return context, Activity(int(head.recent_messages), int(head.learner_tokens), everyone)


def correction_rows(
    learner_id: int,
    message_id: int | None,
    corrections: Sequence[CorrectionRecord],
    now: datetime,
) -> list[dict[str, Any]]:
    """The rows for the corrections Pam made to one learner message, stored at `now`."""
    return [
        {
            "learner_id": learner_id,
            "message_id": message_id,
            "original": c.original,
            "corrected": c.corrected,
            "explanation": c.explanation,
            "category": c.category,
            "rule": c.rule,
            "created_at": now,
        }
        for c in corrections
    ]


def pending_row(reply: ReplyRecord, now: datetime) -> dict[str, Any]:
    """The review_pending row of `reply`'s grades (its `review`, which must be there)."""
    assert reply.review is not None
    return {
        "learner_id": reply.learner_id,
        "message_id": reply.reply_to,
        "used": list(reply.review.used),
        "missed": list(reply.review.missed),
        "offered": list(reply.review.offered),
        "created_at": now,
    }


# The memory_jobs row that asks for the review job (as Coordinator.mark writes it), and what
# it sets when the learner's row is there already.
REVIEW_JOB_ROW = {
    "kind": REVIEW_JOB,
    "running": False,
    "dirty": True,
    "runs": 0,
    "failures": 0,
}
REVIEW_JOB_AGAIN = {"dirty": True}


# -- steps run on the caller's connection, so that several share one transaction -------------


def insert_message(
    connection: Connection,
    learner_id: int,
    role: str,
    content: str,
    tokens: int,
    now: datetime,
    inbox_id: int | None = None,
    reply_to: int | None = None,
    spoken_seconds: float | None = None,
    untranscribed: bool = False,
) -> StoredMessage:
    """Insert one message, stored at `now`, and return it as stored."""
    values = {
        "spoken_seconds": spoken_seconds,
        "untranscribed": untranscribed,
        "learner_id": learner_id,
        "role": role,
        "content": content,
        "tokens": tokens,
        "inbox_id": inbox_id,
        "reply_to": reply_to,
        "created_at": now,
    }
    message_id = connection.execute(_INSERT_MESSAGE, values).scalar_one()
    return StoredMessage(message_id, role, content, tokens, spoken_seconds, untranscribed)


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
    return [StoredMessage(**row._mapping) for row in rows]


def read_unfolded(connection: Connection, learner_id: int) -> tuple[int, int]:
    """(number, total tokens) of the learner's messages not yet folded into the summary."""
    row = connection.execute(_UNFOLDED, {"learner_id": learner_id}).one()
    return int(row.unfolded), int(row.unfolded_tokens)


def read_backlog(connection: Connection, learner_id: int, limit: int) -> Backlog:
    """The unfolded messages' count and tokens, and the newest (at most `limit`) learner
    messages the profile has not read, oldest first."""
    rows = connection.execute(_BACKLOG, {"learner_id": learner_id, "limit": limit}).all()
    return backlog_in(rows)


def backlog_in(rows: Sequence[Any]) -> Backlog:
    """The `Backlog` in rows with `COUNTS`' columns (on each) and one `unread` message (or
    NULL) each."""
    head = rows[0]
    unread = [row.unread for row in rows if row.unread is not None]
    return Backlog(int(head.unfolded), int(head.unfolded_tokens), unread)


def read_stored_with_reply(
    connection: Connection, learner_id: int, inbox_id: int
) -> tuple[StoredMessage, StoredMessage | None] | None:
    """The learner message stored for inbox item `inbox_id` and Pam's reply to it, if any;
    None if no message is stored for it."""
    row = connection.execute(
        _STORED_WITH_REPLY, {"learner_id": learner_id, "inbox_id": inbox_id}
    ).first()
    if row is None:
        return None
    reply = None if row.reply_id is None else named(row, "reply", StoredMessage)
    return named(row, "message", StoredMessage), reply


# A written check-in whose outbox part never went, skipped for "reason": a queued one, which
# counted as unanswered when it was written, gives its learner's count back; an answered one
# loses its answer. Bound with "checkin_id" and "reason"; the count with "of_learner".
_NEVER_SENT: dict[str, Any] = {
    "state": SKIPPED,
    "skip_reason": bindparam("reason"),
    "answered_at": None,
}
_CHECKIN = Checkin.id == bindparam("checkin_id")
_SKIP_QUEUED = update(Checkin).where(_CHECKIN, Checkin.state == QUEUED).values(_NEVER_SENT)
_SKIP_ANSWERED = update(Checkin).where(_CHECKIN, Checkin.state == ANSWERED).values(_NEVER_SENT)
_GIVE_BACK_UNANSWERED = (
    update(CheckinState)
    .where(CheckinState.learner_id == bindparam("of_learner"))
    .values(unanswered=case((CheckinState.unanswered > 0, CheckinState.unanswered - 1), else_=0))
)


def skip_never_sent(connection: Connection, checkin_id: int, learner_id: int, reason: str) -> None:
    """Skip the written check-in `checkin_id` whose outbox part never went (past its deadline,
    or stopped by an opt-out or a block) for `reason`, on the caller's transaction: a queued
    one gives its learner's unanswered count back. Nothing for one in any other state."""
    values = {"checkin_id": checkin_id, "reason": reason}
    if connection.execute(_SKIP_QUEUED, values).rowcount:
        connection.execute(_GIVE_BACK_UNANSWERED, {"of_learner": learner_id})
    else:
        connection.execute(_SKIP_ANSWERED, values)
