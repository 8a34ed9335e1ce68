"""All of Pam's database reads and writes about learners, filtered by learner on every query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from memory import db
from memory.inspection import Inspection
from memory.ledger import Ledger
from memory.models import (
    InboxItem,
    Learner,
    Message,
    OutboxItem,
    Profile,
    Summary,
    utcnow,
)
from memory.queue import SAVE_REPLY_AND_FINISH, Finished, Finishing
from memory.records import (
    LEARNER,
    LEARNER_TABLES,
    PAM,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    CorrectionRecord,
    LearnerGone,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
    TurnStart,
)
from memory.statements import (
    FIND_LEARNER,
    INSERT_CORRECTIONS,
    INSERT_USAGE,
    correction_rows,
    insert_message,
    read_backlog,
    read_context,
    read_messages,
    read_stored_with_reply,
    read_unfolded,
    save_reply_and_read_backlog,
)

# What other modules import from here; the values live in memory.records.
__all__ = [
    "LEARNER",
    "LEARNER_TABLES",
    "PAM",
    "Backlog",
    "Context",
    "CorrectionRecord",
    "LearnerGone",
    "LearnerInfo",
    "ProfileState",
    "Store",
    "StoredMessage",
    "SummaryState",
]


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


class Store(Ledger, Inspection):
    """The message store: learners, messages, summary, profile, corrections, usage (the last
    two from `Ledger`, what operators inspect from `Inspection`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.single = db.autocommit(engine)  # one statement, or reads that need no snapshot
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
        with self.single.connect() as connection:
            row = connection.execute(FIND_LEARNER, {"external_id": external_id}).first()
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
                return insert_message(
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
            with self.single.begin() as connection:  # one INSERT
                stored = insert_message(connection, learner_id, LEARNER, content, tokens, inbox_id)
                return stored, None
        except IntegrityError as exc:
            if inbox_id is not None:
                with self.single.connect() as connection:
                    found = read_stored_with_reply(connection, learner_id, inbox_id)
                if found is not None:
                    return found
            raise LearnerGone(learner_id) from exc

    def begin_turn(
        self,
        learner_id: int,
        content: str,
        tokens: int,
        *,
        inbox_id: int | None,
        window: ActivityWindow | None,
    ) -> TurnStart:
        """`add_learner_message`, then, unless the message was answered before,
        `context_and_activity`: on Postgres in one statement and one round trip. Raises
        LearnerGone if the learner was forgotten meanwhile."""
        if self.engine.dialect.name == "postgresql":
            message = StoredMessage(0, LEARNER, content, tokens)
            try:
                with self.single.connect() as connection:
                    found = read_context(connection, learner_id, window, message, inbox_id)
            except IntegrityError:
                pass  # stored before (a re-run), or the learner is gone: the two steps say which
            else:
                if found is None:
                    raise LearnerGone(learner_id)
                context, activity = found
                return TurnStart(context.messages[-1], None, context, activity)
        stored, answered = self.add_learner_message(learner_id, content, tokens, inbox_id=inbox_id)
        if answered is not None:
            return TurnStart(stored, answered, None, None)
        context, activity = self.context_and_activity(learner_id, window)
        return TurnStart(stored, None, context, activity)

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
        finishing: Finishing | None = None,
    ) -> tuple[StoredMessage, Backlog | None, Finished | None]:
        """Pam's reply to message `reply_to`, the corrections it made and the call's usage
        (model, input, output tokens), written in one transaction that also reads the memory
        backlog as of the reply (`memory_backlog` with `backlog_limit`). With `finishing`, the
        inbox claim the turn answers is finished with the reply in the same transaction (on
        Postgres the same statement) and the outcome comes third. If another worker stored a
        reply to that message first, theirs is returned with no backlog, nothing is finished,
        and only the usage is recorded (the tokens were spent all the same). Raises
        LearnerGone if forgotten meanwhile."""
        model, input_tokens, output_tokens = usage
        parts = finishing.split(content) if finishing else []
        try:
            if self.engine.dialect.name == "postgresql":  # one statement, one round trip
                also = (SAVE_REPLY_AND_FINISH, finishing.values(parts)) if finishing else None
                with self.single.connect() as connection:
                    reply, backlog, more = save_reply_and_read_backlog(
                        connection,
                        learner_id,
                        reply_to,
                        content,
                        tokens,
                        corrections,
                        usage,
                        backlog_limit,
                        also=also,
                    )
                if finishing is None:
                    return reply, backlog, None
                held, ids = more  # ids: NULL when no reply was queued
                return (
                    reply,
                    backlog,
                    Finished(finishing.claims(parts, (ids or []) if held else None)),
                )
            with self.engine.begin() as connection:
                reply = insert_message(
                    connection, learner_id, PAM, content, tokens, reply_to=reply_to
                )
                connection.execute(
                    INSERT_USAGE,
                    {
                        "learner_id": learner_id,
                        "model": model,
                        "purpose": "reply",
                        "input_tokens": input_tokens,
                        "output_tokens": output_tokens,
                    },
                )
                if corrections:
                    rows = correction_rows(learner_id, reply_to, corrections)
                    connection.execute(INSERT_CORRECTIONS, rows)
                backlog = read_backlog(connection, learner_id, backlog_limit)
                if finishing is None:
                    return reply, backlog, None
                return reply, backlog, Finished(finishing.run(connection, parts))
        except IntegrityError as exc:
            existing = self.message_for(learner_id, reply_to=reply_to)
            if existing is None:
                raise LearnerGone(learner_id) from exc
            self.record_usage(learner_id, model, "reply", input_tokens, output_tokens)
            return existing, None, None

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
        with self.single.connect() as connection:
            return read_messages(connection, learner_id, after, role)

    def context(self, learner_id: int) -> Context:
        """Settings, profile, summary and every message not yet folded into the summary."""
        return self.context_and_activity(learner_id, None)[0]

    def context_and_activity(
        self, learner_id: int, window: ActivityWindow | None
    ) -> tuple[Context, Activity | None]:
        """`context`, and what the cost and abuse limits count in `window` (`activity`), in
        one query: a turn reads everything it needs before the LLM call in one round trip."""
        with self.single.connect() as connection:
            found = read_context(connection, learner_id, window)
        if found is None:
            raise LearnerGone(learner_id)
        return found

    def unfolded_tokens(self, learner_id: int) -> tuple[int, int]:
        """(number, total tokens) of the learner's messages not yet folded into the summary."""
        with self.single.connect() as connection:
            return read_unfolded(connection, learner_id)

    def memory_backlog(self, learner_id: int, limit: int) -> Backlog:
        """What a turn needs to know whether a fold or a profile update is due, in one round of
        queries: `unfolded_tokens`, and the newest (at most `limit`) learner messages the
        profile has not read yet."""
        with self.single.connect() as connection:
            return read_backlog(connection, learner_id, limit)

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
