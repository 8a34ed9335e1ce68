"""When a check-in is due, as plain functions of time: the learner's timezone (said, or guessed
from the hours they write at), the quiet hours, the hour they usually write at, the minute
that spreads thousands of learners over the hour, the back-off after unanswered check-ins,
and the next slot on a local day that has none yet. Local times go through zoneinfo, so a
check-in keeps its local hour on both sides of a daylight-saving change."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.timezones import clock_shift

# Fewer messages than this tell nothing of the hours a learner writes at.
MIN_MESSAGES = 5
# The local hour a learner's usual writing time is taken to be, to guess an unknown timezone
# from the hours (UTC) they write at: early evening, when most people chat.
USUAL_LOCAL_HOUR = 19
# Hours' rounding: times of day are whole minutes, as messages are read.
_EPSILON = 1e-6
# How many of a learner's latest messages place a check-in when their timezone is guessed
# from their hours: the latest, which follow their clocks after a daylight-saving change
# (the fixed offset guessed does not).
RECENT_TIMES = 10
# A slot missed by less than this (a worker restarting) is still taken the same day.
LATE_GRACE = timedelta(hours=1)
# How far ahead a plan looks for a free local day.
DAYS_AHEAD = 60
# A check-in is not written when the learner's quiet hours begin within this long: it is
# sent a little after it is written (the outbox, a retry).
SEND_MARGIN = timedelta(minutes=5)
# A check-in in the last hour before the quiet hours goes at most at this minute: a round
# that comes late or a slow model still leaves it time to go before they begin.
LAST_MINUTE_BEFORE_QUIET = 40


@dataclass(frozen=True)
class QuietHours:
    """Local hours with no check-in: from `start` (inclusive) to `end` (exclusive), across
    midnight when `start` > `end`; none when they are equal."""

    start: int
    end: int

    def quiet(self, hour: int) -> bool:
        """Whether the local `hour` is quiet."""
        if self.start == self.end:
            return False
        if self.start < self.end:
            return self.start <= hour < self.end
        return hour >= self.start or hour < self.end

    def widened(self, hours: int) -> QuietHours:
        """These quiet hours with `hours` more at each end (none stay none; a day left with
        no allowed hour is not made)."""
        if self.start == self.end or (self.end - self.start) % 24 + 2 * hours >= 24:
            return self
        return QuietHours((self.start - hours) % 24, (self.end + hours) % 24)

    def nearest_allowed(self, hour: int) -> int:
        """`hour`, or the allowed hour nearest to it (a quiet morning hour moves to the first
        allowed one, an evening hour to the last)."""
        if not self.quiet(hour):
            return hour
        allowed = [h for h in range(24) if not self.quiet(h)]
        if not allowed:
            return hour
        return min(allowed, key=lambda h: (min(abs(h - hour), 24 - abs(h - hour)), h))


def quiet_soon(quiet: QuietHours, moment: datetime, tz: ZoneInfo) -> bool:
    """Whether it is quiet hours for a learner in `tz` at `moment`, or will be within
    SEND_MARGIN (a check-in written then would reach them inside them)."""
    return any(quiet.quiet(t.astimezone(tz).hour) for t in (moment, moment + SEND_MARGIN))


def quiet_begins(quiet: QuietHours, moment: datetime, tz: ZoneInfo) -> datetime | None:
    """When the learner's next quiet hours begin, as of `moment` (UTC): the start of the first
    local hour from `moment` on that is quiet, as `quiet_soon` reads the hours (`moment` itself
    when it is quiet already); None when there are no quiet hours. A check-in written at
    `moment` is not sent from then on (its outbox part's `send_before`)."""
    if quiet.start == quiet.end:
        return None
    local = moment.astimezone(tz)
    if quiet.quiet(local.hour):
        return moment
    # The start of the local hour, in UTC, then each next one: an offset keeps its minutes
    # within an hour, and clocks change by whole hours.
    hour = moment.astimezone(UTC) - timedelta(
        minutes=local.minute, seconds=local.second, microseconds=local.microsecond
    )
    for _ in range(48):
        hour += timedelta(hours=1)
        if quiet.quiet(hour.astimezone(tz).hour):
            return hour
    return None


def slot_minute(hour: int, minute: int, quiet: QuietHours) -> int:
    """The minute of a check-in at the local `hour`: the learner's own `minute`, kept at most
    LAST_MINUTE_BEFORE_QUIET when the hour after it is quiet."""
    if quiet.quiet((hour + 1) % 24):
        return min(minute, LAST_MINUTE_BEFORE_QUIET)
    return minute


def median_hour(times: Sequence[datetime]) -> float | None:
    """The median hour of day (UTC, with minutes as a fraction) the `times` fall at, read on
    the clock's circle: 23:30 and 00:30 are an hour apart, so a learner who writes around
    midnight UTC has a median near it, not at noon. None with fewer than MIN_MESSAGES."""
    if len(times) < MIN_MESSAGES:
        return None
    hours = sorted(_utc_hour(t) for t in times)
    start = _day_start(hours)
    return (statistics.median((h - start) % 24 for h in hours) + start) % 24


def _day_start(hours: Sequence[float]) -> float:
    """The earliest of the sorted `hours` (UTC, with minutes as a fraction) on the learner's
    day: the circle is cut in the widest gap between two hours written at (their night)."""
    gaps = [(hours[(n + 1) % len(hours)] - hours[n]) % 24 for n in range(len(hours))]
    return hours[(gaps.index(max(gaps)) + 1) % len(hours)]


def zone_from_hours(times: Sequence[datetime]) -> str | None:
    """A timezone guessed from when a learner writes (UTC times): the fixed offset that puts
    the median hour they write at at USUAL_LOCAL_HOUR. None with fewer than MIN_MESSAGES."""
    median = median_hour(times)
    if median is None:
        return None
    offset = round((USUAL_LOCAL_HOUR - median + 12) % 24 - 12)
    # Etc/GMT's signs are POSIX's: Etc/GMT-2 is two hours ahead of UTC.
    return "Etc/UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"


@dataclass(frozen=True)
class Awake:
    """The times of day a learner whose timezone is guessed from their hours may get a
    check-in at, as their latest messages vouch: from `low` to `high` hours after `start`
    (a UTC hour of day); `written`: the hours after `start` they wrote at, sorted."""

    start: float
    written: tuple[float, ...]
    low: float
    high: float

    def holds(self, moment: datetime) -> bool:
        """Whether `moment`'s time of day is one (to the minute the learner wrote in)."""
        into = self._into(moment)
        return self.low - _EPSILON <= into <= self.high + _EPSILON

    def ends(self, moment: datetime) -> datetime:
        """When the stretch of vouched-for time `moment` falls in ends (UTC): the end of the
        minute the latest vouched-for time of day names. `moment` must be one (`holds`)."""
        left = max(self.high - self._into(moment), 0.0)
        return moment.replace(second=0, microsecond=0) + timedelta(hours=left, minutes=1)

    def _into(self, moment: datetime) -> float:
        """`moment`'s time of day as hours after `start` (a minute before it as negative)."""
        into = (_utc_hour(moment) - self.start) % 24
        return into - 24 if into > 24 - 1 / 60 else into


def awake_hours(times: Sequence[datetime], now: datetime) -> Awake | None:
    """When a learner whose timezone is guessed from their hours may get a check-in as of
    `now`, from their latest RECENT_TIMES messages (`times`, newest first). The guess is a
    fixed offset: it cannot follow their clocks, nor can Pam know which zone's clocks are
    theirs. So each message vouches for its time of day as far as no zone's clock has moved
    since it was written (`clock_shift`): one written before clocks went forward somewhere
    reads up to an hour later on today's clock, so it vouches only for an hour before its
    time; back, an hour after. A check-in may go from the earliest time so vouched for to
    the latest. None with fewer than MIN_MESSAGES (no zone is guessed yet), or when no time
    is left: none is safe until they write again."""
    recent = times[:RECENT_TIMES]
    if len(recent) < MIN_MESSAGES:
        return None
    hours = [_utc_hour(t) for t in recent]
    start = _day_start(sorted(hours))
    into = [(h - start) % 24 for h in hours]
    shifts = [clock_shift(t, now) for t in recent]
    low = min(i + shift.back for i, shift in zip(into, shifts, strict=True))
    high = max(i - shift.forward for i, shift in zip(into, shifts, strict=True))
    if high < low:
        return None
    return Awake(start, tuple(sorted(into)), low, high)


def guessed_time(
    times: Sequence[datetime], tz: ZoneInfo, quiet: QuietHours, learner_id: int, now: datetime
) -> tuple[int, int] | None:
    """The local hour and minute (in `tz`, the guessed zone) of a check-in to a learner whose
    timezone is guessed from `times` (newest first; a fixed offset that may be an hour or
    more off their clocks): a time of day they have written at lately, the first quarter of
    their latest times less a spread of up to 20 minutes (learners are not all due at once),
    kept within the hours `awake_hours` vouches for. So the check-in goes at a time they do
    write at however far the guess is off, and a change of their clocks since does not carry
    it into their night. None when no time is safe now, with fewer than MIN_MESSAGES (no
    zone is guessed yet: no hour of theirs is known to be outside their quiet hours), and
    when the time falls in the `quiet` hours of the guessed zone or too near them to be sent
    before they begin (a day it would only be skipped). The hours a learner writes at are
    taken to be hours they are awake: one who writes at night and does not say their zone
    may get one at night."""
    awake = awake_hours(times, now)
    if awake is None:
        return None
    # The first quarter of their hours, less a spread: most learners write in the evening,
    # whose late edge is the quiet hours'.
    into = awake.written[len(awake.written) // 4] - (learner_id * 37) % 20 / 60
    into = min(max(into, awake.low), awake.high)
    minutes = round(((awake.start + into) % 24) * 60) % (24 * 60)
    local = datetime(2000, 1, 1, minutes // 60, minutes % 60, tzinfo=UTC).astimezone(tz)
    local = local.replace(minute=slot_minute(local.hour, local.minute, quiet))
    if quiet.quiet(local.hour) or not awake.holds(local):
        return None
    return local.hour, local.minute


def _utc_hour(moment: datetime) -> float:
    """`moment`'s hour of day in UTC, with minutes as a fraction."""
    moment = moment.astimezone(UTC)
    return moment.hour + moment.minute / 60


def learned_hour(times: Iterable[datetime], tz: ZoneInfo, default: int, quiet: QuietHours) -> int:
    """The local hour the learner writes at most (the earliest of a tie), moved out of the quiet
    hours; `default` (moved likewise) with fewer than MIN_MESSAGES."""
    hours = [t.astimezone(tz).hour for t in times]
    if len(hours) < MIN_MESSAGES:
        return quiet.nearest_allowed(default)
    counts = Counter(hours)
    best = max(counts.values())
    return quiet.nearest_allowed(min(h for h, n in counts.items() if n == best))


def spread_minute(learner_id: int) -> int:
    """The minute of the hour the learner's check-ins go at: learners spread evenly over the
    hour, so that thousands with the same hour are not all due at once."""
    return (learner_id * 37) % 60


def local_day(moment: datetime, tz: ZoneInfo) -> str:
    """The learner's local day at `moment`, as the checkins table keeps it (YYYY-MM-DD)."""
    return moment.astimezone(tz).date().isoformat()


def at_local(day: date, hour: int, minute: int, tz: ZoneInfo) -> datetime:
    """`hour:minute` on the local `day`, in UTC. A time a spring-forward change skips is taken
    an hour later, as clocks show it; an ambiguous one (autumn) at its first occurrence."""
    moment = datetime.combine(day, time(hour, minute), tzinfo=tz)
    utc = moment.astimezone(UTC)
    if utc.astimezone(tz).replace(tzinfo=None) != moment.replace(tzinfo=None):
        # Skipped by the change: the wall clock jumped past it.
        return (moment + timedelta(hours=1)).astimezone(UTC)
    return utc


def next_slot(
    now: datetime,
    tz: ZoneInfo,
    hour: int,
    minute: int,
    *,
    not_before: datetime | None = None,
    taken: Iterable[str] = (),
    grace: timedelta = LATE_GRACE,
) -> tuple[datetime, str] | None:
    """The next check-in time at the local `hour:minute`, in UTC, and its local day: today's if
    it is still ahead (or missed by less than `grace`), else a later day's; never on a day
    in `taken`, never on a local day before `not_before`'s (a back-off counts days as the
    learner lives them, so a check-in keeps its hour). None when no day of the next
    DAYS_AHEAD is free (a back-off that long stops check-ins: see `stopped`)."""
    taken = set(taken)
    today = now.astimezone(tz).date()
    for ahead in range(DAYS_AHEAD):
        day = today + timedelta(days=ahead)
        if day.isoformat() in taken:
            continue
        due = at_local(day, hour, minute, tz)
        if due < now - grace:
            continue
        if not_before is not None and day < not_before.astimezone(tz).date():
            continue
        return max(due, now) if due < now else due, day.isoformat()
    return None


def backoff_until(
    last_sent_at: datetime | None, unanswered: int, backoff_days: float, max_unanswered: int
) -> datetime | None:
    """After `unanswered` check-ins in a row went unanswered, the next not before the last one
    plus `backoff_days`, doubled for each more (2, 4, 8… days). None: no wait (none, or
    stopped altogether: see `stopped`)."""
    if not unanswered or last_sent_at is None:
        return None
    if stopped(unanswered, max_unanswered, backoff_days):
        return None
    return last_sent_at + timedelta(days=_backoff_days(unanswered, backoff_days))


def _backoff_days(unanswered: int, backoff_days: float) -> float:
    """The days a back-off after `unanswered` unanswered check-ins lasts (the exponent kept
    small enough for a float: a count that high stopped check-ins long before)."""
    return backoff_days * float(2 ** min(max(unanswered - 1, 0), 64))


def stopped(unanswered: int, max_unanswered: int, backoff_days: float) -> bool:
    """Whether Pam stops writing first: `max_unanswered` check-ins in a row went unanswered
    (0: no such limit), or the back-off after them would outlast what a plan looks ahead
    (DAYS_AHEAD: with no limit, the doubling passes it after a few). The learner's next
    message starts them again."""
    if max_unanswered and unanswered >= max_unanswered:
        return True
    return bool(unanswered) and _backoff_days(unanswered, backoff_days) >= DAYS_AHEAD
