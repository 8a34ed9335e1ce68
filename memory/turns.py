"""The end of a turn, written once: the reply with its usage and corrections, the grades it
leaves for the review job (and the ask for it), the memory backlog read to know which jobs are
due, the inbox claim finished and the reply's parts queued for delivery — in one transaction
(on Postgres one statement)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.exc import IntegrityError

from memory.clock import Clock
from memory.config import MemoryConfig
from memory.database.claims import ButtonPair, Finishing, InboxClaim, OutboxClaim
from memory.database.records import Backlog, LearnerGone, ReplyRecord
from memory.jobs.coordinator import FOLD, PROFILE, REVIEW
from memory.jobs.density import is_low_information
from memory.jobs.profile import profile_due
from memory.jobs.summary import fold_due
from memory.store.conversation import Conversation
from memory.store.message_store import Store

# How many unread learner messages a turn looks at to decide whether the profile is due; a
# profile that keeps failing leaves more, and counting them all would grow without bound.
PROFILE_COUNT_LIMIT = 200


@dataclass(frozen=True)
class Written:
    """What writing the end of a turn did."""

    # The outbox claims this lane holds to send now, in order; None: the inbox claim was lost
    # (its lease expired) and nothing was finished or queued.
    held: list[OutboxClaim] | None
    # The memory jobs due, from the backlog read in the same transaction.
    due: tuple[str, ...] = ()
    # The memory jobs the write asked for itself (the review job, when the reply left grades
    # for it): to start without another statement.
    marked: tuple[str, ...] = ()
    # Another worker stored a reply to this message first: its content. Nothing was finished;
    # the caller splits it and calls `TurnWriter.write(claim, parts)`.
    existing: str | None = None
    # Whether another inbox message was ready for a claim as the write ran (True where the
    # write did not look): a lane looks for more at once only then.
    inbox_ready: bool = True


def jobs_due(backlog: Backlog, config: MemoryConfig) -> tuple[str, ...]:
    """The memory jobs `backlog` calls for."""
    count, tokens, unread = backlog
    due: tuple[str, ...] = (FOLD,) if fold_due(count, tokens, config) else ()
    # Only messages that say something count toward the profile's cadence: "ok", "jaja" and
    # 👍 never cost a profile call on their own.
    if profile_due(sum(not is_low_information(t) for t in unread), config):
        due += (PROFILE,)
    return due


def due_now(conversation: Conversation, learner_id: int, config: MemoryConfig) -> tuple[str, ...]:
    """The memory jobs due for the learner as of now (a turn that stored no reply)."""
    return jobs_due(conversation.memory_backlog(learner_id, PROFILE_COUNT_LIMIT), config)


class TurnWriter:
    """Writes the end of every turn: `write`."""

    def __init__(
        self, store: Store, deliver_lease_seconds: float, config: MemoryConfig, clock: Clock
    ) -> None:
        # The store's own parts (and its backend): the writer keeps no engine of its own.
        self.conversation = store.conversation
        self.ledger = store.ledger
        self.backend = store.conversation.backend
        self.deliver_lease = timedelta(seconds=deliver_lease_seconds)
        self.config = config
        self.clock = clock

    def write(
        self,
        claim: InboxClaim | None,
        parts: Sequence[str],
        reply: ReplyRecord | None = None,
        *,
        failed: bool = False,
        chart_id: int | None = None,
        speech: str | None = None,
        buttons: Sequence[ButtonPair] = (),
    ) -> Written:
        """Store `reply` (if any) and finish `claim` (if any) with `parts` queued for delivery,
        the first ones held by the caller to send at once, in one transaction; `failed`: the
        message was given up; `chart_id`: a /progress chart queued with the first part;
        `speech`: the words of the reply's spoken copy, queued after the parts as a part to
        speak (a speech lane makes and sends it, after the texts); `buttons`: (label, command)
        pairs queued with the last text part. With no claim (the terminal) it only stores.
        Raises LearnerGone if the learner was forgotten meanwhile."""
        finishing = None
        if claim is not None:
            speak = bool(speech and parts)  # spoken after the texts, never without them
            finishing = Finishing(
                claim,
                self.clock(),
                failed,
                self.deliver_lease,
                chart_id,
                speak,
                tuple(buttons) if parts else (),
            )
            if speech and parts:
                parts = [*parts, speech]
        if reply is None:
            if finishing is None:
                return Written([])
            ids = self.backend.finish(finishing, parts)
            return Written(finishing.claims(parts, ids))
        finish = (finishing, parts) if finishing is not None else None
        try:
            saved = self.backend.save_reply(reply, PROFILE_COUNT_LIMIT, self.clock(), finish)
        except IntegrityError as exc:
            return self._duplicate(reply, exc)
        held = finishing.claims(parts, saved.ids) if finishing is not None else []
        marked = (REVIEW,) if reply.review is not None else ()
        due = jobs_due(saved.backlog, self.config)
        return Written(held, due, marked, inbox_ready=saved.inbox_ready)

    def _duplicate(self, reply: ReplyRecord, exc: IntegrityError) -> Written:
        """The reply could not be stored: another worker stored one to the message first (its
        content is returned, and only this call's usage recorded: the tokens were spent all
        the same), or the learner is gone."""
        existing = self.conversation.message_for(reply.learner_id, reply_to=reply.reply_to)
        if existing is None:
            raise LearnerGone(reply.learner_id) from exc
        model, input_tokens, output_tokens = reply.usage
        self.ledger.record_usage(reply.learner_id, model, "reply", input_tokens, output_tokens)
        return Written([], existing=existing.content)
