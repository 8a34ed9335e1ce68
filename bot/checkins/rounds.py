"""Check-in rounds: what a worker's "check-ins due" job does each time it runs (and what a
simulation calls directly, on a clock of its own). A round marks the check-ins the learners
answered, plans the next check-in of each learner who wants one and has none planned, then
takes the due ones, one claim at a time, and decides each at the moment it goes: still
wanted, outside the quiet hours, the learner not chatting, within the channel's rules, within
the budgets, something worth saying. A check-in that passes is written as Pam's turn and
queued in the outbox (memory/store/checkins.py), in order with the learner's own replies;
every other is skipped with its reason. Every decision is the database's: any number of
workers run rounds at once, and each check-in is written once."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.checkins.compose import Composer, plan_edit
from bot.checkins.routes import Route, Routes
from bot.checkins.timing import (
    DAYS_AHEAD,
    LATE_GRACE,
    MIN_MESSAGES,
    Awake,
    QuietHours,
    awake_hours,
    backoff_until,
    guessed_time,
    learned_hour,
    local_day,
    next_slot,
    quiet_begins,
    quiet_soon,
    slot_minute,
    spread_minute,
    stopped,
    zone_from_hours,
)
from bot.settings import CheckinSettings
from bot.timezones import is_fixed_offset, readable, zone
from bot.turn.limits import Limits
from memory import metrics
from memory.clock import Clock
from memory.database.records import LearnerGone
from memory.jobs.plans import Plan
from memory.llm import LLMError
from memory.queue.heartbeat import Heartbeats
from memory.store.checkins import (
    ON,
    PROFILE_CHANGED,
    Activity,
    Candidate,
    CheckinClaim,
    CheckinPrefs,
    CheckinWrite,
)
from memory.store.message_store import Store
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

QUEUED = "queued"
# Why a check-in did not go (the skip reasons, and the label of pam_checkins_skipped_total).
OPTED_OUT = "opted_out"
UNANSWERED = "unanswered"
NO_CHANNEL = "no_channel"
QUIET_HOURS = "quiet_hours"
# For a timezone guessed from the hours: not (or no longer) a time of day the learner's
# messages vouch for (clocks changed somewhere since they wrote, or the round came late).
OUTSIDE_THEIR_HOURS = "outside_their_hours"
LEARNER_WRITING = "learner_writing"
RECENT_CHAT = "recent_chat"
NO_TEMPLATE = "no_template"
NOTHING_TO_SAY = "nothing_to_say"
MODEL_ERROR = "model_error"
CRASHED = "crashed"
LEARNER_WROTE = "learner_wrote"
BUDGETS = ("learner_budget", "service_budget")
# Writes of a check-in tried, at most, when a profile update comes between it and the plan
# it marks followed up.
MARK_ATTEMPTS = 3
# A check-in whose composing failed is tried again this much later, this many times in all.
RETRY_AFTER = timedelta(minutes=10)
MAX_ATTEMPTS = 3
# Learners read a page at a time while a round plans.
PLAN_BATCH = 2000
# A learner with no time safe for a check-in (a timezone guessed from too few messages, or
# clocks changed since they wrote) is looked at again this much later, not every round.
UNPLACED_FOR = timedelta(minutes=10)


@dataclass
class RoundReport:
    """What one round did: check-ins answered, planned, and each claimed one's outcome
    ("queued", or its skip reason)."""

    answered: int = 0
    planned: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Outlook:
    """A learner's next check-in as an operator asks for it: when (None: none), and why."""

    due_at: datetime | None
    local_day: str | None
    why: str
    details: dict[str, Any]


class CheckinRounds:
    """Plans, decides and writes check-ins for the learners in `store`, as `settings` say, with
    `composer`'s words, through `routes` (the channels' rules), within `limits`' budgets, by
    `clock`'s time."""

    def __init__(
        self,
        store: Store,
        composer: Composer,
        routes: Routes,
        settings: CheckinSettings,
        limits: Limits,
        counter: TokenCounter,
        clock: Clock,
    ) -> None:
        self.store = store
        self.checkins = store.checkins
        self.composer = composer
        self.routes = routes
        self.settings = settings
        self.limits = limits
        self.counter = counter
        self.clock = clock
        self.lease = timedelta(seconds=settings.lease_seconds)
        self.leases = Heartbeats("pam-checkin-leases")
        # Learners with no safe time, and when to look at them again (UNPLACED_FOR).
        self._unplaced: dict[int, datetime] = {}

    # -- a round -------------------------------------------------------------------------------

    def run_round(self) -> RoundReport:
        """One round: answered check-ins marked, new ones planned, the due ones decided (on up
        to `settings.threads` at once), until none is due or this minute's rate is reached."""
        report = RoundReport()
        report.answered = self.checkins.mark_answered()
        if report.answered:
            metrics.CHECKINS_ANSWERED.inc(report.answered)
        report.planned = self.plan()
        threads = self.settings.threads
        if threads <= 1:
            report.outcomes = self._drain()
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="pam-checkins") as pool:
                for outcomes in pool.map(lambda _: self._drain(), range(threads)):
                    report.outcomes += outcomes
        if report.planned or report.outcomes or report.answered:
            log.info(
                "checkins round answered=%d planned=%d %s",
                report.answered,
                report.planned,
                " ".join(f"{k}={v}" for k, v in sorted(report.outcomes.items())),
            )
        return report

    def _drain(self) -> Counter[str]:
        """Decide due check-ins until none is due or the rate is reached."""
        outcomes: Counter[str] = Counter()
        while not self._rate_reached():
            outcome = self.process_next()
            if outcome is None:
                break
            outcomes[outcome] += 1
        return outcomes

    def _rate_reached(self) -> bool:
        """Whether every worker together wrote `per_minute` check-ins in the last minute."""
        since = self.clock() - timedelta(minutes=1)
        return self.checkins.queued_since(since) >= self.settings.per_minute

    # -- planning ------------------------------------------------------------------------------

    def plan(self) -> int:
        """Plan the next check-in of each learner who wants one and has none planned: how
        many were planned."""
        planned, after = 0, 0
        stop_at = self.settings.max_unanswered  # those stopped are not read: none to plan
        now = self.clock()
        self._unplaced = {k: v for k, v in self._unplaced.items() if v > now}
        while batch := self.checkins.candidates(after, PLAN_BATCH, stop_at):
            for candidate in batch:
                try:
                    planned += self.plan_learner(candidate)
                except Exception:  # one learner's data must not stop the others' plans
                    log.exception("checkin plan failed learner=%s", candidate.prefs.learner_id)
            if len(batch) < PLAN_BATCH:  # the last page: no need to ask for an empty one
                break
            after = batch[-1].prefs.learner_id
        return planned

    def plan_learner(self, candidate: Candidate) -> bool:
        """Plan the candidate's next check-in; False when none is to be planned (they left
        too many unanswered, no channel takes one, or another worker planned it)."""
        prefs, now = candidate.prefs, self.clock()
        if self._stopped(prefs.unanswered):
            return False
        if self._unplaced.get(prefs.learner_id, now) > now:
            return False
        route = self.routes.route(candidate.address)
        if route is None:
            return False
        times = self.checkins.message_times(prefs.learner_id)
        tz_name = prefs.timezone
        if not prefs.timezone_stated:
            guess = route.timezone or zone_from_hours(times)
            if guess is not None and guess != tz_name:
                self.checkins.set_timezone(prefs.learner_id, guess, stated=False)
                tz_name = guess
        tz = zone(tz_name)
        guessed = _guessed_by_hours(prefs, route)
        time_of_day = _time_of_day(self.settings, times, tz, prefs.learner_id, guessed, now)
        if time_of_day is None:  # no time is safe yet: looked at again a little later
            self._unplaced[prefs.learner_id] = now + UNPLACED_FOR
            return False
        hour, minute = time_of_day
        # A slot missed is not taken late for a guessed timezone (an hour late could be the
        # learner's night).
        grace = timedelta(0) if guessed else LATE_GRACE
        if hour != prefs.preferred_hour:
            self.checkins.learned(prefs.learner_id, hour)
        yesterday = (now - timedelta(days=2)).date().isoformat()
        slot = next_slot(
            now,
            tz,
            hour,
            minute,
            not_before=self._not_before(prefs.last_sent_at, prefs.unanswered),
            taken=self.checkins.days_taken(prefs.learner_id, yesterday),
            grace=grace,
        )
        if slot is None:  # no free day ahead
            return False
        return self.checkins.schedule(prefs.learner_id, slot[1], slot[0])

    def _stopped(self, unanswered: int) -> bool:
        settings = self.settings
        return stopped(unanswered, settings.max_unanswered, settings.backoff_days)

    def _not_before(self, last_sent_at: datetime | None, unanswered: int) -> datetime | None:
        settings = self.settings
        return backoff_until(
            last_sent_at, unanswered, settings.backoff_days, settings.max_unanswered
        )

    # -- deciding and writing ------------------------------------------------------------------

    def process_next(self) -> str | None:
        """Take the check-in due first and decide it: "queued", or why it was skipped, or
        "lost" when its claim went (None: nothing was due)."""
        claim = self.checkins.claim_next(self.lease)
        if claim is None:
            return None
        try:
            outcome = self._decide(claim)
        except LearnerGone:  # forgotten as it was decided: its row went with them
            return "lost"
        except Exception:  # the database went away: the claim's lease runs out, it is retried
            log.exception("checkin crashed checkin=%s attempt=%d", claim.id, claim.attempts)
            if claim.attempts >= MAX_ATTEMPTS:  # not the database: it would crash again
                try:
                    return self._skip(claim, CRASHED)
                except Exception:
                    log.exception("checkin crashed checkin=%s: not skipped", claim.id)
            return "crashed"
        if outcome not in (QUEUED, "lost", "retry"):
            metrics.CHECKINS_SKIPPED.labels(outcome).inc()
        return outcome

    def _their_hours(self, learner_id: int, now: datetime) -> Awake | None:
        """For a learner whose timezone is guessed from their hours: the times of day their
        messages vouch for now (`awake_hours`), when `now` is one; None when it is not (the
        check-in was planned before clocks changed somewhere, or its round came late)."""
        awake = awake_hours(self.checkins.message_times(learner_id), now)
        return awake if awake is not None and awake.holds(now) else None

    def _skip(self, claim: CheckinClaim, reason: str) -> str:
        self.checkins.skip(claim, reason)
        log.info("checkin skipped checkin=%s reason=%s", claim.id, reason)
        return reason

    def _decide(self, claim: CheckinClaim) -> str:
        """Write the claimed check-in, or skip it with the first reason that holds now."""
        now = self.clock()
        prefs = self.checkins.prefs(claim.learner_id)
        if prefs.preference != ON:
            return self._skip(claim, OPTED_OUT)
        if prefs.disabled_reason is not None:
            return self._skip(claim, prefs.disabled_reason)
        if self._stopped(prefs.unanswered):
            return self._skip(claim, UNANSWERED)
        route = self.routes.route(claim.address)
        if route is None:
            return self._skip(claim, NO_CHANNEL)
        guessed = _guessed_by_hours(prefs, route)
        quiet = _quiet_hours(self.settings, guessed)
        tz = zone(prefs.timezone)
        if quiet_soon(quiet, now, tz):
            return self._skip(claim, QUIET_HOURS)
        awake = self._their_hours(claim.learner_id, now) if guessed else None
        if guessed and awake is None:
            return self._skip(claim, OUTSIDE_THEIR_HOURS)
        seen = self.checkins.activity(claim.learner_id, claim.address)
        if seen.waiting:
            return self._skip(claim, LEARNER_WRITING)
        last = seen.last_message_at
        recent = timedelta(hours=self.settings.recent_chat_hours)
        if last is not None and now - last < recent:
            return self._skip(claim, RECENT_CHAT)
        template = False
        if route.window is not None and not _within(route.window, seen.last_received_at, now):
            if not route.template:
                return self._skip(claim, NO_TEMPLATE)
            template = True
        limit = self.limits.passed_before(claim.learner_id)
        if limit in BUDGETS:
            return self._skip(claim, limit)
        # The model may take a while: the claim's lease is renewed meanwhile.
        renew_every = self.lease.total_seconds() / 3
        try:
            with self.leases.beat(renew_every, lambda: self.checkins.renew(claim, self.lease)):
                draft = self.composer.compose(claim.learner_id, now)
        except LLMError as exc:
            self.store.ledger.record_calls(claim.learner_id, "checkin", exc.billed)
            if claim.attempts >= MAX_ATTEMPTS:
                return self._skip(claim, MODEL_ERROR)
            self.checkins.retry_at(claim, self.clock() + RETRY_AFTER)
            log.info("checkin retry checkin=%s: %s", claim.id, type(exc).__name__)
            return "retry"
        if draft is None or not draft.text.strip():
            if draft is not None:
                self.store.ledger.record_calls(claim.learner_id, "checkin", draft.usage)
            return self._skip(claim, NOTHING_TO_SAY)
        if quiet_soon(quiet, self.clock(), tz):
            # The round came late or the model was slow: it is (nearly) quiet hours by now.
            self.store.ledger.record_calls(claim.learner_id, "checkin", draft.usage)
            return self._skip(claim, QUIET_HOURS)
        checkin = CheckinWrite(
            text=draft.text,
            tokens=self.counter.count_message(draft.text),
            channel=route.channel,
            chat_id=route.chat_id,
            template=template,
            follows_up=draft.follows_up,
            topic=draft.topic,
            usage=draft.usage,
            send_before=_send_before(
                route, template, seen, _quiet_at(quiet, tz, awake, self.clock())
            ),
        )
        try:
            written = self._write(claim, seen, checkin, draft.plan)
        except LearnerGone:  # forgotten: their usage went with them
            raise
        except Exception:  # the write never happened: its tokens are spent all the same
            with contextlib.suppress(Exception):
                self.store.ledger.record_calls(claim.learner_id, "checkin", draft.usage)
            raise
        if written is None:
            log.info("checkin dropped checkin=%s: its claim is gone", claim.id)
            return "lost"
        if written != QUEUED:  # the learner wrote meanwhile: their reply goes, no check-in
            log.info("checkin skipped checkin=%s reason=%s", claim.id, LEARNER_WROTE)
            return LEARNER_WROTE
        log.info(
            "checkin queued checkin=%s learner=%s template=%s follows_up=%s",
            claim.id,
            claim.learner_id,
            template,
            draft.follows_up,
        )
        return QUEUED

    def _write(
        self, claim: CheckinClaim, seen: Activity, checkin: CheckinWrite, plan: Plan | None
    ) -> str | None:
        """Write the check-in (memory/store/checkins.py `write`), with the plan it follows up
        marked followed up in the same transaction: made again over a profile updated
        meanwhile, up to MARK_ATTEMPTS times, then written without the mark."""
        if plan is not None:
            day = date.fromisoformat(claim.local_day)
            for _ in range(MARK_ATTEMPTS):
                edit = plan_edit(self.store, claim.learner_id, plan, day)
                written = self.checkins.write(claim, seen, replace(checkin, profile=edit))
                if written != PROFILE_CHANGED:
                    return written
            log.warning("checkin=%s: the plan's mark lost %d races", claim.id, MARK_ATTEMPTS)
        return self.checkins.write(claim, seen, checkin)

    # -- for operators -------------------------------------------------------------------------

    def outlook(self, learner_id: int, address: str, enabled: bool) -> Outlook:
        """The learner's next check-in and why, or why none (`enabled`: PAM_CHECKINS)."""
        return outlook(
            self.store, self.routes, self.settings, self.clock(), learner_id, address, enabled
        )


def _guessed_by_hours(prefs: CheckinPrefs, route: Route | None) -> bool:
    """Whether the learner's timezone is Pam's guess from the hours they write at: not stated,
    and not known from their channel (a WhatsApp number's country). Without the `route`,
    whether the zone kept is such a guess (a fixed offset)."""
    if prefs.timezone_stated:
        return False
    if route is None:
        return prefs.timezone is None or is_fixed_offset(prefs.timezone)
    return route.timezone is None


def _quiet_hours(settings: CheckinSettings, guessed: bool) -> QuietHours:
    """The quiet hours a learner's check-ins keep: the settings', an hour wider at each end
    for a timezone `guessed` from the hours they write at (a fixed offset, an hour off once
    their clocks change)."""
    quiet = QuietHours(settings.quiet_start, settings.quiet_end)
    return quiet.widened(1) if guessed else quiet


def _time_of_day(
    settings: CheckinSettings,
    times: list[datetime],
    tz: ZoneInfo,
    learner_id: int,
    guessed: bool,
    now: datetime,
) -> tuple[int, int] | None:
    """The local hour and minute a learner's check-ins go at, out of their quiet hours: the
    hour they usually write at, or for a timezone `guessed` from their hours (which may be an
    hour or more off) a time of day they write at, None while none is safe or no zone is
    guessed yet (`guessed_time`)."""
    quiet = _quiet_hours(settings, guessed)
    if guessed:
        return guessed_time(times, tz, quiet, learner_id, now)
    hour = learned_hour(times, tz, settings.default_hour, quiet)
    return hour, slot_minute(hour, spread_minute(learner_id), quiet)


def _within(window: timedelta, received_at: datetime | None, now: datetime) -> bool:
    """Whether `now` is within a platform's free-form `window` of the learner's last message:
    measured from when it reached the inbox (not when its turn ran, later), and never when
    none is kept (none came within the queue's retention, at least the 24 hours of WhatsApp's
    window)."""
    return received_at is not None and now - received_at < window


def _quiet_at(
    quiet: QuietHours, tz: ZoneInfo, awake: Awake | None, now: datetime
) -> datetime | None:
    """When the learner's quiet hours begin, as of `now`, as far as Pam can tell: in their
    timezone, and for one guessed from their hours, no later than the end of the times of
    day their messages vouch for (`awake`)."""
    begins = quiet_begins(quiet, now, tz)
    if awake is None:
        return begins
    return min(begins, awake.ends(now)) if begins is not None else awake.ends(now)


def _send_before(
    route: Route, template: bool, seen: Activity, quiet_at: datetime | None
) -> datetime | None:
    """A check-in's deadline, from which its outbox part is not sent (a retry, an outage):
    when the learner's next quiet hours begin (`quiet_at`), or for a free-form message within
    a platform's window, when that window closes after their last message reached Pam, the
    earlier; None for neither. A template has no window to close."""
    deadlines = [] if quiet_at is None else [quiet_at]
    window = route.window_closes or route.window
    if not template and window is not None and seen.last_received_at is not None:
        deadlines.append(seen.last_received_at + window)
    return min(deadlines, default=None)


def _guessed_from(timezone: str | None, stated: bool) -> str | None:
    """Where Pam's guess at a timezone came from: "hours" (the hours the learner writes at,
    a fixed offset) or "number" (their phone number's country); None when they stated it or
    there is none."""
    if stated or timezone is None:
        return None
    return "hours" if is_fixed_offset(timezone) else "number"


def outlook(
    store: Store,
    routes: Routes | None,
    settings: CheckinSettings,
    now: datetime,
    learner_id: int,
    address: str,
    enabled: bool,
) -> Outlook:
    """A learner's next check-in and why (or why none), as of `now`: planned already, or when
    the next round would plan it. `routes` None: the channels' rules are not known here."""
    prefs = store.checkins.prefs(learner_id)
    history = store.checkins.history(learner_id)
    details: dict[str, Any] = {
        "preference": prefs.preference,
        "preference_set_at": prefs.preference_set_at,
        # As a person reads it: a guess from the hours is a fixed offset, "UTC+01:00".
        "timezone": readable(prefs.timezone) if prefs.timezone else None,
        "timezone_stated": prefs.timezone_stated,
        "timezone_guessed_from": _guessed_from(prefs.timezone, prefs.timezone_stated),
        "preferred_hour": prefs.preferred_hour,
        "last_sent_at": prefs.last_sent_at,
        "unanswered": prefs.unanswered,
        "disabled_reason": prefs.disabled_reason,
        "recent": [
            {
                "local_day": row.local_day,
                "due_at": row.due_at,
                "state": row.state,
                "skip_reason": row.skip_reason,
                "template": row.template,
                "follows_up": row.follows_up,
                "topic": row.topic,
                "answered_at": row.answered_at,
            }
            for row in history
        ],
    }

    def none(why: str) -> Outlook:
        return Outlook(None, None, why, details)

    if not enabled:
        return none("check-ins are off for everyone (PAM_CHECKINS)")
    if prefs.preference is None:
        return none("the learner has not turned check-ins on (/checkins on)")
    if prefs.preference != ON:
        return none("the learner turned check-ins off")
    if prefs.disabled_reason is not None:
        return none(f"Pam stopped them: {prefs.disabled_reason}")
    if stopped(prefs.unanswered, settings.max_unanswered, settings.backoff_days):
        return none(
            f"{prefs.unanswered} check-ins in a row went unanswered: none until the learner "
            "writes again"
        )
    if routes is not None and routes.route(address) is None:
        return none("no check-in can go to this address (a group, or a channel without one)")
    for row in history:
        if row.state in ("scheduled", "claimed"):
            why = f"planned for {row.local_day} at the learner's hour"
            return Outlook(row.due_at, row.local_day, why, details)
    tz = zone(prefs.timezone)
    times = store.checkins.message_times(learner_id)
    route = routes.route(address) if routes is not None else None
    time_of_day = _time_of_day(
        settings, times, tz, learner_id, _guessed_by_hours(prefs, route), now
    )
    if time_of_day is None and len(times) < MIN_MESSAGES:
        return none(
            "the learner's timezone is not known yet (not said with /timezone, no WhatsApp "
            f"number's country, fewer than {MIN_MESSAGES} messages to guess it from the hours "
            "they write at): none until it is"
        )
    if time_of_day is None:
        return none(
            "the learner's timezone is guessed from the hours they write at, and clocks "
            "changed somewhere since they last wrote: none until they write again"
        )
    hour, minute = time_of_day
    not_before = backoff_until(
        prefs.last_sent_at, prefs.unanswered, settings.backoff_days, settings.max_unanswered
    )
    slot = next_slot(
        now,
        tz,
        hour,
        minute,
        not_before=not_before,
        taken={row.local_day for row in history},
    )
    if slot is None:
        return none(f"no free local day in the next {DAYS_AHEAD} days")
    due, day = slot
    why = f"to be planned at the next round: {hour:02d}h local ({local_day(due, tz)})"
    if not_before is not None:
        why += f", backing off after {prefs.unanswered} unanswered"
    return Outlook(due, day, why, details)
