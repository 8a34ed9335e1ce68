"""Timezones as learners name them: an IANA name checked against those zoneinfo knows, and
the zone Pam goes by for a learner (UTC while she knows none)."""

from __future__ import annotations

import functools
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
