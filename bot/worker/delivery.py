"""Delivery: sending claimed replies through their channel's sender (a /progress chart with
its caption where the reply carries one, a spoken reply as a voice message), and what a
failed send becomes (a retry after a backoff, or a failure for good). A reply's part to speak
is not sent here until a speech lane has spoken it (bot/voice/speaking.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta

from bot.backoff import backoff
from bot.channels import (
    Button,
    ButtonSender,
    ChartSender,
    MediaLinks,
    PermanentSendError,
    RecipientBlocked,
    Sender,
    TemplateSender,
    TransientSendError,
    VoiceSender,
)
from bot.review.progress import drawn
from memory import metrics
from memory.database.claims import OutboxClaim, Standing
from memory.database.models_checkins import LATE
from memory.messages import Sent
from memory.queue.heartbeat import Heartbeats
from memory.queue.outbox import Outbox
from memory.store.charts import Charts
from memory.store.voice_clips import VoiceClips

log = logging.getLogger(__name__)


def ms_since(started: float) -> int:
    """Milliseconds since the `time.monotonic()` `started` (for the log lines)."""
    return int((time.monotonic() - started) * 1000)


class Delivery:
    """Sends the outbox's replies. `hand_over` wakes the delivery lanes for replies this
    caller did not send itself; `leases` keeps a claim alive while its send runs. A reply
    with a chart sends it from `charts`, a spoken reply from `clips`, each with its link from
    `links` (None: no links)."""

    def __init__(
        self,
        outbox: Outbox,
        senders: Mapping[str, Sender],
        max_attempts: int,
        leases: Heartbeats,
        hand_over: Callable[[], None],
        charts: Charts | None = None,
        links: MediaLinks | None = None,
        clips: VoiceClips | None = None,
        blocked: Callable[[str, str], object] | None = None,
    ) -> None:
        self.outbox = outbox
        self.senders = senders
        self.max_attempts = max_attempts
        self.leases = leases
        self.hand_over = hand_over
        self.charts = charts
        self.links = links
        self.clips = clips
        # Told the address and channel of a learner who blocked Pam (check-ins stop).
        self.blocked = blocked

    def next(self) -> bool:
        """Deliver the next queued reply, if any. True if there was one."""
        claim = self.outbox.claim_next()
        if claim is None:
            return False
        self.send(claim)
        return True

    def held(self, held: list[OutboxClaim], replies: int) -> None:
        """Deliver what finishing a turn handed this lane; replies queued behind an older
        one instead are the delivery lanes' to send. A part to speak is handed to the speech
        lanes once the texts before it are sent: the text never waits for its speech."""
        texts = [claim for claim in held if not claim.speak]
        if texts and texts[0].chart_id is not None:
            # A chart is drawn before it is sent, which takes a while: a delivery lane does
            # it, and this inbox lane goes back to answering messages.
            for claim in texts:
                self.outbox.unclaim(claim)
            self.hand_over()
        elif texts:
            self._send_in_order(texts)
        elif replies:
            self.hand_over()
        for claim in held:
            if claim.speak:
                self.outbox.unclaim(claim)
                self.hand_over()

    def _send_in_order(self, held: list[OutboxClaim]) -> None:
        """Send the replies this lane holds, in order, without a hop to a delivery lane. Once
        one is not delivered, the rest are handed to the delivery lanes, which keep the order."""
        for n, claim in enumerate(held):
            if not self.send(claim):
                for untried in held[n + 1 :]:
                    self.outbox.unclaim(untried)
                self.hand_over()
                return

    def send(self, claim: OutboxClaim) -> bool:
        """Send one claimed reply and record the outcome. True if it was delivered, or is
        done with unsent (dropped, or past its deadline): the replies after it go on."""
        if self._past_deadline(claim):
            self._late(claim)
            return True
        started = time.monotonic()
        sender = self.senders.get(claim.channel)
        try:
            if sender is None:
                raise TransientSendError(f"no sender is configured for channel {claim.channel!r}")
            key = f"pam-{claim.id}"
            # A slow platform keeps the claim alive: no other lane sends it meanwhile.
            lease = self.outbox.lease.total_seconds() / 3
            if claim.voice_id is not None and self.outbox.outdated(claim):
                self.outbox.drop(claim, "a newer reply went first")
                log.info("delivery outbox=%s dropped: a newer reply went first", claim.id)
                return True
            with self.leases.beat(lease, lambda: self.outbox.renew(claim)):
                send = self._sending(claim, sender, key)
                if isinstance(send, Standing):  # no longer this lane's to send
                    log.info("delivery outbox=%s dropped: %s", claim.id, send.value)
                    return True
                self.outbox.deliver(claim, send)
        except PermanentSendError as exc:
            self.outbox.fail(claim, str(exc))
            if isinstance(exc, RecipientBlocked) and self.blocked is not None:
                self.blocked(claim.address, claim.channel)
            metrics.DELIVERIES_FAILED.labels(claim.channel).inc()
            log.warning(
                "delivery failed for good outbox=%s channel=%s: %s", claim.id, claim.channel, exc
            )
            return False
        except TransientSendError as exc:
            self._retry(claim, str(exc), exc.retry_after)
            return False
        except Exception as exc:  # a sender bug must not stop the lane
            log.exception("delivery crashed outbox=%s channel=%s", claim.id, claim.channel)
            self._retry(claim, f"{type(exc).__name__}: {exc}", None)
            return False
        metrics.REPLIES_SENT.labels(claim.channel).inc()
        if claim.checkin:
            metrics.CHECKINS_SENT.inc()
        log.info(
            "reply delivered outbox=%s inbox=%s channel=%s send_ms=%d attempt=%d",
            claim.id,
            claim.inbox_id,
            claim.channel,
            ms_since(started),
            claim.attempts,
        )
        return True

    def _sending(
        self, claim: OutboxClaim, sender: Sender, key: str
    ) -> Callable[[], Sent] | Standing:
        """How to send `claim`: its text (with its buttons, where the channel shows them), or
        its chart with the text as caption. A chart gone by now (pruned) leaves the caption
        alone. Where it had to look up more first, the claim's standing if it is no longer
        held (its learner was forgotten meanwhile)."""
        if claim.voice_id is not None:
            return self._voice(claim, sender, key)
        if claim.template:  # a check-in outside the platform's free-form window
            if not isinstance(sender, TemplateSender):
                raise PermanentSendError(f"channel {claim.channel!r} has no check-in template")
            return lambda: sender.send_template(claim.chat_id, claim.text, idempotency_key=key)
        if claim.chart_id is None and claim.buttons and isinstance(sender, ButtonSender):
            buttons = [Button(label, command) for label, command in claim.buttons]
            return lambda: sender.send_buttons(
                claim.chat_id, claim.text, buttons, idempotency_key=key
            )
        if claim.chart_id is None or self.charts is None or not isinstance(sender, ChartSender):
            return lambda: sender.send(claim.chat_id, claim.text, idempotency_key=key)
        chart = self.charts.find(claim.chart_id)
        if chart is None:
            if (standing := self.outbox.standing(claim)) is not Standing.HELD:
                return standing
            log.warning("delivery outbox=%s: its chart is gone; sending the caption", claim.id)
            return lambda: sender.send(claim.chat_id, claim.text, idempotency_key=key)
        try:
            chart = drawn(self.charts, chart)  # under the claim's lease, however slow
        except Exception:
            # A chart that cannot be drawn now would not be on a retry either, and a retry
            # holds up every newer reply to the learner: the caption goes alone.
            log.exception("delivery outbox=%s: its chart could not be drawn", claim.id)
            chart = None
        # The learner may have been forgotten while it was drawn.
        if (standing := self.outbox.standing(claim)) is not Standing.HELD:
            return standing
        if chart is None:
            return lambda: sender.send(claim.chat_id, claim.text, idempotency_key=key)
        url = self.links.url(chart.id, chart.nonce) if self.links is not None else None
        return lambda: sender.send_chart(
            claim.chat_id, chart.png, url, claim.text, idempotency_key=key
        )

    def _voice(self, claim: OutboxClaim, sender: Sender, key: str) -> Callable[[], Sent] | Standing:
        """How to send a spoken reply: as a voice message. Its text went before it; a clip gone
        by now (pruned), or a channel that takes none, leaves nothing more to send; the claim's
        standing when it is no longer held (its learner was forgotten)."""
        clip = self.clips.find(claim.voice_id) if self.clips and claim.voice_id else None
        if clip is None or not isinstance(sender, VoiceSender):
            if (standing := self.outbox.standing(claim)) is not Standing.HELD:
                return standing
            log.warning("delivery outbox=%s: no voice to send; its text went alone", claim.id)
            return Sent
        url = self.links.voice_url(clip.id, clip.nonce) if self.links is not None else None
        return lambda: sender.send_voice(claim.chat_id, clip.audio, url, idempotency_key=key)

    def _past_deadline(self, claim: OutboxClaim, delay: float = 0.0) -> bool:
        """Whether the part, sent `delay` seconds from now, would go at or past its deadline
        (a check-in's `send_before`: the learner's quiet hours, WhatsApp's window)."""
        deadline = claim.send_before
        return deadline is not None and self.outbox.clock() + timedelta(seconds=delay) >= deadline

    def _late(self, claim: OutboxClaim) -> None:
        """End a part past its deadline unsent, its check-in skipped as late: it no longer
        holds the learner's newer replies back."""
        if not self.outbox.expire(claim, f"late: not sent before {claim.send_before}"):
            log.info("delivery outbox=%s late, but its claim was gone", claim.id)
            return
        if claim.checkin:
            metrics.CHECKINS_SKIPPED.labels(LATE).inc()
        log.info(
            "delivery outbox=%s channel=%s dropped: late, past its deadline %s attempt=%d",
            claim.id,
            claim.channel,
            claim.send_before,
            claim.attempts,
        )

    def _retry(self, claim: OutboxClaim, error: str, retry_after: float | None) -> None:
        """Try the reply again after a backoff, unless it has had all its attempts, or the
        retry would come past its deadline (then it ends now, late)."""
        if claim.attempts >= self.max_attempts:
            self.outbox.fail(claim, f"gave up after {claim.attempts} attempts: {error}")
            metrics.DELIVERIES_FAILED.labels(claim.channel).inc()
            log.warning("delivery gave up outbox=%s channel=%s", claim.id, claim.channel)
            return
        delay = backoff(claim.attempts, retry_after)
        if self._past_deadline(claim, delay):
            self._late(claim)
            return
        self.outbox.retry_later(claim, delay, error)
        log.info(
            "delivery retry outbox=%s channel=%s in_s=%.1f attempt=%d",
            claim.id,
            claim.channel,
            delay,
            claim.attempts,
        )
