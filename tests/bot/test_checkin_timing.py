"""When a check-in goes to a learner whose timezone Pam guessed from the hours they write at
(bot/checkins/timing.py): the hours read on the clock's circle, and the check-in's hour among
the times they did write at, clear of their quiet hours even when the guess is an hour off."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.checkins.timing import (
    DAYS_AHEAD,
    RECENT_TIMES,
    QuietHours,
    awake_hours,
    backoff_until,
    guessed_time,
    median_hour,
    next_slot,
    quiet_begins,
    quiet_soon,
    slot_minute,
    stopped,
    zone_from_hours,
)
from bot.timezones import clock_shift, zone

QUIET = QuietHours(21, 9)
DAY = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.fixture(autouse=True, scope="module")
def _clock_changes_known() -> None:
    """Work out the years' clock changes once (a quarter second each) before the property
    tests time their examples."""
    clock_shift(datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 12, 31, tzinfo=UTC))


def at(*hours_minutes: tuple[int, int]) -> list[datetime]:
    return [DAY + timedelta(days=n, hours=h, minutes=m) for n, (h, m) in enumerate(hours_minutes)]


def test_hours_around_midnight_utc_have_their_median_near_midnight() -> None:
    # A learner in São Paulo writing at 20:30–22:00 local writes at 23:30–01:00 UTC.
    times = at((23, 30), (0, 10), (0, 40), (23, 50), (1, 0))
    assert median_hour(times) == pytest.approx(10 / 60)
    # Its guess is three hours behind UTC, not a zone on the other side of the world.
    assert zone_from_hours(times) == "Etc/GMT+5"  # 19:00 local at the median, as assumed


@given(
    st.lists(st.tuples(st.integers(9, 20), st.integers(0, 59)), min_size=5, max_size=30),
    st.sampled_from(["America/Sao_Paulo", "Europe/Rome", "Asia/Kolkata", "Pacific/Auckland"]),
    st.integers(1, 10_000),
)
def test_a_guessed_zone_puts_the_checkin_among_hours_they_wrote_at(
    local: list[tuple[int, int]], name: str, learner_id: int
) -> None:
    tz = ZoneInfo(name)
    # Written between two clock changes (15 February, somewhere; 8 March, in the US).
    times = [
        datetime(2026, 2, 16 + n % 12, h, m, tzinfo=tz).astimezone(UTC)
        for n, (h, m) in enumerate(local)
    ]
    times.sort(reverse=True)
    guess = zone(zone_from_hours(times))
    slot = guessed_time(times, guess, QUIET, learner_id, DAY)
    assert slot is not None
    hour, minute = slot
    # As the rounds plan it for a guessed zone: a slot just missed is not taken late (with the
    # usual hour's grace, one missed at 23:59 UTC went at once, 21:00 in São Paulo).
    due, _ = next_slot(DAY, guess, hour, minute, grace=timedelta(0))
    # However far the guess is off (a half-hour zone's whole-hour guess too), the check-in
    # is at a time of day they write at: at most half an hour before their median time, and
    # never before the earliest they write at nor after the latest.
    really = due.astimezone(tz)
    recent = sorted((t.astimezone(tz).hour, t.astimezone(tz).minute) for t in times[:RECENT_TIMES])
    assert recent[0] <= (really.hour, really.minute) <= recent[-1], (recent, really)


# Clock changes of 2026 and a zone each: forward (spring in the north) and back (autumn in
# the north, April in the south).
CHANGES = [
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC), "forward"),
    ("Europe/Madrid", datetime(2026, 3, 29, 1, tzinfo=UTC), "forward"),
    ("Australia/Sydney", datetime(2026, 4, 4, 16, tzinfo=UTC), "back"),
    ("America/Santiago", datetime(2026, 4, 5, 3, tzinfo=UTC), "back"),
    ("Europe/London", datetime(2026, 10, 25, 1, tzinfo=UTC), "back"),
    ("Australia/Sydney", datetime(2026, 10, 3, 16, tzinfo=UTC), "forward"),
]


def test_the_clock_changes_of_every_zone_are_known() -> None:
    for _, moment, way in CHANGES:
        # Which way they went: a time of day written just before reads an hour later just
        # after (forward), or earlier (back).
        shift = clock_shift(moment - timedelta(minutes=30), moment + timedelta(hours=1))
        assert (shift.forward if way == "forward" else shift.back) == 1.0
    # A change and its undoing cancel out: a year on, no clock has moved.
    assert clock_shift(datetime(2026, 3, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC)) == (
        0.0,
        0.0,
    )
    # Both ways in spring: the north forward in March, the south back in April.
    assert clock_shift(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 10, tzinfo=UTC)) == (
        1.0,
        1.0,
    )
    # The Aleutians' (12:00 UTC) were the last of 8 March: none after it until 20 March.
    aleutians = datetime(2026, 3, 8, 12, tzinfo=UTC)
    assert clock_shift(aleutians - timedelta(minutes=30), aleutians + timedelta(hours=1)) == (
        1.0,
        0.0,
    )
    assert clock_shift(aleutians, datetime(2026, 3, 20, tzinfo=UTC)) == (0.0, 0.0)
    # Across the new year: last year's autumn changes count, none since.
    january = datetime(2026, 1, 5, tzinfo=UTC)
    assert clock_shift(datetime(2025, 10, 20, tzinfo=UTC), january) == (0.0, 1.0)
    assert clock_shift(datetime(2025, 11, 3, tzinfo=UTC), january) == (0.0, 0.0)


@given(
    st.lists(st.tuples(st.integers(9, 20), st.integers(0, 59)), min_size=5, max_size=12),
    st.lists(st.tuples(st.integers(9, 20), st.integers(0, 59)), max_size=4),
    st.sampled_from(CHANGES),
    st.integers(1, 10_000),
)
def test_a_clock_change_since_they_wrote_never_carries_a_checkin_into_their_night(
    before: list[tuple[int, int]],
    since: list[tuple[int, int]],
    change: tuple[str, datetime, str],
    learner_id: int,
) -> None:
    name, moment, _ = change
    tz = ZoneInfo(name)
    # They wrote (never in their quiet hours, 21:00 to 9:00) in the ten days before their
    # clocks changed, and maybe a few times on the day after; Pam plans two days after it.
    day_after = (moment + timedelta(days=1)).astimezone(tz).date()
    written = [
        (moment.astimezone(tz).date() - timedelta(days=1 + n % 10), h, m)
        for n, (h, m) in enumerate(before)
    ] + [(day_after, h, m) for h, m in since]
    times = [datetime.combine(d, time(h, m), tzinfo=tz).astimezone(UTC) for d, h, m in written]
    times = sorted(
        (t for t in times if t < moment or t > moment + timedelta(hours=3)), reverse=True
    )
    if len(times) < 5:
        return
    now = moment + timedelta(days=2)
    guess = zone(zone_from_hours(times))
    slot = guessed_time(times, guess, QUIET.widened(1), learner_id, now)
    if slot is None:  # nothing safe until they write again
        return
    due, _ = next_slot(now, guess, *slot, grace=timedelta(0))
    # Their clocks moved an hour: still a time they are awake at, whichever way they moved.
    assert not QUIET.quiet(due.astimezone(tz).hour), (times, due.astimezone(tz), slot)


def test_one_written_since_vouches_for_its_own_time_and_no_more() -> None:
    new_york = ZoneInfo("America/New_York")
    change = datetime(2026, 3, 8, 7, tzinfo=UTC)

    def evenings(first: int, days: int, minute: int) -> list[datetime]:
        return [
            datetime(2026, 3, first + n, 20, minute, tzinfo=new_york).astimezone(UTC)
            for n in range(days)
        ]

    # A learner in New York who writes at 20:30–20:50, before the change only: hours that
    # close together leave no safe time now (an hour later on the old clock is their night).
    before = sorted(evenings(1, 7, 30) + evenings(1, 1, 50), reverse=True)
    now = change + timedelta(days=2)
    guess = zone(zone_from_hours(before))
    assert awake_hours(before, now) is None
    assert guessed_time(before, guess, QUIET, 7, now) is None
    # Written since, at 20:10 on their new clock: from then to 20:50 (20:30 and 20:50 on the
    # old clock, less the hour it went forward) is safe.
    since = sorted(evenings(8, 2, 10) + before, reverse=True)
    awake = awake_hours(since, now)
    assert awake is not None and (awake.low, awake.high) == pytest.approx((0, 40 / 60))
    slot = guessed_time(since, guess, QUIET, 7, now)
    assert slot is not None
    due, _ = next_slot(now, guess, *slot, grace=timedelta(0))
    assert (20, 10) <= (due.astimezone(new_york).hour, due.astimezone(new_york).minute) <= (20, 50)
    # One message since, late in their evening, does not decide: a learner who wrote at
    # 19:10–19:55 before the change and once since at 21:40 gets one at about 20:10 now.
    earlier = [
        datetime(2026, 2, 20 + n, 19, 10 + 5 * n, tzinfo=new_york).astimezone(UTC) for n in range(8)
    ]
    late = sorted([datetime(2026, 3, 9, 21, 40, tzinfo=new_york).astimezone(UTC), *earlier])
    late.reverse()
    guess = zone(zone_from_hours(late))
    slot = guessed_time(late, guess, QUIET.widened(1), 7, now)
    assert slot is not None
    due, _ = next_slot(now, guess, *slot, grace=timedelta(0))
    assert time(20, 10) <= due.astimezone(new_york).time() <= time(20, 55)


def test_a_slot_missed_is_not_taken_late_without_grace() -> None:
    tz = ZoneInfo("Etc/GMT+3")
    now = datetime(2026, 3, 6, 0, 10, tzinfo=UTC)  # 21:10 on the 5th, there
    late, day = next_slot(now, tz, 20, 30)
    assert late == now and day == "2026-03-05"
    due, day = next_slot(now, tz, 20, 30, grace=timedelta(0))
    assert day == "2026-03-06" and due.astimezone(tz).hour == 20


def test_quiet_hours_widen_at_both_ends_but_never_swallow_the_day() -> None:
    assert QUIET.widened(1) == QuietHours(20, 10)
    assert QuietHours(0, 0).widened(1) == QuietHours(0, 0)  # none stay none
    assert QuietHours(1, 23).widened(1) == QuietHours(1, 23)  # no allowed hour would be left
    assert QuietHours(22, 6).widened(2) == QuietHours(20, 8)


def test_a_back_off_longer_than_a_plan_looks_ahead_stops_checkins() -> None:
    # With no limit on unanswered check-ins, the doubling (2, 4, 8, 16, 32, 64 days) passes
    # the DAYS_AHEAD a plan looks ahead: Pam stops, as after the limit, until they write.
    assert not stopped(5, 0, 2.0)
    assert stopped(6, 0, 2.0) and backoff_until(DAY, 6, 2.0, 0) is None
    assert stopped(1, 0, float(DAYS_AHEAD))
    assert stopped(10_000, 0, 2.0)  # no overflow however many
    # And a slot asked for past the horizon is none, not an error.
    far = DAY + timedelta(days=DAYS_AHEAD + 5)
    assert next_slot(DAY, ZoneInfo("Europe/Madrid"), 18, 0, not_before=far) is None


def test_the_last_hour_before_quiet_hours_leaves_room_before_them() -> None:
    # Spread over the whole hour elsewhere; in the hour before 21:00, at most at :40.
    assert slot_minute(18, 59, QUIET) == 59
    assert slot_minute(20, 59, QUIET) == 40 and slot_minute(20, 12, QUIET) == 12
    assert slot_minute(23, 59, QuietHours(0, 8)) == 40  # quiet from midnight
    madrid = ZoneInfo("Europe/Madrid")
    at_local = datetime(2026, 3, 20, 20, 54, tzinfo=madrid)
    assert not quiet_soon(QUIET, at_local.astimezone(UTC), madrid)
    # 20:56: the quiet hours begin before it would reach them.
    assert quiet_soon(QUIET, (at_local + timedelta(minutes=2)).astimezone(UTC), madrid)
    assert quiet_soon(QUIET, at_local.replace(hour=22).astimezone(UTC), madrid)


def test_quiet_hours_begin_at_the_start_of_the_first_quiet_local_hour() -> None:
    madrid, kolkata = ZoneInfo("Europe/Madrid"), ZoneInfo("Asia/Kolkata")
    # 18:10 in Madrid (winter time, UTC+1): the quiet hours begin at 21:00, 20:00 UTC.
    evening = datetime(2026, 3, 20, 17, 10, tzinfo=UTC)
    assert quiet_begins(QUIET, evening, madrid) == datetime(2026, 3, 20, 20, 0, tzinfo=UTC)
    # In summer time (UTC+2) the same local hour is an hour earlier in UTC.
    summer = datetime(2026, 3, 30, 16, 10, tzinfo=UTC)
    assert quiet_begins(QUIET, summer, madrid) == datetime(2026, 3, 30, 19, 0, tzinfo=UTC)
    # A half-hour offset: 21:00 in Kolkata is 15:30 UTC.
    assert quiet_begins(QUIET, DAY + timedelta(hours=6), kolkata) == DAY + timedelta(
        hours=15, minutes=30
    )
    # Quiet already: now; no quiet hours: never.
    night = datetime(2026, 3, 20, 21, 30, tzinfo=UTC)
    assert quiet_begins(QUIET, night, madrid) == night
    assert quiet_begins(QuietHours(9, 9), evening, madrid) is None


@given(
    st.integers(0, 23),
    st.integers(0, 23),
    st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1), timezones=st.just(UTC)
    ),
    st.sampled_from(["Europe/Madrid", "America/Sao_Paulo", "Asia/Kolkata", "Etc/GMT-2"]),
)
def test_the_quiet_hours_begin_where_quiet_soon_first_says_so(
    start: int, end: int, moment: datetime, name: str
) -> None:
    quiet, tz = QuietHours(start, end), ZoneInfo(name)
    begins = quiet_begins(quiet, moment, tz)
    if start == end:
        assert begins is None
        return
    assert begins is not None and begins >= moment
    assert quiet.quiet(begins.astimezone(tz).hour)
    # Not quiet a moment before it, unless it is quiet already.
    before = begins - timedelta(seconds=1)
    assert begins == moment or not quiet.quiet(before.astimezone(tz).hour)
