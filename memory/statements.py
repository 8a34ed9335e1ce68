"""The statements a turn runs, built once at import: every call only binds its values. With
them, the steps that run them on the caller's connection, so that several share one
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    bindparam,
    func,
    insert,
    select,
    true,
)
from sqlalchemy.orm import aliased

from memory.models import Correction, Learner, Message, Profile, Summary, Usage
from memory.records import (
    LEARNER,
    Backlog,
    CorrectionRecord,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
)

# The columns of LearnerInfo, StoredMessage, SummaryState and ProfileState, in field order.
_LEARNER_COLUMNS = (
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


FIND_LEARNER = select(*_LEARNER_COLUMNS).where(Learner.external_id == bindparam("external_id"))

# Learner, summary and profile in one row; no row if any of them is gone.
CONTEXT_HEAD = (
    select(*_LEARNER_COLUMNS, *_SUMMARY_COLUMNS, *_PROFILE_COLUMNS)
    .join_from(Learner, Summary, Summary.learner_id == Learner.id)
    .join(Profile, Profile.learner_id == Learner.id)
    .where(Learner.id == bindparam("learner_id"))
)

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
ACTIVITY = select(*_MY_ACTIVITY)
ACTIVITY_WITH_EVERYONE = select(
    *_MY_ACTIVITY, select(_SPENT).where(_TOKENS_SINCE).scalar_subquery()
)


def context_head(row: Sequence[Any]) -> tuple[LearnerInfo, SummaryState, ProfileState]:
    """Learner, summary and profile from one row of `CONTEXT_HEAD`."""
    summary_at = len(_LEARNER_COLUMNS)
    profile_at = summary_at + len(_SUMMARY_COLUMNS)
    data, *profile = row[profile_at:]
    return (
        LearnerInfo(*row[:summary_at]),
        SummaryState(*row[summary_at:profile_at]),
        ProfileState(dict(data or {}), *profile),
    )


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
    rows = connection.execute(_BACKLOG, {"learner_id": learner_id, "limit": limit}).all()
    count, tokens = int(rows[0][0]), int(rows[0][1])
    return Backlog(count, tokens, [row[2] for row in rows if row[2] is not None])


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
