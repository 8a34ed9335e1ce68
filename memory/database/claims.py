"""Claims on queue items, and finishing an inbox claim: the values and statements that the
queues and every backend share. A claim holds an item under a token and a lease (`Lease`, the
same for both queues); an inbox claim (`InboxClaim`) and an outbox claim (`OutboxClaim`) each
carry what a worker needs of their item. Finishing an inbox claim marks it answered and queues
its replies, the first ones perhaps already claimed by the caller to send at once."""

from __future__ import annotations

import enum
import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnClause,
    Connection,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)

from memory.database.models import Learner, UTCDateTime
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LearnerInfo
from memory.messages import TURNED_AWAY, VoiceNote

PENDING, CLAIMED, DONE, SENT, FAILED = "pending", "claimed", "done", "sent", "failed"
UNFINISHED = (PENDING, CLAIMED)


# The statuses of `unfinished` as SQL literals, written into the statement once, when it is
# built: a `literal_execute` parameter is rendered again on every execution (0.05 ms of CPU a
# claim on Postgres, a seventh of an idle one's, measured).
_UNFINISHED_SQL: list[ColumnClause[str]] = [literal_column(f"'{status}'") for status in UNFINISHED]


def unfinished(item: Any) -> Any:
    """`item` is pending or claimed, with the two written into the SQL: only a condition that
    states the partial indexes' own lets SQLite use them (bound values it cannot compare with
    them; it read every finished item instead)."""
    return item.status.in_(_UNFINISHED_SQL)


@dataclass(frozen=True)
class Lease:
    """A claim on one queue item, whichever queue: the item's id, the token that proves the
    claim, and how many times the item has been claimed (this time included). Renewing,
    releasing and finishing a claim go by these alone (`held`); the claim types add what a
    worker needs of their item."""

    id: int
    token: str
    attempts: int


class Standing(enum.Enum):
    """Where a claim stands when its holder looks (`Queue.standing`), each with what it means
    for the work: still held, its lease renewed; its learner forgotten (/forget deleted their
    queue items); or lost, taken over by another worker once the lease ran out."""

    HELD = "held"
    FORGOTTEN = "its learner was forgotten"
    LOST = "its claim was lost (the lease ran out)"


@dataclass(frozen=True)
class InboxClaim(Lease):
    """A claimed inbox message: who sent it where, what it says, and what the worker knew of
    its learner and their replies when it was claimed."""

    address: str
    channel: str
    chat_id: str
    text: str
    display_name: str | None = None
    received_at: datetime | None = None
    kind: str = "text"
    # Whether an older reply to the address was still undelivered when it was claimed. Only
    # its own finish adds replies to the address, so "no" stays true until then.
    replies_waiting: bool = False
    # The learner the address belonged to when it was claimed (None: nobody yet), so that the
    # turn need not look them up again.
    learner: LearnerInfo | None = None
    # The voice note to transcribe, if the message is one.
    voice: VoiceNote | None = None
    # What the platform said of the sender's language (memory.messages.Inbound).
    language_hint: str | None = None


@dataclass(frozen=True)
class OutboxClaim(Lease):
    """A claimed outbox part: where it goes, what it says, and what goes with it."""

    address: str
    channel: str
    chat_id: str
    text: str
    # The inbox message it answers (None: Pam wrote first).
    inbox_id: int | None = None
    # The /progress chart sent with this text as its caption, if any.
    chart_id: int | None = None
    # A spoken reply (a voice clip) to send as a voice message.
    voice_id: int | None = None
    # A part to speak (its text is the words), not sent until it is spoken.
    speak: bool = False
    # Buttons under the text: (label, command) each; a tap says the command.
    buttons: tuple[tuple[str, str], ...] = ()
    # A check-in (Pam wrote first), and whether it goes through the approved template
    # (outside WhatsApp's 24-hour window).
    checkin: bool = False
    template: bool = False
    # A check-in's deadline: from then on it is not sent (None: none, as for every reply).
    send_before: datetime | None = None


# A button as the outbox keeps it: its label and the command a tap says.
ButtonPair = tuple[str, str]


def buttons_json(buttons: Sequence[ButtonPair]) -> str | None:
    """`buttons` as the outbox's `buttons` column keeps them: [[label, command], ...]; None
    for none."""
    if not buttons:
        return None
    return json.dumps([[label, command] for label, command in buttons], ensure_ascii=False)


def buttons_from_json(text: str | None) -> tuple[ButtonPair, ...]:
    """The buttons the outbox kept, leniently: what is not a [label, command] pair of strings
    is left out (the column is Pam's own, but a row is data, not code)."""
    if not text:
        return ()
    try:
        rows = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(rows, list):
        return ()
    return tuple(
        (row[0], row[1])
        for row in rows
        if isinstance(row, list) and len(row) == 2 and all(isinstance(v, str) for v in row)
    )


def held(model: Any) -> Any:
    """The item's row as long as the claim in the parameters `item_id` and `held_token` still
    holds it."""
    return and_(
        model.id == bindparam("item_id"),
        model.claim_token == bindparam("held_token"),
        model.status == CLAIMED,
    )


def held_params(lease: Lease) -> dict[str, Any]:
    """The parameters of `held` for `lease`."""
    return {"item_id": lease.id, "held_token": lease.token}


def unlinked_if_forgotten(model: Any, *nullable: str) -> dict[str, Any]:
    """SET values for finishing an item: one whose learner was forgotten (the /forget itself,
    its confirmation) keeps nothing that names them — its address and chat emptied, the
    `nullable` columns that name them too (a display name) set to NULL; its platform id still
    recognises a redelivery."""
    known = exists().where(Learner.external_id == model.address)
    values = {
        "address": case((known, model.address), else_=""),
        "chat_id": case((known, model.chat_id), else_=""),
    }
    return values | {name: case((known, getattr(model, name)), else_=None) for name in nullable}


def unspoken(item: Any) -> Any:
    """An outbox part to speak whose speech is not made yet: it holds no newer reply back."""
    return and_(item.speak, item.voice_id.is_(None))


# -- admission: storing an inbound message, or the note that one was turned away --------------

# The inbox columns an inbound message sets, each from the parameter `in_<column>`.
INBOUND = (
    *("channel", "platform_id", "address", "chat_id", "display_name", "text", "kind", "voice"),
    "language_hint",
)


def _admitted(where: Any) -> Any:
    """The INSERT of one inbound message (parameters `in_<column>` and `now`) if `where`
    holds as it runs: one statement, so that on SQLite it takes the write lock before it
    reads (a read that then writes can fail at once with "database is locked")."""
    now = bindparam("now", type_=UTCDateTime())
    values = [bindparam(f"in_{name}", type_=InboxItem.__table__.c[name].type) for name in INBOUND]
    row = select(*values, now, now, literal(PENDING), literal(0)).where(where)
    columns = [*INBOUND, "received_at", "available_at", "status", "attempts"]
    return insert(InboxItem).from_select(columns, row, include_defaults=False)


def _waiting(address: Any, *also: Any) -> Any:
    """The unfinished inbox items of `address` (and `also`)."""
    return and_(InboxItem.address == address, unfinished(InboxItem), *also)


_IN_ADDRESS = bindparam("in_address", type_=InboxItem.__table__.c["address"].type)
# The message, unless its address has `max_queued` unfinished items already (read through
# the partial index over (address, id), at most that many).
_FEW_WAITING = select(func.count()).select_from(
    select(InboxItem.id).where(_waiting(_IN_ADDRESS)).limit(bindparam("max_queued")).subquery()
).scalar_subquery() < bindparam("max_queued")
ADMIT = _admitted(_FEW_WAITING)
# The note that the address's messages were turned away (its parameters are the turned-away
# message's but `in_kind` and `in_text`), unless one is waiting already: at most one a time.
NOTE_TURNED_AWAY = _admitted(~exists().where(_waiting(_IN_ADDRESS, InboxItem.kind == TURNED_AWAY)))


# The message, whatever its address has waiting.
ACCEPT = _admitted(true())


class Accepting(NamedTuple):
    """A backend's statements for storing an inbound message (`Backend.accept`), each
    `ACCEPT`, `ADMIT` or `NOTE_TURNED_AWAY` as the database runs it, returning a row if it
    inserted one (with `admission_values`' parameters)."""

    accept: Any
    admit: Any
    note: Any


def admission_values(row: dict[str, Any], now: datetime, max_queued: int) -> dict[str, Any]:
    """The parameters of `ADMIT` for the inbound `row` (the columns it sets)."""
    return {f"in_{name}": row[name] for name in INBOUND} | {"now": now, "max_queued": max_queued}


def turned_away_values(values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of `NOTE_TURNED_AWAY`, from those of `ADMIT`: nothing of the message
    itself is kept (its platform id still recognises a redelivery)."""
    return values | {"in_kind": TURNED_AWAY, "in_text": "", "in_voice": None}


def claimable(model: Any, now: Any) -> Any:
    """Items a claim may take as of `now`: pending and available, or claimed under a lease
    that ran out (their worker died)."""
    return or_(
        and_(model.status == PENDING, model.available_at <= now),
        and_(model.status == CLAIMED, model.lease_expires_at < now),
    )


def any_unfinished(item: Any, *conditions: Any) -> Any:
    """Whether an unfinished `item` (a queue's model, or an alias of one) meets `conditions`:
    read through the partial index over the unfinished items in id order, stopping at the
    first. (As an EXISTS, Postgres planned a bitmap scan of every unfinished item: 5,001
    rows behind a burst of 10,000.)"""
    first = select(item.id).where(unfinished(item), *conditions).order_by(item.id).limit(1)
    return first.scalar_subquery().is_not(None)


# Whether an inbox message is waiting for a claim as of `now` (its parameter): pending and
# available (a message held back behind its learner's turn in flight counts: a look for it
# costs a claim that finds nothing, no more). A turn's write reads it with its claim's finish
# (`SavedReply.inbox_ready`), so that the lane looks for another message only when one is
# there: a message stored later wakes the lanes itself (on Postgres its NOTIFY; a SQLite
# `pam worker` has no wake-up and finds it at its next poll). A claim whose lease ran out
# (its worker died) is left to the polls: looking for one would read every claimed item on
# every write.
INBOX_READY = any_unfinished(
    InboxItem,
    InboxItem.status == PENDING,
    InboxItem.available_at <= bindparam("now", type_=UTCDateTime()),
)

# Finishing an inbox claim: the item marked answered, its text and language hint cleared (they
# live on in the conversation and the learner's native_guess, not in the queue), built once;
# the parameters are named apart from the columns.
FINISH = (
    update(InboxItem)
    .where(held(InboxItem))
    .values(
        status=bindparam("status_now"),
        text="",
        voice=None,
        language_hint=None,  # it lives on as the learner's native_guess
        claim_token=None,
        lease_expires_at=None,
        finished_at=bindparam("now", type_=UTCDateTime()),
        **unlinked_if_forgotten(InboxItem, "display_name"),
    )
)
QUEUE_REPLIES = insert(OutboxItem).returning(OutboxItem.id, sort_by_parameter_order=True)
# The columns every reply of one finish shares, and its timestamps.
SAME_FOR_EVERY_REPLY = ("channel", "address", "chat_id", "status", "claim_token", "attempts")
TIMES_OF_A_REPLY = ("lease_expires_at", "created_at", "available_at")


@dataclass(frozen=True)
class Finishing:
    """Finishing one inbox claim as of `now`, with `failed` if the message was given up. With
    `deliver_lease` the replies are queued already claimed by the caller for that long, so it
    can send them at once instead of handing them to a delivery lane (not when an older reply
    to the address was still undelivered at the claim: replies go out in order). `chart_id`:
    a /progress chart, queued with the first reply (its caption); `speak`: the last reply is
    the words of the reply's spoken copy (the writer adds it after the texts), a part to speak
    before it is sent; `buttons`: go under the last text (not the part to speak)."""

    claim: InboxClaim
    now: datetime
    failed: bool = False
    deliver_lease: timedelta | None = None
    chart_id: int | None = None
    speak: bool = False
    buttons: tuple[ButtonPair, ...] = ()

    @property
    def token(self) -> str | None:
        """The claim token the replies are queued under for the caller to send them at once
        (None: they go to the delivery lanes)."""
        held = self.deliver_lease is not None and not self.claim.replies_waiting
        return self._token if held else None

    @functools.cached_property
    def _token(self) -> str:
        return str(uuid.uuid4())

    def values(self, replies: Sequence[str]) -> dict[str, Any]:
        """The parameters of `FINISH` and of the statements that queue the replies with it."""
        now, token, lease = self.now, self.token, self.deliver_lease
        values = held_params(self.claim) | {
            "status_now": FAILED if self.failed else DONE,
            "now": now,
            "out_channel": self.claim.channel,
            "out_address": self.claim.address,
            "out_chat_id": self.claim.chat_id,
            "out_status": CLAIMED if token else PENDING,
            "out_claim_token": token,
            "out_attempts": 1 if token else 0,
            "out_lease_expires_at": now + lease if token and lease is not None else None,
            "out_created_at": now,
            "out_available_at": now,
            "out_chart_id": self.chart_id,
            "out_speak": self.speak,
            "out_last_seq": len(replies) - 1,
            "out_buttons": buttons_json(self.buttons),
            "out_buttons_seq": self.last_text(len(replies)),
        }
        return values | {"seqs": list(range(len(replies))), "texts": list(replies)}

    def run(self, connection: Connection, replies: Sequence[str]) -> list[int] | None:
        """Finish on `connection`, in the caller's transaction: `FINISH`, then the replies
        queued in one INSERT. The queued replies' ids in order; None if the claim was lost."""
        values = self.values(replies)
        if not connection.execute(FINISH, values).rowcount:
            return None
        rows = [
            {name: values[f"out_{name}"] for name in (*SAME_FOR_EVERY_REPLY, *TIMES_OF_A_REPLY)}
            | {"inbox_id": self.claim.id, "seq": seq, "text": text}
            | {"chart_id": self.chart_of(seq), "speak": self.speaks(seq, len(replies))}
            | {"buttons": values["out_buttons"] if seq == values["out_buttons_seq"] else None}
            for seq, text in enumerate(replies)
        ]
        return list(connection.execute(QUEUE_REPLIES, rows).scalars()) if rows else []

    def claims(self, replies: Sequence[str], ids: list[int] | None) -> list[OutboxClaim] | None:
        """The claims the caller holds on the queued replies, given their ids in order (None:
        the claim was lost); none if they went to the delivery lanes."""
        if ids is None:
            return None
        token = self.token
        if token is None:
            return []
        claim = self.claim
        return [
            OutboxClaim(
                id=id,
                token=token,
                attempts=1,
                address=claim.address,
                channel=claim.channel,
                chat_id=claim.chat_id,
                text=text,
                inbox_id=claim.id,
                chart_id=self.chart_of(seq),
                speak=self.speaks(seq, len(replies)),
                buttons=self.buttons if seq == self.last_text(len(replies)) else (),
            )
            for seq, (id, text) in enumerate(zip(ids, replies, strict=True))
        ]

    def chart_of(self, seq: int) -> int | None:
        """The chart queued with the reply at `seq`: the first one carries it."""
        return self.chart_id if seq == 0 else None

    def speaks(self, seq: int, replies: int) -> bool:
        """Whether the reply at `seq` of `replies` is a part to speak: the last, if any."""
        return self.speak and seq == replies - 1

    def last_text(self, replies: int) -> int:
        """The seq of the last text of `replies`, the one the buttons go under: the last
        reply, or the one before it when the last is the part to speak (-1: none)."""
        return replies - 1 - (1 if self.speak and replies > 1 else 0)
