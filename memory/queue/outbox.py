"""The outbox: replies waiting to be delivered, in order per address, and the record of what
was sent. A reply's spoken copy is a part of its own, queued after its texts with the words to
speak: `SpeechParts` hands it to a speech lane, which speaks it and gives it back to delivery
(`spoken`), or drops it (`drop`) — when it failed, or when it is `outdated`: a newer reply to
the address was queued before it went out. Until it is spoken it holds no newer reply back."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, exists, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from memory.database.claims import (
    FAILED,
    PENDING,
    SENT,
    OutboxClaim,
    buttons_from_json,
    held,
    held_params,
    unlinked_if_forgotten,
    unspoken,
)
from memory.database.models import Learner, UTCDateTime
from memory.database.models_checkins import LATE, Checkin
from memory.database.models_queue import OutboxItem
from memory.database.statements import skip_never_sent
from memory.messages import Sent
from memory.queue.base import Queue

log = logging.getLogger(__name__)

# Recording a delivery, built once; the text is cleared, since the learner has it now.
_SENT = (
    update(OutboxItem)
    .where(held(OutboxItem))
    .values(
        status=SENT,
        text="",
        sent_at=bindparam("now", type_=UTCDateTime()),
        claim_token=None,
        lease_expires_at=None,
        platform_message_id=bindparam("platform_id"),
        **unlinked_if_forgotten(OutboxItem),
    )
)


class Outbox(Queue[OutboxClaim]):
    """Replies waiting to be delivered, in order per address; parts still to speak are passed
    over (`SpeechParts` takes them)."""

    model = OutboxItem

    def claimed_columns(self) -> list[Any]:
        """The part, and what goes with it."""
        return [
            *(OutboxItem.address, OutboxItem.channel, OutboxItem.chat_id, OutboxItem.text),
            *(OutboxItem.inbox_id, OutboxItem.chart_id, OutboxItem.voice_id, OutboxItem.speak),
            OutboxItem.buttons,
            *(OutboxItem.checkin, OutboxItem.template, OutboxItem.send_before),
        ]

    def claim_of(self, token: str, fields: dict[str, Any]) -> OutboxClaim:
        """The outbox claim of `fields`, its buttons read from their JSON."""
        buttons = buttons_from_json(fields.pop("buttons", None))
        return OutboxClaim(token=token, buttons=buttons, **fields)

    def stored_at(self) -> Any:
        return OutboxItem.created_at

    def prunable(self, cutoff: datetime) -> Any:
        """Parts sent, or failed for good (never one waiting for a retry), before `cutoff`."""
        return and_(
            OutboxItem.status.in_((SENT, FAILED)),
            func.coalesce(OutboxItem.sent_at, OutboxItem.created_at) < cutoff,
        )

    def takes(self, item: Any) -> Any:
        """Every unfinished reply but the parts still to speak."""
        return ~unspoken(item)

    def holds_back(self, older: Any) -> Any:
        """An older reply holds a newer one back unless it is a part still to speak: a slow
        speech server never keeps the learner's next reply waiting."""
        return ~unspoken(older)

    def outdated(self, claim: OutboxClaim) -> bool:
        """Whether a newer reply to the claim's address has been queued since (a spoken copy
        that would now arrive after it is dropped)."""
        newer = exists().where(OutboxItem.address == claim.address, OutboxItem.id > claim.id)
        with self.single.connect() as connection:
            return bool(connection.execute(select(newer)).scalar())

    def drop(self, claim: OutboxClaim, why: str) -> bool:
        """Give up a spoken copy that will not be sent (`why`); its text went before it."""
        return self._finish(claim, FAILED, f"not spoken: {why}")

    def deliver(self, claim: OutboxClaim, send: Callable[[], Sent]) -> None:
        """Send a claimed reply and record it as sent, in one round trip after the send.
        Exceptions from `send` propagate with nothing recorded. The claim's lease keeps other
        workers off the row while it is sent (a send gives up long before a delivery lease
        ends). If the database fails after the platform accepted (a restart, a failover), the
        delivery is recorded once the database is back, so it is not sent again."""
        sent = send()
        try:
            recorded = self.mark_sent(claim, sent.platform_id)
        except SQLAlchemyError:
            self._record_when_back(claim, sent)
            return
        if not recorded:  # /forget removed the row meanwhile, or the lease ran out mid-send
            log.warning("delivery outbox=%s sent, but its claim was gone", claim.id)

    def _record_when_back(self, claim: OutboxClaim, sent: Sent) -> None:
        """The platform has the reply but the database did not hear it: keep trying to record
        it while the claim can still be ours (a lease, and then some). Until then no other
        worker can take the row: its lease has not expired, or the database is down."""
        deadline = time.monotonic() + max(self.lease.total_seconds(), 1.0) * 2
        log.warning("delivery outbox=%s sent but not recorded; retrying the record", claim.id)
        while True:
            try:
                recorded = self.mark_sent(claim, sent.platform_id)
            except SQLAlchemyError:
                if time.monotonic() > deadline:
                    log.error(
                        "delivery outbox=%s sent but never recorded: it may go out twice",
                        claim.id,
                    )
                    return
                time.sleep(0.25)
                continue
            if recorded:
                log.info("delivery outbox=%s recorded after the outage", claim.id)
            # Not recorded: the failed COMMIT had landed after all, /forget removed the row,
            # or (after an outage longer than the lease) another worker took it over.
            return

    def mark_sent(self, claim: OutboxClaim, platform_message_id: str | None) -> bool:
        """Record a delivery; the text is cleared, since the learner has it now."""
        values = {"now": self.clock(), "platform_id": platform_message_id}
        with self.single.begin() as connection:  # one UPDATE
            return bool(connection.execute(_SENT, held_params(claim) | values).rowcount)

    def unclaim(self, claim: OutboxClaim) -> bool:
        """Hand a claimed reply that was never tried to the delivery lanes, as if it had never
        been claimed (its attempt is given back)."""
        return self._release(claim, status=PENDING, attempts=OutboxItem.attempts - 1)

    def fail(self, claim: OutboxClaim, error: str) -> bool:
        """Record a delivery that can never succeed; it is not retried."""
        return self._finish(claim, FAILED, error)

    def expire(self, claim: OutboxClaim, error: str) -> bool:
        """End a claimed part that is past its deadline (`send_before`) unsent: failed for
        good, its text cleared, and its check-in skipped as LATE, in one transaction; the
        learner's count of unanswered check-ins is given back the one it never got. Its
        address's newer replies go on. False when the claim was gone."""
        with self.engine.begin() as connection:
            if not self._release_on(connection, claim, **_finished(FAILED, error)):
                return False
            if claim.checkin:
                self._late_checkin(connection, claim)
        return True

    def _late_checkin(self, connection: Connection, claim: OutboxClaim) -> None:
        """Skip the check-in the part `claim` delivers as LATE (see `expire`)."""
        learner = select(Learner.id).where(Learner.external_id == claim.address)
        # By its learner first: the lookup goes through the UNIQUE (learner_id, local_day).
        row = connection.execute(
            select(Checkin.id, Checkin.learner_id).where(
                Checkin.learner_id == learner.scalar_subquery(), Checkin.outbox_id == claim.id
            )
        ).first()
        if row is not None:
            skip_never_sent(connection, row.id, row.learner_id, LATE)

    def _finish(self, claim: OutboxClaim, status: str, error: str) -> bool:
        """End the claim on a part that goes no further, its text cleared and nothing kept
        that names a forgotten learner."""
        return self._release(claim, **_finished(status, error))

    def failed_on_platform(self, channel: str, platform_message_id: str, error: str) -> bool:
        """Record that a reply the platform had accepted (and so is recorded as sent) failed
        there after all, as its status callback reports. True if such a reply is known."""
        with self.engine.begin() as connection:
            result = connection.execute(
                update(OutboxItem)
                .where(
                    OutboxItem.channel == channel,
                    OutboxItem.platform_message_id == platform_message_id,
                )
                .values(status=FAILED, last_error=error[:300])
            )
        return bool(result.rowcount)


class SpeechParts(Outbox):
    """The outbox's parts still to speak, claimed by the speech lanes in the order they were
    queued, each whatever its address's other replies are doing: speaking one never waits
    for, nor holds up, a delivery."""

    in_order = False

    def takes(self, item: Any) -> Any:
        """Only the parts still to speak."""
        return unspoken(item)

    def spoken(self, claim: OutboxClaim, voice_id: int) -> bool:
        """Hand a part, now spoken into the clip `voice_id`, to delivery: pending again, to be
        sent in its address's order after the texts before it, with its attempts for the
        send. False when the claim is gone (/forget removed the part meanwhile)."""
        return self._release(claim, status=PENDING, voice_id=voice_id, text="", attempts=0)


def _finished(status: str, error: str) -> dict[str, Any]:
    """What a part that goes no further is left with: `status`, its text cleared, `error`, and
    nothing kept that names a forgotten learner."""
    return {
        "status": status,
        "text": "",
        "last_error": error[:300],
        **unlinked_if_forgotten(OutboxItem),
    }
