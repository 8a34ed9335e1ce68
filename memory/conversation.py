"""A learner's conversation: their messages and Pam's replies, stored idempotently, and what a
turn reads before it calls the model (context, limits' counts, the memory backlog)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from memory.db import Tables
from memory.ledger import Ledger
from memory.models import Message
from memory.queue import SAVE_REPLY_AND_FINISH, Finished, Finishing
from memory.records import (
    LEARNER,
    PAM,
    Activity,
    ActivityWindow,
    Backlog,
    Context,
    CorrectionRecord,
    LearnerGone,
    StoredMessage,
    TurnStart,
)
from memory.statements import (
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


class Conversation(Tables):
    """Messages, read and written."""

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
            Ledger(self.engine).record_usage(
                learner_id, model, "reply", input_tokens, output_tokens
            )
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
