"""The baseline of bench/write_paths.py: a turn's hot writes as Pam ran them on Postgres before
issue 30 gave both backends one write path (memory/database/backends/postgres_statements.py and
postgres.py as of commit 6750ae5), each one statement and one round trip (data-modifying CTEs):
storing the learner's message with the read of the context, storing the reply with its usage,
corrections and review grades and the memory backlog's read (with the claim finished and the
reply queued), finishing a claim, and accepting an inbound message with a NOTIFY. Those the
shared path replaced are kept here, and only here, so the benchmark can still run the two ways
side by side; the reply's statement, still Pam's, is imported from her own."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    Integer,
    Text,
    bindparam,
    cast,
    func,
    insert,
    select,
    true,
)
from sqlalchemy.exc import IntegrityError

from memory.database.backends.postgres import PostgresBackend
from memory.database.backends.postgres_statements import (
    _finish_and_queue_ctes,
)
from memory.database.claims import (
    ADMIT,
    INBOUND,
    NOTE_TURNED_AWAY,
    PENDING,
    Finishing,
    admission_values,
    turned_away_values,
)
from memory.database.models import (
    Learner,
    Message,
    Profile,
    Summary,
    UTCDateTime,
)
from memory.database.models_queue import InboxItem
from memory.database.records import (
    LEARNER,
    Activity,
    ActivityWindow,
    Context,
    LearnerGone,
    StoredMessage,
)
from memory.database.statements import (
    ACTIVITIES,
    LEARNER_COLUMNS,
    MESSAGE_COLUMNS,
    PROFILE_COLUMNS,
    REVIEW_OUTLOOK,
    SUMMARY_COLUMNS,
    activity_key,
    decode_context,
    labelled,
    window_values,
)
from memory.wakeup import CHANNEL

# -- storing a reply: the kept statement, Pam's own ------------------------------------------
# `SAVE_REPLY` and `SAVE_REPLY_AND_FINISH` are still one statement in Pam (postgres_statements);
# what the shared path replaced is rebuilt below as it was.


def _finish_and_queue() -> Any:
    """Finish the claim and queue its replies in one statement: (id, seq) of each reply
    queued, no row if the claim was lost."""
    _, queued = _finish_and_queue_ctes()
    return select(queued.c.id, queued.c.seq)


FINISH_AND_QUEUE = _finish_and_queue()

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
    """memory/database/statements.py's `context_query` as it was (learner, summary, profile,
    review's outlook, the `activity` counts and one unfolded message per row), with
    `_STORED`'s id on every row as `stored_id`: the insert and the read in one statement."""
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
            *REVIEW_OUTLOOK,
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
    """PostgresBackend with its hot writes fused, as they were (everything else Pam's own, the
    reply's one statement, `save_reply`, included)."""

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
