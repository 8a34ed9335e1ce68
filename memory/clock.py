"""Time as a dependency: whatever leases, waits or budgets takes a clock, so that tests move
time forward instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

# What a clock is: a call that says what time it is, timezone-aware, in UTC.
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    """The system clock: the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class ManualClock:
    """A clock a test moves forward itself (for leases and rests), instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        """Move the clock `by` forward."""
        self.now += by
