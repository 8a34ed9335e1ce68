"""A learner's conversation: their messages and Pam's replies, stored idempotently, and what a
turn reads before it calls the model (context, limits' counts, the memory backlog)."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from memory.clock import Clock, utcnow
from memory.database.backends import backend_for
from memory.database.db import Tables
from memory.database.models import Message
from memory.database.records import (
    LEARNER,
    PAM,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    LearnerGone,
    StoredMessage,
    TurnStart,
)
from memory.database.statements import (
    MESSAGE_COLUMNS,
    insert_message,
    read_backlog,
    read_context,
    read_messages,
    read_stored_with_reply,
    read_unfolded,
)


class PamReply(NamedTuple):
    """One of Pam's stored replies, as a tap on it reads it: the id of the learner message it
    answers, what Pam said, and what the learner had said ("" if that message is gone)."""

    answers: int
    content: str
    message: str


class Conversation(Tables):
    """Messages, read and written; each stored at the time `clock` says."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        super().__init__(engine, clock)
        self.backend = backend_for(engine)

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
                    connection, learner_id, role, content, tokens, self.clock(), inbox_id, reply_to
                )
        except IntegrityError as exc:
            existing = self.message_for(learner_id, inbox_id=inbox_id, reply_to=reply_to)
            if existing is not None:
                return existing
            raise LearnerGone(learner_id) from exc

    def add_learner_message(
        self,
        learner_id: int,
        content: str,
        tokens: int,
        *,
        inbox_id: int | None = None,
        spoken_seconds: float | None = None,
        untranscribed: bool = False,
    ) -> tuple[StoredMessage, StoredMessage | None]:
        """Store the learner's message; with it, Pam's reply to it if there is one already.
        With `inbox_id` the write is idempotent: if the message for that inbox item is stored
        (the turn runs again after a crash or a failed LLM call), that one is returned, with
        the reply made to it, if any. A message stored just now has no reply, so only a repeat
        costs a lookup. `spoken_seconds`: the message was a voice note this long;
        `untranscribed`: one Pam could not transcribe (`content` says so). Raises LearnerGone if
        the learner was forgotten meanwhile."""
        with self.single.connect() as connection:
            return self._store_learner_message(
                connection, learner_id, content, tokens, inbox_id, spoken_seconds, untranscribed
            )

    def _store_learner_message(
        self,
        connection: Connection,
        learner_id: int,
        content: str,
        tokens: int,
        inbox_id: int | None,
        spoken_seconds: float | None,
        untranscribed: bool,
    ) -> tuple[StoredMessage, StoredMessage | None]:
        """`add_learner_message` on `connection` (which it leaves outside a transaction)."""
        try:
            with connection.begin():  # one INSERT
                stored = insert_message(
                    connection,
                    learner_id,
                    LEARNER,
                    content,
                    tokens,
                    self.clock(),
                    inbox_id,
                    spoken_seconds=spoken_seconds,
                    untranscribed=untranscribed,
                )
            return stored, None
        except IntegrityError as exc:
            if inbox_id is not None:
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
        spoken_seconds: float | None = None,
        untranscribed: bool = False,
    ) -> TurnStart:
        """`add_learner_message`, then, unless the message was answered before,
        `context_and_activity`, on one connection: two round trips on either database (on
        Postgres they were one statement until bench/write_paths.py measured what that saved:
        about 1.7 ms and 0.4 ms of CPU a turn). Raises LearnerGone if the learner was forgotten
        meanwhile."""
        with self.single.connect() as connection:  # one checkout for both
            stored, answered = self._store_learner_message(
                connection, learner_id, content, tokens, inbox_id, spoken_seconds, untranscribed
            )
            if answered is not None:
                return TurnStart(stored, answered, None, None)
            found = read_context(connection, learner_id, window)
        if found is None:
            raise LearnerGone(learner_id)
        context, activity = found
        return TurnStart(stored, None, context, activity)

    def message_for(
        self, learner_id: int, *, inbox_id: int | None = None, reply_to: int | None = None
    ) -> StoredMessage | None:
        """The learner's message stored for inbox item `inbox_id`, or Pam's reply to message
        `reply_to`; None if there is none (or neither key is given)."""
        if inbox_id is None and reply_to is None:
            return None
        with self.sessions() as session:
            query = select(*MESSAGE_COLUMNS).where(Message.learner_id == learner_id)
            if inbox_id is not None:
                query = query.where(Message.inbox_id == inbox_id)
            else:
                query = query.where(Message.reply_to == reply_to)
            row = session.execute(query).first()
            return StoredMessage(**row._mapping) if row else None

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

    def reply_of(self, learner_id: int, answering: int | None = None) -> PamReply | None:
        """Pam's reply to the learner's message `answering`, or her newest reply (None), with
        that message: looked up among `learner_id`'s own messages only, so an id another
        learner's reply answers finds nothing. None when there is no such reply."""
        said = aliased(Message)
        query = (
            select(Message.reply_to, Message.content, said.content.label("message"))
            .outerjoin(said, (said.id == Message.reply_to) & (said.learner_id == learner_id))
            .where(Message.learner_id == learner_id, Message.role == PAM)
            .where(Message.reply_to.is_not(None))
        )
        if answering is not None:
            query = query.where(Message.reply_to == answering)
        with self.single.connect() as connection:
            row = connection.execute(query.order_by(Message.id.desc()).limit(1)).first()
        if row is None:
            return None
        return PamReply(int(row.reply_to), row.content, row.message or "")
