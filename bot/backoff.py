"""How long a failed turn or delivery waits before it is tried again."""

from __future__ import annotations

import random

MAX_BACKOFF_SECONDS = 300.0


def backoff(attempts: int, retry_after: float | None = None) -> float:
    """Seconds to wait before attempt `attempts + 1`: exponential with jitter, never less than
    what the platform asked for."""
    delay = min(MAX_BACKOFF_SECONDS, 2.0 ** max(0, attempts - 1)) * random.uniform(0.8, 1.2)
    return max(delay, retry_after or 0.0)
