"""Answering: one inbox message taken from claim to reply, top to bottom. Claim it; make it
a `TurnRequest`; the tutor answers (a plain `Turn`); split the texts to fit the channel; one
write stores the reply, finishes the claim and queues the parts; send the parts this lane
holds; then the turn's after-send work (review grades, memory jobs)."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace
from typing import TypeGuard

from bot import phrases
from bot.backoff import backoff
from bot.channels import GroupChats, RepeatConfirms, Sender, VoiceFetcher, VoiceSender
from bot.i18n import native_of
from bot.turn.after_send import AfterSending
from bot.turn.storing import store_turn
from bot.turn.tutor import Tutor
from bot.turn.values import ModelUnavailable, Turn, TurnRequest
from bot.worker.delivery import Delivery, ms_since
from bot.worker.splitting import split_message
from memory import metrics
from memory.clock import Clock
from memory.database.claims import InboxClaim
from memory.queue.heartbeat import Heartbeats
from memory.queue.inbox import Inbox
from memory.turns import TurnWriter, Written

log = logging.getLogger(__name__)

# A turn whose LLM call fails (after the client's own retries) is tried again from the inbox
# with backoff; the learner gets an apology only when the last of these attempts fails too.
LLM_TURN_ATTEMPTS = 3
TYPING_EVERY_SECONDS = 4.0  # Telegram shows "typing…" for 5 s per call
# "typing…" is shown once a turn takes longer than this: a reply that is there sooner needs
# none, and each one is a Bot API call (they count against the bot's rate limits).
TYPING_AFTER_SECONDS = 0.5
# "typing…" calls run on this many threads, each turn's on one of them by its inbox id: one
# thread makes about 5 Bot API calls a second against a real network, and at 128 lanes a
# worker asks for tens.
TYPING_THREADS = 8


def parts_of(replies: list[str], sender: Sender | None) -> list[str]:
    """`replies` split to fit the channel's message limit (as the channel counts length)."""
    if sender is None:
        return replies
    return [
        part
        for reply in replies
        for part in split_message(reply, sender.max_chars, sender.length)
        if part.strip()
    ]


def _in_group(sender: Sender | None, claim: InboxClaim) -> TypeGuard[GroupChats]:
    """Whether `claim` was said in a group of `sender`'s channel (a chat others read)."""
    return isinstance(sender, GroupChats) and sender.in_group(claim.chat_id)


def _log_answered(
    claim: InboxClaim, turn: Turn, replies: int, started: float, clock: Clock
) -> None:
    """The answered message's log line: ids, timings and counts, never the text."""
    since_received = (
        int((clock() - claim.received_at).total_seconds() * 1000) if claim.received_at else -1
    )
    log.info(
        "inbound answered inbox=%s learner=%s channel=%s replies=%d since_received_ms=%d "
        "turn_ms=%d attempt=%d",
        claim.id,
        turn.learner_id or "-",
        claim.channel,
        replies,
        since_received,
        ms_since(started),
        claim.attempts,
    )


class Answering:
    """Takes inbox messages, runs tutor turns, stores them with `writer`, hands the replies
    to `delivery`, and then does each turn's after-send work with `after_sending`."""

    def __init__(
        self,
        inbox: Inbox,
        tutor: Tutor,
        writer: TurnWriter,
        delivery: Delivery,
        after_sending: AfterSending,
        max_turn_attempts: int,
        leases: Heartbeats,
        clock: Clock,
    ) -> None:
        self.inbox = inbox
        self.tutor = tutor
        self.writer = writer
        self.delivery = delivery
        self.after_sending = after_sending
        self.max_turn_attempts = max_turn_attempts
        self.clock = clock
        self.typing_after = TYPING_AFTER_SECONDS
        # Claims stay live while a turn runs, however slow; "typing…" is renewed on threads
        # of its own, so a slow platform never holds up a lease.
        self.leases = leases
        self._typing_beats = [Heartbeats(f"pam-typing-{n}") for n in range(TYPING_THREADS)]
        self._said_no_links = False

    def next(self, inbox: Inbox | None = None) -> bool:
        """Answer the next message of `inbox` (by default the whole inbox; the commands lane
        passes the commands' own), if any. True if there was one."""
        return self.take(inbox) is not None

    def take(self, inbox: Inbox | None = None) -> bool | None:
        """Answer the next message of `inbox`, as `next`; None if there was none, else
        whether another may be ready now: False only when the turn's write saw no message
        waiting for a claim (`INBOX_READY`). An inbox lane looks again at once only then
        (`Worker.inbox_step`); a message stored later wakes the lanes itself (a SQLite
        `pam worker` finds it at its next poll), and the lane's look for more after every
        turn was, at 15 messages a second, 1.0 of the 1.6 claims a message that found
        nothing. One stored while a Postgres write runs is missed by the write's snapshot,
        and its wake-up by a lane that found its learner's turn still in flight: it waits
        for the next poll (a quarter of a second at the default poll)."""
        claim = (inbox or self.inbox).claim_next()
        if claim is None:
            return None
        with metrics.turn_in_flight():
            return self._take(claim)

    def _take(self, claim: InboxClaim) -> bool:
        """Answer `claim`: the turn, its write, the send of what this lane holds, and the
        after-send work; a failure sends the message back to the inbox to be tried again.
        Whether another message may be ready now (`take`)."""
        started = time.monotonic()
        if claim.attempts > self.max_turn_attempts:
            self._give_up(claim)
            return True
        sender = self.delivery.senders.get(claim.channel)
        try:
            turn = self._answer(claim, sender)
            parts, written = self._write(claim, turn, sender)
        except ModelUnavailable as exc:
            self._defer(claim, exc)
            return True
        except Exception as exc:
            delay = backoff(claim.attempts)
            self.inbox.retry_later(claim, delay, f"{type(exc).__name__}: {exc}")
            log.exception(
                "turn failed inbox=%s channel=%s retry_in=%.1fs", claim.id, claim.channel, delay
            )
            return True
        if written.held is None:
            log.warning("turn discarded inbox=%s: the claim was lost (lease expired)", claim.id)
            return True
        _log_answered(claim, turn, len(parts), started, self.clock)
        metrics.TURN_SECONDS.labels(claim.channel).observe(time.monotonic() - started)
        self.delivery.held(written.held, len(parts))
        # After the reply, which never waits for it; with the jobs the write found due.
        self.after_sending.run(replace(turn, after_send=turn.after_send.and_written(written)))
        return written.inbox_ready

    def _write(
        self, claim: InboxClaim, turn: Turn, sender: Sender | None
    ) -> tuple[list[str], Written]:
        """Store `turn`'s reply, finish `claim` and queue the parts to send, in one write; the
        parts queued, and what the write handed back."""
        stored = store_turn(self.writer, claim, turn, lambda texts: parts_of(texts, sender))
        return stored.parts, stored.written

    def _give_up(self, claim: InboxClaim) -> None:
        """The message crashed its worker every time: stop retrying, tell the learner."""
        learner = claim.learner
        apology = phrases.apology(native_of(learner))
        written = self.writer.write(claim, [apology], failed=True)
        log.warning("inbound gave up inbox=%s channel=%s", claim.id, claim.channel)
        if written.held is not None:
            self.delivery.held(written.held, 1)

    def _answer(self, claim: InboxClaim, sender: Sender | None) -> Turn:
        """The tutor's answer to `claim`. Raises ModelUnavailable if the LLM failed and the
        message has attempts left."""
        # A slow LLM keeps the claim alive; a dead worker's claim lapses within one lease.
        every = self.inbox.lease.total_seconds() / 3
        lease = self.leases.beat(every, lambda: self.inbox.renew(claim))
        with lease, self._typing(sender, claim):
            return self.tutor.answer(self._request(claim, sender))

    def _request(self, claim: InboxClaim, sender: Sender | None) -> TurnRequest:
        """The turn `claim` asks for, with what its attempts and its channel allow."""
        return TurnRequest(
            claim.address,
            claim.text,
            display_name=claim.display_name,
            kind=claim.kind,
            voice=claim.voice,
            inbox_id=claim.id,
            learner=claim.learner,
            can_retry=claim.attempts < min(LLM_TURN_ATTEMPTS, self.max_turn_attempts),
            fetcher=sender if isinstance(sender, VoiceFetcher) else None,
            can_speak=self._can_speak(sender),
            group=sender if _in_group(sender, claim) else None,
            language_hint=claim.language_hint,
            repeat_confirms=isinstance(sender, RepeatConfirms) and sender.repeat_confirms,
        )

    def _can_speak(self, sender: Sender | None) -> bool:
        """Whether a spoken reply could reach the learner on `sender`'s channel: it takes
        voice, and has the link it fetches it from if it needs one (else no speech is paid
        for; said once)."""
        if not isinstance(sender, VoiceSender):
            return False
        links = self.delivery.links
        if sender.voice_by_link and (links is None or not links.public):
            if not self._said_no_links:
                self._said_no_links = True
                log.warning(
                    "spoken replies (/voice on) go out as text alone on a channel that fetches "
                    "them from a link: set PAM_PUBLIC_URL (the web app's public address)"
                )
            return False
        return True

    def _defer(self, claim: InboxClaim, exc: ModelUnavailable) -> None:
        """The LLM failed: the message goes back to the inbox, to be tried after a backoff
        (never before a server that timed out may be done with the request)."""
        delay = backoff(claim.attempts, exc.retry_after)
        self.inbox.retry_later(claim, delay, f"LLM unavailable: {exc}")
        log.warning(
            "turn deferred inbox=%s channel=%s: the LLM failed; retry_in=%.1fs attempt=%d",
            claim.id,
            claim.channel,
            delay,
            claim.attempts,
        )

    def _typing(
        self, sender: Sender | None, claim: InboxClaim
    ) -> contextlib.AbstractContextManager[object]:
        """Show "typing…" on channels that have it, renewed while the turn runs."""
        typing = getattr(sender, "typing", None)
        # Media without words gets a canned note at once; a caption is a turn like any text,
        # and a voice note one once it is transcribed.
        heard = claim.voice is not None and self.tutor.hearing.enabled
        canned = claim.kind != "text" and not claim.text.strip() and not heard
        if typing is None or canned:
            return contextlib.nullcontext()

        def show() -> bool:
            with contextlib.suppress(Exception):  # a missing "typing…" never costs the reply
                typing(claim.chat_id)
            return True

        # On a thread of its own, never waited for: the turn never waits for the platform.
        beats = self._typing_beats[claim.id % len(self._typing_beats)]
        return beats.beat(TYPING_EVERY_SECONDS, show, first=self.typing_after, wait_on_exit=False)
