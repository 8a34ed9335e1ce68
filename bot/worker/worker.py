"""`pam worker`: answers the durable inbox and delivers the outbox. A few inbox lanes and
delivery lanes (bot/worker/lanes.py: threads that drain their queue, then wait for a wake-up or the
next poll) run `Answering` (bot/worker/answering.py) and `Delivery` (bot/worker/delivery.py), and as
many speech lanes as delivery lanes speak replies after their text went out (bot/voice/speaking.py);
the memory jobs run in its memory process (bot/worker/memory_process.py). Each worker also prunes
finished queue items past the retention window (bot/worker/retention.py) and, on SQLite, clears what
/forget erased from the database's files once its confirmation is out (bot/worker/scrubbing.py). Any
number of workers share one database."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from apscheduler.schedulers.background import BackgroundScheduler

from bot.channels import Sender
from bot.checkins.rounds import CheckinRounds
from bot.voice.speaking import Voicing
from bot.worker.answering import Answering
from bot.worker.delivery import Delivery
from bot.worker.lanes import Lanes
from bot.worker.retention import Retention
from bot.worker.runtime import Pam, stop_scheduler
from bot.worker.scrubbing import Scrubbing
from memory.database.backends import backend_for
from memory.metric_snapshots import Snapshots, Snapshotter
from memory.queue.heartbeat import Heartbeats
from memory.queue.inbox import CommandInbox, Inbox
from memory.queue.outbox import Outbox, SpeechParts
from memory.wakeup import InboxListener

log = logging.getLogger(__name__)

# The speech lanes' poll: a part to speak is queued by this process's own turn, which wakes
# them; the poll only finds parts a dead worker left behind (once their lease ran out).
SPEECH_POLL_SECONDS = 2.0


class Worker:
    """Takes inbox messages, runs tutor turns, queues and delivers the replies."""

    def __init__(
        self,
        pam: Pam,
        senders: Mapping[str, Sender],
        checkins: CheckinRounds | None = None,
    ) -> None:
        settings = pam.settings
        self.pam = pam
        self.senders = dict(senders)
        self.inbox = Inbox(pam.engine, settings.service.inbox_lease_seconds, pam.clock)
        # What the commands lane claims: slash commands, which need no model.
        self.commands = CommandInbox(pam.engine, settings.service.inbox_lease_seconds, pam.clock)
        self.outbox = Outbox(pam.engine, settings.service.delivery_lease_seconds, pam.clock)
        self.poll_seconds = settings.service.poll_seconds
        self.retention = Retention(
            self.inbox,
            self.outbox,
            settings.service.queue_retention_hours,
            pam.clock,
            charts=pam.store.charts,
            clips=pam.store.voice_clips,
            chart_seconds=settings.charts.chart_link_seconds,
            history=pam.store.history,
            chat_days=settings.service.chat_retention_days,
        )
        # SQLite keeps erased rows in its files until a checkpoint: /forget's scrubs.
        self.scrubbing = None
        if backend_for(pam.engine).clears_files:
            self.scrubbing = Scrubbing(pam.store.scrubs)
        # Claims stay live while a turn or a send runs, however slow.
        leases = Heartbeats("pam-leases")
        self.delivery = Delivery(
            self.outbox,
            self.senders,
            settings.service.max_send_attempts,
            leases,
            hand_over=lambda: self.wake(deliveries_only=True),
            charts=pam.store.charts,
            clips=pam.store.voice_clips,
            links=pam.links,
            # A learner who blocked Pam gets no more check-ins, and operators see why.
            blocked=lambda address, channel: pam.store.checkins.disable(
                address, f"{channel}_blocked"
            ),
        )
        self.answering = Answering(
            self.inbox,
            pam.tutor,
            pam.writer,
            self.delivery,
            pam.after_sending,
            settings.service.max_turn_attempts,
            leases,
            pam.clock,
        )
        # Replies spoken after their text (None: no speech server, nothing to speak).
        self.voicing = None
        if pam.tutor.speaking.enabled:
            parts = SpeechParts(pam.engine, settings.service.delivery_lease_seconds, pam.clock)
            self.voicing = Voicing(
                parts,
                pam.tutor.speaking,
                pam.store.learners,
                leases,
                settings.service.max_send_attempts,
                hand_over=lambda: self.wake(deliveries_only=True),
            )
        self._inbox_lanes: Lanes | None = None
        self._command_lane: Lanes | None = None
        self._delivery_lanes: Lanes | None = None
        self._speech_lanes: Lanes | None = None
        self._listener: InboxListener | None = None
        self._metrics: Snapshotter | None = None
        # Check-ins (PAM_CHECKINS): a "check-ins due" job on APScheduler, every
        # PAM_CHECKINS_ROUND_SECONDS; the database keeps many workers' rounds apart.
        self.checkins = checkins
        self._checkin_scheduler: BackgroundScheduler | None = None

    def answer_next(self) -> bool:
        """Answer the next inbox message, if any. True if there was one."""
        return self.answering.next()

    def inbox_step(self) -> bool:
        """An inbox lane's step: answer the next message, if any. True if the lane should
        look again at once: another message may be ready (`Answering.take`)."""
        return bool(self.answering.take())

    def answer_command_next(self) -> bool:
        """Answer the next slash command whose learner has nothing older in flight, if any.
        True if there was one."""
        return self.answering.next(self.commands)

    def deliver_next(self) -> bool:
        """Deliver the next queued reply, if any. True if there was one."""
        return self.delivery.next()

    def speak_next(self) -> bool:
        """Speak the next reply waiting to be spoken, if any. True if there was one."""
        return self.voicing is not None and self.voicing.next()

    def drain(self) -> int:
        """Answer, deliver and speak until the queues are empty right now, then run the
        scrubs /forget left ready (tests, `pam serve`)."""
        done = 0
        while self.answer_next() or self.deliver_next() or self.speak_next():
            done += 1
        if self.scrubbing is not None:
            self.scrubbing.step()
        return done

    def start(self, inbox_lanes: int, delivery_lanes: int) -> None:
        """Start the lanes: threads that answer the inbox and deliver the outbox, and one
        more that answers commands alone, so that /help or /forget is answered while every
        inbox lane waits on a slow or hanging model."""
        self._inbox_lanes = Lanes("inbox", inbox_lanes, self.inbox_step, self.poll_seconds)
        self._command_lane = Lanes("commands", 1, self.answer_command_next, self.poll_seconds)
        self._delivery_lanes = Lanes(
            "delivery", delivery_lanes, self.deliver_next, self.poll_seconds
        )
        self._inbox_lanes.start()
        self._command_lane.start()
        self._delivery_lanes.start()
        if self.voicing is not None:
            poll = max(self.poll_seconds, SPEECH_POLL_SECONDS)
            self._speech_lanes = Lanes("speech", delivery_lanes, self.speak_next, poll)
            self._speech_lanes.start()
        self.retention.start()
        if self.scrubbing is not None:
            self.scrubbing.start()
        # This process's counts, copied to the database for the web app's /metrics.
        self._metrics = Snapshotter(Snapshots(self.pam.engine, self.pam.clock), "worker").start()
        if self.checkins is not None:
            self._checkin_scheduler = checkin_scheduler(self.checkins)
            self._checkin_scheduler.start()
        # Where the database can say so (Postgres), web processes notify new messages.
        self._listener = backend_for(self.pam.engine).inbox_listener(self.wake_inbox)
        if self._listener is not None:
            self._listener.start()

    def wake(self, deliveries_only: bool = False) -> None:
        """Run idle lanes now instead of at their next poll (new work arrived in-process)."""
        if self._delivery_lanes is not None:
            self._delivery_lanes.wake()
        if self._speech_lanes is not None:
            self._speech_lanes.wake()
        if self._inbox_lanes is not None and not deliveries_only:
            self._inbox_lanes.wake()
        if self._command_lane is not None and not deliveries_only:
            self._command_lane.wake()

    def wake_inbox(self) -> None:
        """Run one idle inbox lane now (one new message was stored): a burst of messages wakes
        one lane each, not every lane for every message. The commands lane is woken only
        when no idle inbox lane takes the wake-up (every one is inside a turn): an inbox lane
        answers a command as well, and the commands lane's claim of nothing cost every
        message a round trip (and 0.55 ms of CPU on Postgres). It still polls for commands
        a lane that woke for another message left waiting."""
        if self._inbox_lanes is not None and self._inbox_lanes.wake(1):
            return
        if self._command_lane is not None:
            self._command_lane.wake()

    def stop(self, wait_seconds: float = 0.0) -> bool:
        """Stop taking new work; lanes finish the item they hold. Waits up to `wait_seconds`
        for them; True if they all finished (a lane still inside a turn is left to end with
        the process: its claim lapses with its lease and the item is taken up again)."""
        self.retention.stop()
        if self.scrubbing is not None:
            self.scrubbing.stop()
        if self._checkin_scheduler is not None:
            stop_scheduler(self._checkin_scheduler)
        if self._listener is not None:
            self._listener.stop()
        deadline = time.monotonic() + wait_seconds
        stopped = all(
            lanes.stop(deadline)
            for lanes in (
                self._inbox_lanes,
                self._command_lane,
                self._delivery_lanes,
                self._speech_lanes,
            )
            if lanes is not None
        )
        # Pruning and scrubbing end after the round they may be in.
        scrubbed = self.scrubbing is None or self.scrubbing.join(deadline)
        return self.retention.join(deadline) and scrubbed and stopped

    def close_senders(self) -> None:
        """Close senders that hold connections or threads (after the lanes stopped), and copy
        this process's counts to the database a last time: the last turns' and, after Pam
        closed, the last memory jobs' (run on this process's threads with
        PAM_MEMORY_PROCESS=off)."""
        if self._metrics is not None:
            self._metrics.stop()
            self._metrics = None
        for sender in self.senders.values():
            close = getattr(sender, "close", None)
            if close is not None:
                close()


def checkin_scheduler(rounds: CheckinRounds) -> BackgroundScheduler:
    """APScheduler running `rounds.run_round` every PAM_CHECKINS_ROUND_SECONDS, one round at a
    time (a round still running when the next is due makes it wait, then run once)."""
    scheduler = BackgroundScheduler(
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone="UTC",
    )
    scheduler.add_job(
        _round(rounds),
        "interval",
        seconds=rounds.settings.round_seconds,
        id="checkins-due",
    )
    return scheduler


def _round(rounds: CheckinRounds) -> Callable[[], None]:
    def run() -> None:
        try:
            rounds.run_round()
        except Exception as exc:  # the database is away: the next round tries again
            log.warning("check-in round failed (%s); trying again later", type(exc).__name__)

    return run
