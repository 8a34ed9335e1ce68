"""The memory knobs, independent of where they were configured."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryConfig:
    """Window size, fold trigger, batch and cap, profile cadence, job lease, memory model."""

    window_messages: int = 10
    # Chosen from the token benchmark's cost curve (bench/results/threshold_curve.png): the
    # largest summary cap that meets the token targets, at its cheapest trigger.
    summary_trigger_tokens: int = 600
    summary_max_tokens: int = 120
    # A fold waits until at least this many messages lie outside the window (6: three turns),
    # so the summary is rewritten at most once every three turns, however long the messages.
    fold_batch_messages: int = 6
    profile_every: int = 5
    job_lease_seconds: float = 60.0
    memory_model: str = "gpt-4o-mini"
    # The profile job reads at most this many new learner messages per run; older ones are
    # skipped (the watermark still passes them) so a long backlog cannot blow up one prompt.
    profile_max_batch: int = 40
