"""The inbox: messages received from the channels, kept until a worker has answered them."""

from __future__ import annotations

import enum
import re
import string
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnClause,
    and_,
    exists,
    func,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.exc import IntegrityError

from memory.database.claims import (
    DONE,
    FAILED,
    UNFINISHED,
    Finishing,
    InboxClaim,
    OutboxClaim,
    unfinished,
    unspoken,
)
from memory.database.models import Learner
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LearnerInfo
from memory.database.statements import LEARNER_COLUMNS
from memory.messages import Inbound, VoiceNote
from memory.queue.base import Queue

_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_HINT_CHARS = 35  # inbox.language_hint: the longest tags are shorter


def _storable(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (no valid Python text from UTF-8
    holds one; JSON's escapes can)."""
    return _SURROGATE.sub("\ufffd", text)


def _storable_voice(voice: VoiceNote) -> VoiceNote:
    content_type = _storable(voice.content_type) if voice.content_type is not None else None
    return replace(
        voice, ref=_storable(voice.ref), content_type=content_type, source=_storable(voice.source)
    )


def _hint(hint: str | None) -> str | None:
    """A platform's language hint as the inbox keeps it: a language tag's characters only,
    within the column (a platform's field is no more trusted than a message)."""
    if not hint:
        return None
    kept = "".join(
        c for c in hint.strip()[:MAX_HINT_CHARS] if c.isascii() and (c.isalnum() or c in "-_")
    )
    return kept or None


class Admission(enum.Enum):
    """What became of an inbound message: stored, a redelivery, or turned away (its learner
    has too many waiting already)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    TURNED_AWAY = "turned away"


class Inbox(Queue[InboxClaim]):
    """Messages received from the channels, kept until a worker has answered them."""

    model = InboxItem

    def claimed_columns(self) -> list[Any]:
        """The message, and what the turn needs to know with it: whether an older reply to
        its address is still undelivered, and the learner the address belongs to."""
        # Named with its table: SQLite's RETURNING is rendered with bare column names, and a
        # bare `address` in the subquery would be the outbox's own.
        claimed_address: Any = literal_column(f"{InboxItem.__tablename__}.address")
        waiting = exists().where(
            OutboxItem.address == claimed_address,
            unfinished(OutboxItem),
            ~unspoken(OutboxItem),  # a slow spoken copy holds no newer reply back
        )
        learner = (
            select(column)
            .where(Learner.external_id == claimed_address)
            .scalar_subquery()
            .label(f"learner_{column.key}")
            for column in LEARNER_COLUMNS
        )
        return [
            *(InboxItem.address, InboxItem.channel, InboxItem.chat_id, InboxItem.text),
            *(InboxItem.display_name, InboxItem.received_at, InboxItem.kind, InboxItem.voice),
            InboxItem.language_hint,
            type_coerce(waiting, Boolean).label("replies_waiting"),  # SQLite says 0/1
            *learner,
        ]

    def claim_of(self, token: str, fields: dict[str, Any]) -> InboxClaim:
        """The inbox claim of `fields`, with the learner they name (if any) and the voice
        note read from its JSON."""
        learner = {column.key: fields.pop(f"learner_{column.key}") for column in LEARNER_COLUMNS}
        known = LearnerInfo(**learner) if learner["id"] is not None else None
        fields["voice"] = VoiceNote.from_json(fields["voice"])
        return InboxClaim(token=token, learner=known, **fields)

    def stored_at(self) -> Any:
        return InboxItem.received_at

    def prunable(self, cutoff: datetime) -> Any:
        """Messages answered or given up before `cutoff` with no reply still waiting to be
        delivered."""
        replies_waiting = exists().where(
            OutboxItem.inbox_id == InboxItem.id, OutboxItem.status.in_(UNFINISHED)
        )
        return and_(
            InboxItem.status.in_((DONE, FAILED)),
            func.coalesce(InboxItem.finished_at, InboxItem.received_at) < cutoff,
            ~replies_waiting,
        )

    def accept(self, message: Inbound) -> bool:
        """Persist an inbound message (and wake the workers, where the database can). False
        if this channel delivered it before."""
        return self.admit(message) is Admission.ACCEPTED

    def admit(self, message: Inbound, max_queued: int = 0) -> Admission:
        """Persist an inbound message (and wake the workers, where the database can), unless
        this channel delivered it before, or (with `max_queued`) its address has that many
        unfinished messages already: then, without storing anything of it, the note that
        messages were turned away is queued, if none is waiting (a worker answers it with
        one "slow down")."""
        # Postgres cannot store NUL in text; no learner means one, so it goes here, for every
        # channel at once. Neither database can store a lone surrogate (half of a UTF-16 pair,
        # legal in JSON as an escape): it becomes U+FFFD, in every field.
        display_name = message.display_name.replace("\x00", "") if message.display_name else None
        voice = message.voice
        row = {
            "channel": message.channel,
            "platform_id": _storable(message.platform_id),
            "address": _storable(message.address),
            "chat_id": _storable(message.chat_id),
            "display_name": _storable(display_name) if display_name else None,
            "text": _storable(message.text.replace("\x00", "")),
            "kind": message.kind,
            "voice": _storable_voice(voice).to_json() if voice is not None else None,
            "language_hint": _hint(message.language_hint),
        }
        try:
            stored = self.backend.accept(row, self.clock(), max_queued)
        except IntegrityError:
            return Admission.DUPLICATE
        return Admission.ACCEPTED if stored else Admission.TURNED_AWAY

    def complete(self, claim: InboxClaim, replies: Sequence[str], *, failed: bool = False) -> bool:
        """Mark the message answered and queue its replies for the delivery lanes, in one
        transaction. False (and nothing written) if the claim was lost meanwhile."""
        return self.finish(claim, replies, failed=failed) is not None

    def finish(
        self,
        claim: InboxClaim,
        replies: Sequence[str],
        *,
        failed: bool = False,
        deliver_lease: timedelta | None = None,
    ) -> list[OutboxClaim] | None:
        """Mark the message answered and queue its replies, atomically (on Postgres in one
        statement). The message text is cleared: it lives on in the conversation, not in the
        queue. None (and nothing written) if the claim was lost meanwhile.

        With `deliver_lease`, the replies are queued already claimed by the caller for that
        long, so it can send them at once instead of handing them to a delivery lane; their
        claims are returned. Not when an older reply to the same address was still undelivered
        at the claim: replies go out in order, so these wait behind it (and an empty list is
        returned). A caller that dies before sending leaves them to the delivery lanes once
        the lease ends."""
        finishing = Finishing(claim, self.clock(), failed=failed, deliver_lease=deliver_lease)
        return finishing.claims(replies, self.backend.finish(finishing, replies))


# The commands that ask the model (a tap's /translate and /explain, bot/turn/taps.py): the
# inbox lanes answer them like a message, so that the commands lane never waits on the model.
MODEL_COMMANDS = ("translate", "explain")
LETTERS: list[ColumnClause[Any]] = [
    literal_column(f"'{letter}'") for letter in string.ascii_letters
]


def is_command(item: Any) -> Any:
    """Whether the inbox `item` is a slash command typed as text (`/help`, `/forget@PamBot`),
    which is answered without a model: a slash and a letter, as every command begins (a
    subset of what bot/turn/commands.py parse_command takes for one), and none of
    MODEL_COMMANDS."""
    text = func.lower(item.text)
    return and_(
        item.kind == "text",
        item.text.like("/%"),
        # The letters written into the statement: as a bound tuple they would be an
        # "expanding" IN, rendered again on every claim (a fifth of an idle claim's CPU).
        func.substr(item.text, 2, 1).in_(LETTERS),
        *(~text.like(f"/{name}%") for name in MODEL_COMMANDS),
    )


class CommandInbox(Inbox):
    """The inbox as the commands lane claims it: slash commands only, so that they are
    answered while every other lane waits on the model. A learner's command still waits for
    their older messages (claims go in order per address)."""

    def takes(self, item: Any) -> Any:
        return is_command(item)
