"""All of Pam's database reads and writes about learners, filtered by learner on every query."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Integer,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased, sessionmaker

from memory.models import (
    Correction,
    InboxItem,
    Learner,
    MemoryJob,
    Message,
    OutboxItem,
    Profile,
    Summary,
    Usage,
    utcnow,
)

LEARNER = "learner"
PAM = "pam"

# Every table holding something about a learner, children first: /forget walks this list.
LEARNER_TABLES = (Correction, Usage, MemoryJob, Summary, Profile, Message)


@dataclass(frozen=True)
class LearnerInfo:
    """A learner and their explicit settings."""

    id: int
    external_id: str
    display_name: str | None
    target_language: str | None
    native_language: str | None
    level: str | None


@dataclass(frozen=True)
class StoredMessage:
    """One stored message of a conversation."""

    id: int
    role: str
    content: str
    tokens: int


@dataclass(frozen=True)
class SummaryState:
    """The rolling summary as of `version`; messages up to `watermark` are folded into it."""

    text: str
    tokens: int
    watermark: int
    version: int
    folds: int
    updated_at: datetime | None


@dataclass(frozen=True)
class ProfileState:
    """The learned profile as of `version`; learner messages up to `watermark` were read."""

    data: dict[str, Any]
    watermark: int
    version: int
    messages_processed: int
    updated_at: datetime | None


@dataclass(frozen=True)
class CorrectionRecord:
    """One structured correction."""

    original: str
    corrected: str
    explanation: str = ""
    category: str = "other"


class Backlog(NamedTuple):
    """What decides whether a fold or a profile update is due: how many messages (and tokens)
    are not folded into the summary yet, and the newest learner messages the profile has not
    read, oldest first."""

    unfolded: int
    unfolded_tokens: int
    unread: list[str]


@dataclass(frozen=True)
class Context:
    """What a reply prompt is built from: settings, profile, summary and every unfolded message."""

    learner: LearnerInfo
    profile: ProfileState
    summary: SummaryState
    messages: list[StoredMessage] = field(default_factory=list)


# -- the statements a turn runs, built once: every call only binds its values ----------------

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


_FIND_LEARNER = select(*_LEARNER_COLUMNS).where(Learner.external_id == bindparam("external_id"))

# Learner, summary and profile in one row; no row if any of them is gone.
_CONTEXT_HEAD = (
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
_INSERT_USAGE = insert(Usage)
_INSERT_CORRECTIONS = insert(Correction)

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
    select(Message.content)
    .where(_THEIR_MESSAGES, Message.role == LEARNER, _after_watermark(Profile))
    .order_by(Message.id.desc())
    .limit(bindparam("limit", type_=Integer))
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
_ACTIVITY = select(*_MY_ACTIVITY)
_ACTIVITY_WITH_EVERYONE = select(
    *_MY_ACTIVITY, select(_SPENT).where(_TOKENS_SINCE).scalar_subquery()
)


def _learner_info(row: Learner) -> LearnerInfo:
    return LearnerInfo(
        id=row.id,
        external_id=row.external_id,
        display_name=row.display_name,
        target_language=row.target_language,
        native_language=row.native_language,
        level=row.level,
    )


def _summary_state(row: Summary) -> SummaryState:
    return SummaryState(row.text, row.tokens, row.watermark, row.version, row.folds, row.updated_at)


def _profile_state(row: Profile) -> ProfileState:
    return ProfileState(
        dict(row.data or {}), row.watermark, row.version, row.messages_processed, row.updated_at
    )


def _context_head(row: Sequence[Any]) -> tuple[LearnerInfo, SummaryState, ProfileState]:
    """Learner, summary and profile from one row of `_CONTEXT_HEAD`."""
    summary_at = len(_LEARNER_COLUMNS)
    profile_at = summary_at + len(_SUMMARY_COLUMNS)
    data, *profile = row[profile_at:]
    return (
        LearnerInfo(*row[:summary_at]),
        SummaryState(*row[summary_at:profile_at]),
        ProfileState(dict(data or {}), *profile),
    )


def _correction_rows(
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


def _insert_message(
    connection: Connection,
    learner_id: int,
    role: str,
    content: str,
    tokens: int,
    inbox_id: int | None = None,
    reply_to: int | None = None,
) -> StoredMessage:
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


def _messages(
    connection: Connection, learner_id: int, after: int, role: str | None = None
) -> list[StoredMessage]:
    values = {"learner_id": learner_id, "after": after}
    if role is None:
        rows = connection.execute(_MESSAGES, values)
    else:
        rows = connection.execute(_MESSAGES_OF_ROLE, {**values, "role": role})
    return [StoredMessage(*row) for row in rows]


def _unfolded(connection: Connection, learner_id: int) -> tuple[int, int]:
    count, tokens = connection.execute(_UNFOLDED, {"learner_id": learner_id}).one()
    return int(count), int(tokens)


def _backlog(connection: Connection, learner_id: int, limit: int) -> Backlog:
    count, tokens = _unfolded(connection, learner_id)
    unread = connection.scalars(_UNREAD_BY_PROFILE, {"learner_id": learner_id, "limit": limit})
    return Backlog(count, tokens, list(reversed(unread.all())))


def _stored_with_reply(
    connection: Connection, learner_id: int, inbox_id: int
) -> tuple[StoredMessage, StoredMessage | None] | None:
    row: Sequence[Any] | None = connection.execute(
        _STORED_WITH_REPLY, {"learner_id": learner_id, "inbox_id": inbox_id}
    ).first()
    if row is None:
        return None
    stored, reply = row[: len(_MESSAGE_COLUMNS)], row[len(_MESSAGE_COLUMNS) :]
    return StoredMessage(*stored), None if reply[0] is None else StoredMessage(*reply)


class LearnerGone(Exception):
    """The learner was forgotten (or never existed) while work about them was under way."""


class Store:
    """The message store: learners, messages, summary, profile, corrections, usage."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)

    # -- learners -------------------------------------------------------------------------

    def learner(self, external_id: str, display_name: str | None = None) -> LearnerInfo:
        """The learner with `external_id`, created (with empty summary and profile) if new."""
        found = self.find_learner(external_id)
        if found is not None:
            return found
        try:
            with self.sessions.begin() as session:
                row = Learner(external_id=external_id, display_name=display_name)
                session.add(row)
                session.flush()
                session.add(Summary(learner_id=row.id))
                session.add(Profile(learner_id=row.id, data={}))
                return _learner_info(row)
        except IntegrityError:  # created concurrently by another turn or process
            found = self.find_learner(external_id)
            if found is None:
                raise
            return found

    def find_learner(self, external_id: str) -> LearnerInfo | None:
        """The learner with `external_id`, or None."""
        with self.engine.connect() as connection:
            row = connection.execute(_FIND_LEARNER, {"external_id": external_id}).first()
        return LearnerInfo(*row) if row else None

    def get_learner(self, learner_id: int) -> LearnerInfo:
        """The learner with id `learner_id`; raises LearnerGone if there is none."""
        with self.sessions() as session:
            row = session.get(Learner, learner_id)
            if row is None:
                raise LearnerGone(learner_id)
            return _learner_info(row)

    def update_settings(self, learner_id: int, **values: str | None) -> LearnerInfo:
        """Set some of `target_language`, `native_language`, `level`, `display_name`."""
        allowed = {"target_language", "native_language", "level", "display_name"}
        if not set(values) <= allowed:
            raise ValueError(f"unknown learner settings: {sorted(set(values) - allowed)}")
        with self.sessions.begin() as session:
            row = session.get(Learner, learner_id)
            if row is None:
                raise LearnerGone(learner_id)
            for name, value in values.items():
                setattr(row, name, value)
            return _learner_info(row)

    def forget(self, learner_id: int, keep_inbox_id: int | None = None) -> None:
        """Erase every row about the learner, in every table, in one transaction: their
        conversation, summary, profile, corrections, usage, memory jobs, and queued inbound
        and outbound messages up to `keep_inbox_id` (the /forget being answered)."""
        with self.sessions.begin() as session:
            learner = session.get(Learner, learner_id)
            if learner is None:
                return
            inbox = delete(InboxItem).where(InboxItem.address == learner.external_id)
            outbox = delete(OutboxItem).where(OutboxItem.address == learner.external_id)
            if keep_inbox_id is not None:
                # Only what came before the /forget: its confirmation must still go out, and
                # messages sent after it belong to the fresh start.
                inbox = inbox.where(InboxItem.id < keep_inbox_id)
                outbox = outbox.where(
                    OutboxItem.inbox_id.is_(None) | (OutboxItem.inbox_id < keep_inbox_id)
                )
            session.execute(outbox)
            session.execute(inbox)
            for model in LEARNER_TABLES:
                session.execute(delete(model).where(model.learner_id == learner_id))
            session.execute(delete(Learner).where(Learner.id == learner_id))
        if self.engine.dialect.name == "sqlite":
            # secure_delete zeroes the freed pages, but the write-ahead log still holds the old
            # ones until a checkpoint copies it back and truncates it: do that now.
            with self.engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- messages -------------------------------------------------------------------------

    def add_message(
        self,
        learner_id: int,
        role: str,
        content: str,
        tokens: int,
        *,
        inbox_id: int | None = None,
        reply_to: int | None = None,
    ) -> StoredMessage:
        """Store one message; raises LearnerGone if the learner was forgotten meanwhile.
        With `inbox_id` (a learner message) or `reply_to` (Pam's answer) the write is
        idempotent: if that message is already stored, the stored one is returned."""
        if role not in (LEARNER, PAM):
            raise ValueError(f"unknown role {role!r}")
        try:
            with self.engine.begin() as connection:
                return _insert_message(
                    connection, learner_id, role, content, tokens, inbox_id, reply_to
                )
        except IntegrityError as exc:
            existing = self.message_for(learner_id, inbox_id=inbox_id, reply_to=reply_to)
            if existing is not None:
                return existing
            raise LearnerGone(learner_id) from exc

    def add_learner_message(
        self, learner_id: int, content: str, tokens: int, *, inbox_id: int | None = None
    ) -> tuple[StoredMessage, StoredMessage | None]:
        """Store the learner's message; with it, Pam's reply to it if there is one already.
        With `inbox_id` the write is idempotent: if the message for that inbox item is stored
        (the turn runs again after a crash or a failed LLM call), that one is returned, with
        the reply made to it, if any. A message stored just now has no reply, so only a repeat
        costs a lookup. Raises LearnerGone if the learner was forgotten meanwhile."""
        try:
            with self.engine.begin() as connection:
                stored = _insert_message(connection, learner_id, LEARNER, content, tokens, inbox_id)
                return stored, None
        except IntegrityError as exc:
            if inbox_id is not None:
                with self.engine.connect() as connection:
                    found = _stored_with_reply(connection, learner_id, inbox_id)
                if found is not None:
                    return found
            raise LearnerGone(learner_id) from exc

    def save_reply(
        self,
        learner_id: int,
        reply_to: int,
        content: str,
        tokens: int,
        corrections: Sequence[CorrectionRecord],
        usage: tuple[str, int, int],
        *,
        backlog_limit: int,
    ) -> tuple[StoredMessage, Backlog | None]:
        """Pam's reply to message `reply_to`, the corrections it made and the call's usage
        (model, input, output tokens), written in one transaction that also reads the memory
        backlog as of the reply (`memory_backlog` with `backlog_limit`). If another worker
        stored a reply to that message first, theirs is returned with no backlog and only the
        usage is recorded (the tokens were spent all the same). Raises LearnerGone if
        forgotten meanwhile."""
        model, input_tokens, output_tokens = usage
        try:
            with self.engine.begin() as connection:
                reply = _insert_message(
                    connection, learner_id, PAM, content, tokens, reply_to=reply_to
                )
                connection.execute(
                    _INSERT_USAGE,
                    {
                        "learner_id": learner_id,
                        "model": model,
                        "purpose": "reply",
                        "input_tokens": input_tokens,
                        "output_tokens": output_tokens,
                    },
                )
                if corrections:
                    rows = _correction_rows(learner_id, reply_to, corrections)
                    connection.execute(_INSERT_CORRECTIONS, rows)
                return reply, _backlog(connection, learner_id, backlog_limit)
        except IntegrityError as exc:
            existing = self.message_for(learner_id, reply_to=reply_to)
            if existing is None:
                raise LearnerGone(learner_id) from exc
            self.record_usage(learner_id, model, "reply", input_tokens, output_tokens)
            return existing, None

    def message_for(
        self, learner_id: int, *, inbox_id: int | None = None, reply_to: int | None = None
    ) -> StoredMessage | None:
        """The learner's message stored for inbox item `inbox_id`, or Pam's reply to message
        `reply_to`; None if there is none (or neither key is given)."""
        if inbox_id is None and reply_to is None:
            return None
        with self.sessions() as session:
            query = select(Message.id, Message.role, Message.content, Message.tokens).where(
                Message.learner_id == learner_id
            )
            if inbox_id is not None:
                query = query.where(Message.inbox_id == inbox_id)
            else:
                query = query.where(Message.reply_to == reply_to)
            row = session.execute(query).first()
            return StoredMessage(*row) if row else None

    def messages(
        self, learner_id: int, after: int = 0, role: str | None = None
    ) -> list[StoredMessage]:
        """The learner's messages (of `role`, if given) with id greater than `after`, oldest
        first."""
        with self.engine.connect() as connection:
            return _messages(connection, learner_id, after, role)

    def context(self, learner_id: int) -> Context:
        """Settings, profile, summary and every message not yet folded into the summary."""
        with self.engine.connect() as connection:
            head = connection.execute(_CONTEXT_HEAD, {"learner_id": learner_id}).first()
            if head is None:
                raise LearnerGone(learner_id)
            learner, summary, profile = _context_head(head)
            # The summary is read before the messages: a fold committing in between then only
            # means some messages are in the prompt verbatim as well as folded, never missing.
            messages = _messages(connection, learner_id, summary.watermark)
        return Context(learner, profile, summary, messages)

    def unfolded_tokens(self, learner_id: int) -> tuple[int, int]:
        """(number, total tokens) of the learner's messages not yet folded into the summary."""
        with self.engine.connect() as connection:
            return _unfolded(connection, learner_id)

    def memory_backlog(self, learner_id: int, limit: int) -> Backlog:
        """What a turn needs to know whether a fold or a profile update is due, in one round of
        queries: `unfolded_tokens`, and the newest (at most `limit`) learner messages the
        profile has not read yet."""
        with self.engine.connect() as connection:
            return _backlog(connection, learner_id, limit)

    # -- summary and profile, written compare-and-set -------------------------------------

    @staticmethod
    def _get(session: Session, model: type[Summary] | type[Profile], learner_id: int) -> Any:
        row = session.get(model, learner_id)
        if row is None:
            raise LearnerGone(learner_id)
        return row

    def summary(self, learner_id: int) -> SummaryState:
        """The learner's current rolling summary."""
        with self.sessions() as session:
            return _summary_state(self._get(session, Summary, learner_id))

    def profile(self, learner_id: int) -> ProfileState:
        """The learner's current learned profile."""
        with self.sessions() as session:
            return _profile_state(self._get(session, Profile, learner_id))

    def save_summary(
        self, learner_id: int, expected_version: int, text: str, tokens: int, watermark: int
    ) -> bool:
        """Write a new summary and its watermark together, only if nobody wrote since
        `expected_version` and the learner still exists. True if written."""
        with self.sessions.begin() as session:
            result = session.execute(
                update(Summary)
                .where(Summary.learner_id == learner_id, Summary.version == expected_version)
                .values(
                    text=text,
                    tokens=tokens,
                    watermark=watermark,
                    folds=Summary.folds + 1,
                    version=Summary.version + 1,
                    updated_at=utcnow(),
                )
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def save_profile(
        self,
        learner_id: int,
        expected_version: int,
        data: dict[str, Any] | None,
        watermark: int,
        processed: int,
    ) -> bool:
        """Advance the profile watermark (and replace the data unless `data` is None), only if
        nobody wrote since `expected_version` and the learner still exists. True if written."""
        values: dict[str, Any] = {
            "watermark": watermark,
            "messages_processed": Profile.messages_processed + processed,
            "version": Profile.version + 1,
            "updated_at": utcnow(),
        }
        if data is not None:
            values["data"] = data
        with self.sessions.begin() as session:
            result = session.execute(
                update(Profile)
                .where(Profile.learner_id == learner_id, Profile.version == expected_version)
                .values(**values)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    # -- corrections and usage ------------------------------------------------------------

    def add_corrections(
        self, learner_id: int, message_id: int | None, corrections: Sequence[CorrectionRecord]
    ) -> None:
        """Store the corrections Pam made to one learner message."""
        if not corrections:
            return
        try:
            with self.engine.begin() as connection:
                rows = _correction_rows(learner_id, message_id, corrections)
                connection.execute(_INSERT_CORRECTIONS, rows)
        except IntegrityError as exc:
            raise LearnerGone(learner_id) from exc

    def corrections(self, learner_id: int, limit: int = 20) -> list[CorrectionRecord]:
        """The learner's most recent corrections, newest last."""
        with self.sessions() as session:
            rows = session.scalars(
                select(Correction)
                .where(Correction.learner_id == learner_id)
                .order_by(Correction.id.desc())
                .limit(limit)
            ).all()
            return [
                CorrectionRecord(r.original, r.corrected, r.explanation, r.category)
                for r in reversed(rows)
            ]

    def record_usage(
        self, learner_id: int, model: str, purpose: str, input_tokens: int, output_tokens: int
    ) -> None:
        """Record one LLM call's tokens — unless the learner has been forgotten meanwhile."""
        # IntegrityError: forgotten while the insert ran (Postgres checks the key).
        with contextlib.suppress(IntegrityError):
            self._insert_usage(learner_id, model, purpose, input_tokens, output_tokens)

    def _insert_usage(
        self, learner_id: int, model: str, purpose: str, input_tokens: int, output_tokens: int
    ) -> None:
        with self.sessions.begin() as session:
            session.execute(
                insert(Usage).from_select(
                    [
                        "learner_id",
                        "model",
                        "purpose",
                        "input_tokens",
                        "output_tokens",
                        "created_at",
                    ],
                    select(
                        literal(learner_id),
                        literal(model),
                        literal(purpose),
                        literal(input_tokens),
                        literal(output_tokens),
                        literal(utcnow(), Usage.created_at.type),
                    ).where(exists().where(Learner.id == learner_id)),
                )
            )

    def activity(
        self, learner_id: int, since_messages: datetime, since_tokens: datetime, everyone: bool
    ) -> tuple[int, int, int | None]:
        """What the cost and abuse limits look at, in one SELECT: the learner's messages since
        `since_messages`, their LLM tokens since `since_tokens`, and (with `everyone`) all
        learners' tokens since then."""
        query = _ACTIVITY_WITH_EVERYONE if everyone else _ACTIVITY
        values = {
            "learner_id": learner_id,
            "messages_since": since_messages,
            "tokens_since": since_tokens,
        }
        with self.engine.connect() as connection:
            messages, mine, *total = connection.execute(query, values).one()
        return int(messages), int(mine), int(total[0]) if total else None

    def usage(self, learner_id: int) -> dict[str, tuple[int, int, int]]:
        """Per purpose: (calls, input tokens, output tokens) for the learner."""
        with self.sessions() as session:
            rows = session.execute(
                select(
                    Usage.purpose,
                    func.count(Usage.id),
                    func.sum(Usage.input_tokens),
                    func.sum(Usage.output_tokens),
                )
                .where(Usage.learner_id == learner_id)
                .group_by(Usage.purpose)
            )
            return {purpose: (int(n), int(i), int(o)) for purpose, n, i, o in rows}

    def job_states(self, learner_id: int) -> list[dict[str, Any]]:
        """The learner's memory-job coordination rows (for operators)."""
        with self.sessions() as session:
            rows = session.scalars(
                select(MemoryJob).where(MemoryJob.learner_id == learner_id).order_by(MemoryJob.kind)
            )
            return [
                {
                    "kind": row.kind,
                    "running": row.running,
                    "dirty": row.dirty,
                    "lease_expires_at": row.lease_expires_at,
                    "runs": row.runs,
                    "failures": row.failures,
                    "last_error": row.last_error,
                    "updated_at": row.updated_at,
                }
                for row in rows
            ]

    def rows_about(self, learner_id: int, external_id: str) -> dict[str, int]:
        """How many rows in each table are about the learner (used to prove /forget)."""
        counts: dict[str, int] = {}
        with self.sessions() as session:
            for model in LEARNER_TABLES:
                counts[model.__tablename__] = int(
                    session.scalar(
                        select(func.count())
                        .select_from(model)
                        .where(model.learner_id == learner_id)
                    )
                    or 0
                )
            for queue in (InboxItem, OutboxItem):
                counts[queue.__tablename__] = int(
                    session.scalar(
                        select(func.count()).select_from(queue).where(queue.address == external_id)
                    )
                    or 0
                )
            counts["learners"] = int(
                session.scalar(
                    select(func.count())
                    .select_from(Learner)
                    .where((Learner.id == learner_id) | (Learner.external_id == external_id))
                )
                or 0
            )
        return counts
