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

# The most weeks /progress shows (memory/review/progress.py), so the most it reads back: to
# the Monday PROGRESS_WEEKS - 1 weeks before this week's, at most 56 days ago. Chat retention
# (PAM_CHAT_RETENTION_DAYS) keeps a day more, so that clocks a little apart between processes
# never prune what a chart is about to count.
PROGRESS_WEEKS = 8
MIN_CHAT_RETENTION_DAYS = PROGRESS_WEEKS * 7 + 1


class MemoryConfig(BaseModel):
    """Window size, fold trigger, batch and cap, profile cadence, job lease, memory model,
    recall, review, and how long /forget waits for its confirmation."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    window_messages: int = Field(default=10, ge=2)
    """Messages always kept verbatim."""
    # Chosen from the token benchmark's cost curve (bench/results/threshold_curve.png): the
    # largest summary cap that meets the token targets, at its cheapest trigger.
    summary_trigger_tokens: int = Field(default=600, gt=0)
    """Fold when the unfolded conversation exceeds this many tokens (and a batch lies beyond
    the window)."""
    summary_max_tokens: int = Field(default=100, gt=0)
    """Cap on the rolling summary."""
    # A fold waits until at least this many messages lie outside the window (6: three turns),
    # so the summary is rewritten at most once every three turns, however long the messages.
    fold_batch_messages: int = Field(default=6, ge=1)
    """A fold waits until at least this many messages lie beyond the window: 6 is three
    turns, so the summary is rewritten at most once every three turns."""
    profile_every: int = Field(default=5, ge=1)
    """Learn the profile every N informative learner messages."""
    job_lease_seconds: float = Field(default=60.0, gt=0)
    """A memory job whose runner died is taken over after this long (live runners renew it)."""
    memory_model: str = DEFAULT_MODEL
    """The model of the summary and profile jobs; unset, `PAM_MODEL`'s."""
    recall: RecallMode = "auto"
    """Recall of earlier conversations: `auto` (Pam searches the learner's past when their
    message refers to it — "do you remember", "la semana pasada", "letztes Mal", … — asks
    about themselves — "¿dónde viven mis papás?" — or asks about a name the prompt does
    not mention), `tool` (the model is offered a `recall` tool; where the provider takes
    no tools, learned once per process, `auto`), `off`. `auto` is the default because it
    measured better: see Measured → Recall."""
    recall_max_tokens: int = Field(default=150, ge=20, le=2000)
    """Cap on all of one turn's recalled snippets together (at most 3, each dated)."""
    review: bool = True
    """Review of the mistakes Pam corrected: due items woven into replies, and `/review`;
    `off`: neither (corrections are still grouped into patterns and scheduled, so turning
    it on later loses nothing)."""
    forget_confirm_seconds: int = Field(default=300, ge=10, le=86400)
    """How long `/forget` waits for the learner's confirmation (a button, a reply word, or on
    the HTTP API `/forget` again); an unconfirmed request then expires and erases nothing."""
    # The profile job reads at most this many new learner messages per run; older ones are
    # skipped (the watermark still passes them) so a long backlog cannot blow up one prompt.
    # A bound of the job, not an operator's knob: no variable sets it.
    profile_max_batch: ClassVar[int] = 40
