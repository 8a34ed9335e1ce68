"""The memory knobs, independent of where they were configured; each default stated here once
(bot/settings.py reads them from PAM_* variables)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

# The chat model asked when none is configured: PAM_MODEL's default, and so the memory model's.
DEFAULT_MODEL = "gpt-4o-mini"

# How a reply recalls earlier conversations: auto (Pam searches when the learner's message
# refers to the past or names something the prompt does not mention), tool (the model is
# offered a recall tool; auto where the provider takes no tools), off.
RecallMode = Literal["auto", "tool", "off"]


class MemoryConfig(BaseModel):
    """Window size, fold trigger, batch and cap, profile cadence, job lease, memory model,
    recall, review."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_messages: int = Field(default=10, ge=2)
    # Chosen from the token benchmark's cost curve (bench/results/threshold_curve.png): the
    # largest summary cap that meets the token targets, at its cheapest trigger.
    summary_trigger_tokens: int = Field(default=600, gt=0)
    summary_max_tokens: int = Field(default=100, gt=0)
    # A fold waits until at least this many messages lie outside the window (6: three turns),
    # so the summary is rewritten at most once every three turns, however long the messages.
    fold_batch_messages: int = Field(default=6, ge=1)
    profile_every: int = Field(default=5, ge=1)
    job_lease_seconds: float = Field(default=60.0, gt=0)
    # The model of the summary and profile jobs; the settings make it the reply model's unless
    # PAM_MEMORY_MODEL names another.
    memory_model: str = DEFAULT_MODEL
    # PAM_RECALL; "auto" until the lead's measurement decides between the two paths.
    recall: RecallMode = "auto"
    # All of one turn's recalled snippets together, at most (tiktoken tokens).
    recall_max_tokens: int = Field(default=150, ge=20, le=2000)
    # PAM_REVIEW=on|off: due review items in reply prompts and /review; off, corrections are
    # still grouped into patterns (and scheduled), so turning it on later loses nothing.
    review: bool = True
    # The profile job reads at most this many new learner messages per run; older ones are
    # skipped (the watermark still passes them) so a long backlog cannot blow up one prompt.
    # A bound of the job, not an operator's knob: no variable sets it.
    profile_max_batch: ClassVar[int] = 40
