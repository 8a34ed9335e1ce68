"""A tutor turn's values: the request that goes in (`TurnRequest`), the `Turn` that comes out,
and the work it leaves for after its reply is sent (`AfterSend`). The tutor (bot/turn/tutor.py)
makes one from the other and stores only the learner's message; the caller stores the reply
(bot/turn/storing.py), sends it, then does the after-send work (bot/turn/after_send.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bot.channels import Button, GroupChats, VoiceFetcher
from bot.review.reviewing import NO_REVIEW, ReviewUse
from bot.turn.recall import NO_RECALL, RecallUse
from memory.database.records import LearnerInfo, ReplyRecord
from memory.messages import VoiceNote
from memory.turns import Written


@dataclass(frozen=True)
class TurnRequest:
    """One inbound message to answer, and what its caller and channel allow.

    The message: from the learner at `address` on their channel (`display_name`: the name
    the platform gives them), what they wrote (`text`: a caption, for media), its `kind`
    ("text", "voice", a photo's "media", the note that messages were turned away) and the
    `voice` note it is, if it is one.

    The caller: `inbox_id`, the durable inbox item the message is (the turn is then
    idempotent: run again after a crash, it stores nothing twice and answers with the reply
    already made); `learner`, the learner at `address` if the caller has just read them;
    `can_retry`, the caller runs the turn again later when the model fails (ModelUnavailable
    is raised instead of an apology).

    The channel: `fetcher` downloads its voice notes; `can_speak`, it takes spoken replies
    (the reply is spoken too when the learner asked for it, /voice on); `group`, the channel,
    when the message was said in one of its groups (commands that show the learner's memory
    are answered in private only); `language_hint`, what it says of the sender's language
    (Pam's guess at their native language until they say it); `repeat_confirms`, its users
    confirm a /forget by saying /forget again (bot.channels.RepeatConfirms)."""

    address: str
    text: str
    display_name: str | None = None
    kind: str = "text"
    voice: VoiceNote | None = None
    inbox_id: int | None = None
    learner: LearnerInfo | None = None
    can_retry: bool = False
    fetcher: VoiceFetcher | None = None
    can_speak: bool = False
    group: GroupChats | None = None
    language_hint: str | None = None
    repeat_confirms: bool = False


@dataclass(frozen=True)
class AfterSend:
    """The work a turn leaves for once its reply is on its way, so that the reply never waits
    for it: the memory jobs the turn made due (`memory_jobs`: a fold, a profile update), each
    asked for and run in the background, and those the reply's write asked for itself
    (`marked_jobs`: the review job, which grades the learner's items by the reply), only
    started."""

    memory_jobs: tuple[str, ...] = ()
    marked_jobs: tuple[str, ...] = ()

    def and_written(self, written: Written) -> AfterSend:
        """This work and the jobs the reply's `written` write found due or asked for."""
        return replace(
            self,
            memory_jobs=self.memory_jobs + written.due,
            marked_jobs=self.marked_jobs + written.marked,
        )


@dataclass(frozen=True)
class Turn:
    """What the tutor made of one inbound message: whose it was, the texts to send, the reply
    to store with them (None: nothing to store, e.g. a command's answer or an apology), and
    the work left for after the reply is sent (`after_send`: as far as the tutor knows; the
    reply's write adds the memory jobs due after it)."""

    replies: list[str]
    learner_id: int | None
    reply: ReplyRecord | None = None
    after_send: AfterSend = field(default_factory=AfterSend)
    # What the operator should know when the model could not be used because of how it is
    # configured (a rejected key, an unknown model, an unreachable base URL): `pam chat`,
    # where the learner is the operator, shows it on stderr. Never shown to a learner.
    problem: str | None = None
    # What recall did this turn (how, snippets added, their tokens): for the log line and
    # the token benchmark.
    recall: RecallUse = NO_RECALL
    # What review added to the prompt (due items, a /review exercise, their tokens): the same.
    review: ReviewUse = NO_REVIEW
    # A /progress chart (stored, by id) sent with the first reply as its caption.
    chart_id: int | None = None
    # The words of the reply's spoken copy (/voice on): queued after its text as a part to
    # speak, made and sent by a speech lane once the text went out (bot/voice/speaking.py).
    speech: str | None = None
    # Buttons under the last reply text (Translate, Explain, ...; a /forget's confirmation):
    # channels that can show them do, and a tap comes back as the button's command.
    buttons: tuple[Button, ...] = ()
    # The learner's memory was erased by this turn (a confirmed /forget): `pam chat` then
    # deletes the files it wrote for them, and their line history.
    forgot: bool = False


class ModelUnavailable(Exception):
    """The LLM failed this turn (after the client's own retries) and the caller said it can
    try the turn again later: nothing was answered, the learner's message is kept.
    `retry_after`: seconds to wait at least before that (a server that timed out may still
    be working on the request), None for the caller's own backoff."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
