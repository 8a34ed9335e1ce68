"""Timezones as learners name them: an IANA name checked against those zoneinfo knows, the
zone Pam goes by for a learner (UTC while she knows none), how a zone reads to a person
(a fixed offset as "UTC+01:00", never as its backwards POSIX name), and when clocks last
changed anywhere (what a guess that does not know a learner's zone has to allow for)."""

from __future__ import annotations

import bisect
import functools
from datetime import UTC, datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones


@functools.cache
def _zone_names() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


def timezone_named(text: str) -> str | None:
    """The IANA timezone `text` names ("europe/madrid", "America/New York" → its canonical
    spelling), or None when there is none such."""
    key = text.strip().replace(" ", "_").lower()
    if not key or len(key) > 64:
        return None
    return _zone_names().get(key)


def zone(name: str | None) -> ZoneInfo:
    """The timezone `name`, UTC when unknown or unset."""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo("UTC")


# The prefix of IANA's fixed-offset zones ("Etc/GMT-1" is an hour *ahead* of UTC: POSIX signs).
FIXED = "Etc/"


def is_fixed_offset(name: str | None) -> bool:
    """Whether `name` is one of IANA's fixed-offset zones (what a guess from hours is)."""
    return name is not None and name.startswith(FIXED)


def readable(name: str | None) -> str:
    """How the timezone `name` reads to a person: an IANA name as it is ("Europe/Madrid"), a
    fixed offset as "UTC+01:00" (Etc/GMT-1 reads backwards), "UTC" for UTC or none."""
    if not is_fixed_offset(name):
        return name or "UTC"
    offset = datetime(2000, 1, 1, tzinfo=zone(name)).utcoffset() or timedelta(0)
    if not offset:
        return "UTC"
    minutes = abs(int(offset.total_seconds())) // 60
    sign = "+" if offset > timedelta(0) else "-"
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


# How closely a clock change's moment is found: changes fall on the hour or half hour (UTC).
_CHANGE_STEP = timedelta(minutes=15)


class ClockChange(NamedTuple):
    """A moment (UTC) at which some zone's clocks changed, and which way: `forward` (the
    zone's offset grew: spring), else back."""

    at: datetime
    forward: bool


@functools.cache
def clock_changes(year: int) -> tuple[ClockChange, ...]:
    """Every clock change of `year` in the zones zoneinfo knows (daylight saving either way,
    or a new offset), sorted, each to the quarter hour after it: some 40 a year, mostly in
    March–April and September–November. Found from each zone's offset at each day's start
    (about 0.3 s a year, once per process)."""
    start = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
    found: set[ClockChange] = set()
    for name in available_timezones():
        tz = ZoneInfo(name)
        offsets = [day.astimezone(tz).utcoffset() or timedelta(0) for day in days]
        for n in range(1, len(days)):
            before, after = offsets[n - 1], offsets[n]
            if after != before:
                at = _changed_at(tz, days[n - 1], days[n], before)
                found.add(ClockChange(at, after > before))
    return tuple(sorted(found))


def _changed_at(tz: ZoneInfo, before: datetime, after: datetime, offset: timedelta) -> datetime:
    """The first quarter hour from `before` to `after` (UTC) at which `tz` no longer has
    `offset`."""
    while after - before > _CHANGE_STEP:
        middle = before + (after - before) / 2
        middle -= timedelta(
            minutes=middle.minute % 15, seconds=middle.second, microseconds=middle.microsecond
        )
        if middle <= before:
            middle = before + _CHANGE_STEP
        if (middle.astimezone(tz).utcoffset() or timedelta(0)) == offset:
            before = middle
        else:
            after = middle
    return after


def clock_changes_between(since: datetime, until: datetime) -> list[ClockChange]:
    """The clock changes anywhere after `since`, up to and including `until`."""
    return [
        change
        for year in range(since.year, until.year + 1)
        for change in clock_changes(year)
        if since < change.at <= until
    ]


def last_clock_change(moment: datetime) -> datetime | None:
    """The latest moment at or before `moment` at which clocks changed somewhere (this year's
    or last year's), None for none."""
    for year in (moment.year, moment.year - 1):
        changes = clock_changes(year)
        index = bisect.bisect_right(changes, moment, key=lambda change: change.at)
        if index:
            return changes[index - 1].at
    return None
