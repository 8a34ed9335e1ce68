"""Timezones as learners name them: an IANA name checked against those zoneinfo knows, the
zone Pam goes by for a learner (UTC while she knows none), how a zone reads to a person
(a fixed offset as "UTC+01:00", never as its backwards POSIX name), and how far clocks
moved anywhere between two moments (what a guess that does not know a learner's zone has
to allow for)."""

from __future__ import annotations

import functools
import threading
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


# Zones nobody learns from: research stations (Antarctica/Troll goes two hours forward).
_UNPEOPLED = ("Antarctica/",)
# How many years back the clock changes are looked at; a message older than that may have
# been written on a clock an hour off either way.
_YEARS_BACK = 10
_LOCK = threading.Lock()


def _changing(year: int) -> frozenset[ZoneInfo]:
    """The zones whose clocks changed in `year` (daylight saving either way, or a new
    offset), worked out once per process (a quarter second or so) under a lock: the check-in
    rounds ask from several threads. Held, as zoneinfo's own cache is weak."""
    with _LOCK:
        return _scan(year)


@functools.cache
def _scan(year: int) -> frozenset[ZoneInfo]:
    start = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
    zones: set[ZoneInfo] = set()
    for name in available_timezones():
        if name.startswith(_UNPEOPLED):
            continue
        tz = ZoneInfo(name)
        offsets = {day.astimezone(tz).utcoffset() for day in days}
        if len(offsets) > 1:
            zones.add(tz)
    return frozenset(zones)


class Shift(NamedTuple):
    """How far clocks moved between two moments, in hours, at most, in any zone: `forward`
    (a time of day written then reads that much later now), `back` (earlier)."""

    forward: float
    back: float


def clock_shift(then: datetime, now: datetime) -> Shift:
    """How far any zone's clock moved from `then` to `now`, net (a change and its undoing
    cancel out: a year later, mostly none). Worked out per hour (`then`'s hour, `now`'s next),
    which only ever counts a change more, and kept for the hours asked again."""
    then = then.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    now = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return _shift(then, now)


@functools.lru_cache(maxsize=16384)
def _shift(then: datetime, now: datetime) -> Shift:
    if now <= then:
        return Shift(0.0, 0.0)
    if then.year < now.year - _YEARS_BACK:
        return Shift(1.0, 1.0)
    zones: set[ZoneInfo] = set().union(*(_changing(y) for y in range(then.year, now.year + 1)))
    forward = back = timedelta(0)
    for tz in zones:
        moved = (now.astimezone(tz).utcoffset() or timedelta(0)) - (
            then.astimezone(tz).utcoffset() or timedelta(0)
        )
        forward, back = max(forward, moved), max(back, -moved)
    hour = timedelta(hours=1)
    return Shift(forward / hour, back / hour)
