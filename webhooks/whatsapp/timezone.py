"""The timezone a WhatsApp number suggests its owner lives in: its country (the phonenumbers
library), then that country's timezones in CLDR (through Babel) — when most of them keep the
same time all year (Spain: Madrid and Ceuta, not the Canaries), one of those; none for a
country whose zones differ (the United States, Mexico, Brazil), where the hours the learner
writes at tell instead (bot/checkins/timing.py). A guess, kept apart from a timezone the
learner states with /timezone."""

from __future__ import annotations

import functools
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import phonenumbers
from babel.core import get_global

# A country's zones agree when at least this share of them keeps the same offsets.
AGREEING = 2 / 3
# Two days whose offsets tell a zone's winter and summer time apart.
_SEASONS = (datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 7, 15, tzinfo=UTC))


def _offsets(name: str) -> tuple[timedelta | None, ...] | None:
    try:
        tz = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return tuple(day.astimezone(tz).utcoffset() for day in _SEASONS)


@functools.cache
def country_timezone(territory: str) -> str | None:
    """The timezone of most of `territory` (a CLDR region code, "ES"), or None."""
    zones = [z for z in get_global("territory_zones").get(territory, []) if _offsets(z)]
    if not zones:
        return None
    groups = Counter(_offsets(z) for z in zones)
    offsets, count = groups.most_common(1)[0]
    if count < AGREEING * len(zones):
        return None
    return str(next(z for z in zones if _offsets(z) == offsets))


def number_timezone(address: str) -> str | None:
    """The timezone a WhatsApp address suggests ("whatsapp:+34600111222" → a zone on Madrid's
    time), or None."""
    number = address.removeprefix("whatsapp:").strip()
    try:
        parsed = phonenumbers.parse(number if number.startswith("+") else f"+{number}")
    except phonenumbers.NumberParseException:
        return None
    region = phonenumbers.region_code_for_number(parsed)
    return country_timezone(region) if region else None
