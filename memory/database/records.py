"""The plain values the message store hands out and takes in, and what it raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from memory.database.models import (
    Chart,
    Correction,
    MemoryJob,
    Message,
    Profile,
    Summary,
    Usage,
    VoiceClip,
)
from memory.database.models_checkins import Checkin, CheckinState
from memory.database.models_recall import RecallEntry
from memory.database.models_review import ReviewItem, ReviewLog, ReviewPending, ReviewSession

LEARNER = "learner"
PAM = "pam"
# The memory job that grades the turns' review_pending rows: the reply's write asks for it,
# in the same transaction (memory/jobs/coordinator.py runs it).
REVIEW_JOB = "review"

# How many of a learner's mistakes a reply points out (/corrections; learners.corrections):
# only the most important one, up to three, or every slip. NORMAL is also what a learner who
# never said has, so only FEW and ALL in the column are known to be chosen.
FEW, NORMAL, ALL = "few", "normal", "all"
DENSITIES = (FEW, NORMAL, ALL)

# Every table holding something about a learner, children first: /forget walks this list.
LEARNER_TABLES = (
    Checkin,
    CheckinState,
    ReviewPending,
    ReviewSession,
    ReviewLog,
    ReviewItem,
    Chart,
    VoiceClip,
    RecallEntry,
    Correction,
    Usage,
    MemoryJob,
    Summary,
    Profile,
    Message,
)


@dataclass(frozen=True)
class LearnerInfo:
    """A learner and their explicit settings."""

    id: int
    external_id: str
    display_name: str | None
    target_language: str | None
    native_language: str | None
    level: str | None
    voice_replies: bool = False
    native_guess: str | None = None  # the native language guessed before they said one
    corrections: str = NORMAL  # /corrections few|normal|all (DENSITIES)
    # When the learner was asked to confirm a /forget not confirmed yet (None: no request):
    # their next message confirms it or drops it (bot/turn/forgetting.py).
    forget_asked_at: datetime | None = None


@dataclass(frozen=True)
class StoredMessage:
    """One stored message of a conversation."""

    id: int
    role: str
    content: str
    tokens: int
    spoken_seconds: float | None = None  # a voice note's length: its content was heard
    # A voice note Pam could not transcribe: its content says so (and why), not what was said.
    untranscribed: bool = False
    # When it was stored: read only where it is used (the profile job dates the messages it
    # reads, to resolve "on Thursday"); None elsewhere, so not part of a message's identity.
    said_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SummaryState:
    """The rolling summary as of `version`; messages up to `watermark` are folded into it."""

    text: str
    tokens: int
    watermark: int
    version: int
    folds: int
    updated_at: datetime | None


@dataclass(frozen=True)
class ProfileState:
    """The learned profile as of `version`; learner messages up to `watermark` were read."""

    data: dict[str, Any]
    watermark: int
    version: int
    messages_processed: int
    updated_at: datetime | None


@dataclass(frozen=True)
class CorrectionRecord:
    """One structured correction."""

    original: str
    corrected: str
    explanation: str = ""
    category: str = "other"
    # The pattern the mistake belongs to, as the model named it ("" when it named none).
    rule: str = ""


@dataclass(frozen=True)
class ReviewReport:
    """What a reply said of the learner's review items, to grade them by (with the turn's
    corrections) in the "review" memory job: the items the learner used correctly (Good),
    got wrong again where the reply invited them (Again), and those its prompt offered."""

    used: tuple[int, ...] = ()
    missed: tuple[int, ...] = ()
    offered: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReplyRecord:
    """What a tutor's turn produced, to store with the reply: the reply as shown (any note
    included) to the learner's stored message `reply_to`, its corrections, the usage of the
    answering call (model, input tokens, output tokens), and `review`: the grades left for
    the review job (None: nothing to grade, or graded already, as a /review answer is)."""

    learner_id: int
    reply_to: int
    content: str
    tokens: int
    corrections: tuple[CorrectionRecord, ...]
    usage: tuple[str, int, int]
    review: ReviewReport | None = None


class Backlog(NamedTuple):
    """What decides whether a fold or a profile update is due: how many messages (and tokens)
    are not folded into the summary yet, and the newest learner messages the profile has not
    read, oldest first."""

    unfolded: int
    unfolded_tokens: int
    unread: list[str]


class SavedReply(NamedTuple):
    """What storing a reply did (`Backend.save_reply`): the reply as stored, the memory
    backlog as of it, and, when it finished the inbox claim too, the queued replies' ids in
    order (None: no finish, or the claim was lost) and whether another inbox message was
    ready for a claim as it wrote (on Postgres as its statement began; True where it did not
    look: without a finish)."""

    stored: StoredMessage
    backlog: Backlog
    ids: list[int] | None
    inbox_ready: bool = True


class ReviewOutlook(NamedTuple):
    """What a context read saw of the learner's review: whether a /review is under way, and
    when their first item falls due (None: they have no items)."""

    session: bool
    next_due: datetime | None

    def nothing_for_prompt(self, now: datetime) -> bool:
        """Whether review has nothing for a prompt at `now`: no /review under way and no item
        due (review's own read would find nothing)."""
        return not self.session and (self.next_due is None or self.next_due > now)


@dataclass(frozen=True)
class Context:
    """What a reply prompt is built from: settings, profile, summary and every unfolded
    message; and, where the read looked, the learner's review outlook (None: not read)."""

    learner: LearnerInfo
    profile: ProfileState
    summary: SummaryState
    messages: list[StoredMessage] = field(default_factory=list)
    review: ReviewOutlook | None = None


class ActivityWindow(NamedTuple):
    """What the cost and abuse limits count: the learner's messages since `messages_since`,
    their LLM tokens since `tokens_since`, and with `everyone` all learners' tokens too."""

    messages_since: datetime
    tokens_since: datetime
    everyone: bool


class Activity(NamedTuple):
    """The counts of an `ActivityWindow` (`everyone_tokens` None unless asked for)."""

    messages: int
    tokens: int
    everyone_tokens: int | None


class TurnStart(NamedTuple):
    """A turn's first step: the learner's message as stored, and either Pam's reply to it
    (`answered`: the turn ran before) or what the reply needs (`context`, `activity`)."""

    stored: StoredMessage
    answered: StoredMessage | None
    context: Context | None
    activity: Activity | None


class BilledCall(Protocol):
    """One LLM call the provider billed, as usage records it (the chat-model edge's `Usage`
    is one)."""

    @property
    def model(self) -> str: ...

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class LearnerGone(Exception):
    """The learner was forgotten (or never existed) while work about them was under way."""
