"""Timezones as learners name them: an IANA name checked against those zoneinfo knows, the
zone Pam goes by for a learner (UTC while she knows none), and how a zone reads to a person
(a fixed offset as "UTC+01:00", never as its backwards POSIX name)."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
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
