"""`pam worker`: answers the durable inbox and delivers the outbox. A few inbox lanes and
delivery lanes (threads that drain their queue, then wait for a wake-up or the next poll);
the memory jobs run in its memory process (bot/memory_process.py). Each worker also prunes
finished queue items past the retention window (bot/retention.py). Any number of workers
share one database."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from bot import phrases
from bot.channels import PermanentSendError, Sender, TransientSendError
from bot.retention import Retention
from bot.runtime import Pam
from bot.splitting import split_message
from bot.tutor import Answer, ModelUnavailable
from memory.heartbeat import Heartbeats
from memory.queue import Claim, Finishing, Inbox, Outbox
from memory.wakeup import InboxListener

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 300.0
# A turn whose LLM call fails (after the client's own retries) is tried again from the inbox
# with backoff; the learner gets an apology only when the last of these attempts fails too.
LLM_TURN_ATTEMPTS = 3
TYPING_EVERY_SECONDS = 4.0  # Telegram shows "typing…" for 5 s per call
# "typing…" is shown once a turn takes longer than this: a reply that is there sooner needs
# none, and each one is a Bot API call (they count against the bot's rate limits).
TYPING_AFTER_SECONDS = 0.5


def backoff(attempts: int, retry_after: float | None = None) -> float:
    """Seconds to wait before attempt `attempts + 1`: exponential with jitter, never less than
    what the platform asked for."""
    delay = min(MAX_BACKOFF_SECONDS, 2.0 ** max(0, attempts - 1)) * random.uniform(0.8, 1.2)
    return max(delay, retry_after or 0.0)


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def _parts(replies: list[str], sender: Sender | None) -> list[str]:
    """`replies` split to fit the channel's message limit (as the channel counts length)."""
    if sender is None:
        return replies
    return [
        part
        for reply in replies
        for part in split_message(reply, sender.max_chars, sender.length)
        if part.strip()
    ]


def _log_answered(claim: Claim, answer: Answer, replies: int, started: float) -> None:
    """The answered message's log line: ids, timings and counts, never the text."""
    since_received = (
        int((datetime.now(UTC) - claim.received_at).total_seconds() * 1000)
        if claim.received_at
        else -1
    )
    log.info(
        "inbound answered inbox=%s learner=%s channel=%s replies=%d since_received_ms=%d "
        "turn_ms=%d attempt=%d",
        claim.id,
        answer.learner_id or "-",
        claim.channel,
        replies,
        since_received,
        _ms(started),
        claim.attempts,
    )


class Worker:
    """Takes inbox messages, runs tutor turns, queues and delivers the replies."""

    def __init__(self, pam: Pam, senders: Mapping[str, Sender]) -> None:
        settings = pam.settings
        self.pam = pam
        self.senders = dict(senders)
        self.inbox = Inbox(pam.engine, settings.service.inbox_lease_seconds)
        self.outbox = Outbox(pam.engine, settings.service.delivery_lease_seconds)
        self.max_turn_attempts = settings.service.max_turn_attempts
        self.max_send_attempts = settings.service.max_send_attempts
        self.poll_seconds = settings.service.poll_seconds
        self.retention = Retention(self.inbox, self.outbox, settings.service.queue_retention_hours)
        self._inbox_lanes: Lanes | None = None
        self._delivery_lanes: Lanes | None = None
        self._listener: InboxListener | None = None
        self.typing_after = TYPING_AFTER_SECONDS
        # Claims stay live while a turn or a send runs, however slow; "typing…" is renewed
        # on a thread of its own, so a slow platform never holds up a lease.
        self._leases = Heartbeats("pam-leases")
        self._typing_beats = Heartbeats("pam-typing")

    # -- one step each ------------------------------------------------------------------

    def answer_next(self) -> bool:
        """Answer the next inbox message, if any. True if there was one."""
        claim = self.inbox.claim_next()
        if claim is None:
            return False
        started = time.monotonic()
        if claim.attempts > self.max_turn_attempts:
            self._give_up(claim)
            return True
        sender = self.senders.get(claim.channel)
        answer = self._turn(claim, sender)
        if answer is None:
            return True
        replies = _parts(answer.replies, sender)
        if answer.finished is not None:  # the turn finished the claim with its reply
            held = answer.finished.held
        else:
            held = self.inbox.finish(claim, replies, deliver_lease=self.outbox.lease)
        if held is None:
            log.warning("turn discarded inbox=%s: the claim was lost (lease expired)", claim.id)
            return True
        _log_answered(claim, answer, len(replies), started)
        self._delivered_or_queued(held, len(replies))
        self.pam.tutor.start_jobs(answer)  # after the reply: it never waits for them
        return True

    def _give_up(self, claim: Claim) -> None:
        """The message crashed its worker every time: stop retrying, tell the learner."""
        learner = claim.learner
        apology = phrases.apology(learner.target_language if learner else None)
        held = self.inbox.finish(claim, [apology], failed=True, deliver_lease=self.outbox.lease)
        log.warning("inbound gave up inbox=%s channel=%s", claim.id, claim.channel)
        if held is not None:
            self._delivered_or_queued(held, 1)

    def _turn(self, claim: Claim, sender: Sender | None) -> Answer | None:
        """Run the tutor turn for `claim`; None if it failed and went back to the inbox."""
        # A slow LLM keeps the claim alive; a dead worker's claim lapses within one lease.
        every = self.inbox.lease.total_seconds() / 3
        lease = self._leases.beat(every, lambda: self.inbox.renew(claim))
        try:
            with lease, self._typing(sender, claim):
                return self.pam.tutor.answer(
                    claim.address,
                    claim.text,
                    display_name=claim.display_name,
                    inbox_id=claim.id,
                    kind=claim.kind,
                    can_retry=claim.attempts < min(LLM_TURN_ATTEMPTS, self.max_turn_attempts),
                    known=claim.learner,
                    # The reply is stored and queued, and the claim finished, in one write.
                    finishing=Finishing(
                        claim,
                        split=lambda reply: _parts([reply], sender),
                        deliver_lease=self.outbox.lease,
                    ),
                )
        except ModelUnavailable as exc:
            delay = backoff(claim.attempts)
            self.inbox.retry_later(claim, delay, f"LLM unavailable: {exc}")
            log.warning(
                "turn deferred inbox=%s channel=%s: the LLM failed; retry_in=%.1fs attempt=%d",
                claim.id,
                claim.channel,
                delay,
                claim.attempts,
            )
        except Exception as exc:
            delay = backoff(claim.attempts)
            self.inbox.retry_later(claim, delay, f"{type(exc).__name__}: {exc}")
            log.exception(
                "turn failed inbox=%s channel=%s retry_in=%.1fs", claim.id, claim.channel, delay
            )
        return None

    def _delivered_or_queued(self, held: list[Claim], replies: int) -> None:
        """Deliver what `Inbox.finish` handed this lane; replies it queued behind an older one
        instead are the delivery lanes' to send."""
        if held:
            self._deliver_now(held)
        elif replies:
            self.wake(deliveries_only=True)

    def _deliver_now(self, held: list[Claim]) -> None:
        """Send the replies this lane holds, in order, without a hop to a delivery lane. Once
        one is not delivered, the rest are handed to the delivery lanes, which keep the order."""
        for n, claim in enumerate(held):
            if not self._deliver(claim):
                for untried in held[n + 1 :]:
                    self.outbox.unclaim(untried)
                self.wake(deliveries_only=True)
                return

    def _typing(
        self, sender: Sender | None, claim: Claim
    ) -> contextlib.AbstractContextManager[object]:
        """Show "typing…" on channels that have it, renewed while the turn runs."""
        typing = getattr(sender, "typing", None)
        # Media without words gets a canned note at once; a caption is a turn like any text.
        if typing is None or (claim.kind != "text" and not claim.text.strip()):
            return contextlib.nullcontext()

        def show() -> bool:
            with contextlib.suppress(Exception):  # a missing "typing…" never costs the reply
                typing(claim.chat_id)
            return True

        # On a thread of its own: the turn never waits for Telegram.
        return self._typing_beats.beat(TYPING_EVERY_SECONDS, show, first=self.typing_after)

    def deliver_next(self) -> bool:
        """Deliver the next queued reply, if any. True if there was one."""
        claim = self.outbox.claim_next()
        if claim is None:
            return False
        self._deliver(claim)
        return True

    def _deliver(self, claim: Claim) -> bool:
        """Send one claimed reply and record the outcome. True if it was delivered."""
        started = time.monotonic()
        sender = self.senders.get(claim.channel)
        try:
            if sender is None:
                raise TransientSendError(f"no sender is configured for channel {claim.channel!r}")
            key = f"pam-{claim.id}"
            # A slow platform keeps the claim alive: no other lane sends it meanwhile.
            lease = self.outbox.lease.total_seconds() / 3
            with self._leases.beat(lease, lambda: self.outbox.renew(claim)):
                self.outbox.deliver(
                    claim, lambda: sender.send(claim.chat_id, claim.text, idempotency_key=key)
                )
        except PermanentSendError as exc:
            self.outbox.fail(claim, str(exc))
            log.warning(
                "delivery failed for good outbox=%s channel=%s: %s", claim.id, claim.channel, exc
            )
            return False
        except TransientSendError as exc:
            self._retry_delivery(claim, str(exc), exc.retry_after)
            return False
        except Exception as exc:  # a sender bug must not stop the lane
            log.exception("delivery crashed outbox=%s channel=%s", claim.id, claim.channel)
            self._retry_delivery(claim, f"{type(exc).__name__}: {exc}", None)
            return False
        log.info(
            "reply delivered outbox=%s inbox=%s channel=%s send_ms=%d attempt=%d",
            claim.id,
            claim.inbox_id,
            claim.channel,
            _ms(started),
            claim.attempts,
        )
        return True

    def _retry_delivery(self, claim: Claim, error: str, retry_after: float | None) -> None:
        if claim.attempts >= self.max_send_attempts:
            self.outbox.fail(claim, f"gave up after {claim.attempts} attempts: {error}")
            log.warning("delivery gave up outbox=%s channel=%s", claim.id, claim.channel)
            return
        delay = backoff(claim.attempts, retry_after)
        self.outbox.retry_later(claim, delay, error)
        log.info(
            "delivery retry outbox=%s channel=%s in_s=%.1f attempt=%d",
            claim.id,
            claim.channel,
            delay,
            claim.attempts,
        )

    def drain(self) -> int:
        """Answer and deliver until both queues are empty right now (tests, `pam serve`)."""
        done = 0
        while self.answer_next() or self.deliver_next():
            done += 1
        return done

    # -- running: lanes on threads of their own ----------------------------------------

    def start(self, inbox_lanes: int, delivery_lanes: int) -> None:
        """Start the lanes: threads that answer the inbox and deliver the outbox."""
        self._inbox_lanes = Lanes("inbox", inbox_lanes, self.answer_next, self.poll_seconds)
        self._delivery_lanes = Lanes(
            "delivery", delivery_lanes, self.deliver_next, self.poll_seconds
        )
        self._inbox_lanes.start()
        self._delivery_lanes.start()
        self.retention.start()
        if self.pam.engine.dialect.name == "postgresql":  # web processes NOTIFY new messages
            self._listener = InboxListener(self.pam.engine, self.wake_inbox)
            self._listener.start()

    def wake(self, deliveries_only: bool = False) -> None:
        """Run idle lanes now instead of at their next poll (new work arrived in-process)."""
        if self._delivery_lanes is not None:
            self._delivery_lanes.wake()
        if self._inbox_lanes is not None and not deliveries_only:
            self._inbox_lanes.wake()

    def wake_inbox(self) -> None:
        """Run one idle inbox lane now (one new message was stored): a burst of messages wakes
        one lane each, not every lane for every message."""
        if self._inbox_lanes is not None:
            self._inbox_lanes.wake(1)

    def stop(self, wait_seconds: float = 0.0) -> bool:
        """Stop taking new work; lanes finish the item they hold. Waits up to `wait_seconds`
        for them; True if they all finished (a lane still inside a turn is left to end with
        the process: its claim lapses with its lease and the item is taken up again)."""
        self.retention.stop()
        if self._listener is not None:
            self._listener.stop()
        deadline = time.monotonic() + wait_seconds
        stopped = all(
            lanes.stop(deadline)
            for lanes in (self._inbox_lanes, self._delivery_lanes)
            if lanes is not None
        )
        # Pruning ends after the round it may be in.
        return self.retention.join(deadline) and stopped

    def close_senders(self) -> None:
        """Close senders that hold connections or threads (after the lanes stopped)."""
        for sender in self.senders.values():
            close = getattr(sender, "close", None)
            if close is not None:
                close()


class Lanes:
    """`count` threads running `step` until it finds no work, then waiting for a wake-up or
    the next poll. A wake-up that comes while every lane is busy is kept, so the next lane to
    finish looks again instead of waiting for the poll."""

    def __init__(
        self, name: str, count: int, step: Callable[[], bool], poll_seconds: float
    ) -> None:
        self.step = step
        self.poll_seconds = poll_seconds
        self._ready = threading.Condition()
        self._wakes = 0  # wake-ups not yet taken by a lane
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]

    def start(self) -> None:
        """Start every lane's thread."""
        for thread in self._threads:
            thread.start()

    def wake(self, lanes: int | None = None) -> None:
        """Have `lanes` idle lanes (default: all) look for work now."""
        count = len(self._threads) if lanes is None else min(lanes, len(self._threads))
        with self._ready:
            self._wakes = min(len(self._threads), self._wakes + count)
            self._ready.notify(count)

    def stop(self, deadline: float) -> bool:
        """Let each lane finish its item, then end; True if all ended by `deadline`."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        while not self._stopping:
            try:
                while not self._stopping and self.step():
                    pass
            except Exception:  # the database went away, say: log, and try again after a pause
                log.exception("lane %s failed; retrying", threading.current_thread().name)
            with self._ready:
                if not self._wakes and not self._stopping:
                    self._ready.wait(self.poll_seconds)
                self._wakes = max(0, self._wakes - 1)
