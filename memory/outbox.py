"""The outbox: replies waiting to be delivered, in order per address, and the record of what
was sent."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import bindparam, update
from sqlalchemy.exc import SQLAlchemyError

from memory.claims import FAILED, PENDING, SENT, Claim, held, held_params, unlinked_if_forgotten
from memory.messages import Sent
from memory.models import OutboxItem, UTCDateTime
from memory.queue import Queue

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


class Outbox(Queue):
    """Replies waiting to be delivered, in order per address."""

    model = OutboxItem

    def deliver(self, claim: Claim, send: Callable[[], Sent]) -> None:
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

    def _record_when_back(self, claim: Claim, sent: Sent) -> None:
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

    def mark_sent(self, claim: Claim, platform_message_id: str | None) -> bool:
        """Record a delivery; the text is cleared, since the learner has it now."""
        values = {"now": self.clock(), "platform_id": platform_message_id}
        with self.single.begin() as connection:  # one UPDATE
            return bool(connection.execute(_SENT, held_params(claim) | values).rowcount)

    def unclaim(self, claim: Claim) -> bool:
        """Hand a claimed reply that was never tried to the delivery lanes, as if it had never
        been claimed (its attempt is given back)."""
        return self._release(claim, status=PENDING, attempts=OutboxItem.attempts - 1)

    def fail(self, claim: Claim, error: str) -> bool:
        """Record a delivery that can never succeed; it is not retried."""
        return self._release(claim, finished=True, status=FAILED, text="", last_error=error[:300])

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
