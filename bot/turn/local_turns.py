"""Turns taken without the inbox: the terminal (`pam chat`), the benchmarks and tests. Each
message is answered by the tutor and its reply stored at once (no claim to finish, nothing
queued); the caller shows the reply, has its spoken copy made if it wants one, and then does
the turn's after-send work."""

from __future__ import annotations

from dataclasses import replace

from bot.turn.after_send import AfterSending
from bot.turn.commands import parse_command
from bot.turn.storing import store_turn
from bot.turn.tutor import Tutor
from bot.turn.values import Turn, TurnRequest
from bot.voice.speaking import Spoken
from memory.database.records import LearnerGone
from memory.store.learners import Learners
from memory.turns import TurnWriter

# /profile shows what Pam learned, /progress and /review the learner's review items graded by
# the review job: here, where the memory jobs run in this process, they first wait (this long
# at most) for the learning and grading their earlier turns started, so that they show it.
LEARNING_WAIT_SECONDS = 60.0
SHOWS_WHAT_JOBS_WRITE = frozenset({"profile", "progress", "review"})


class LocalTurns:
    """The tutor's turns for a caller that shows the replies itself: `reply`, then `speak`
    (optional) and `after_send`; or `take`, reply and after-send work at once, for a caller
    that shows nothing in between."""

    def __init__(
        self,
        tutor: Tutor,
        writer: TurnWriter,
        after_sending: AfterSending,
        learners: Learners,
    ) -> None:
        self.tutor = tutor
        self.writer = writer
        self.after_sending = after_sending
        self.learners = learners

    def reply(self, request: TurnRequest) -> Turn:
        """The tutor's answer to `request`, its reply stored; the turn as stored, its
        after-send work not done yet (`after_send`, once the reply is shown)."""
        command = parse_command(request.text)
        if command is not None and command.name in SHOWS_WHAT_JOBS_WRITE:
            self.after_sending.runner.wait_idle(LEARNING_WAIT_SECONDS)
        turn = self.tutor.answer(request)
        if turn.reply is None:
            return turn
        stored = store_turn(self.writer, None, turn)
        if not stored.own:
            return Turn(stored.parts, turn.learner_id)
        return replace(turn, after_send=turn.after_send.and_written(stored.written))

    def speak(self, turn: Turn) -> Spoken:
        """The spoken copy of `turn`'s reply, made now, after its text was shown (elsewhere a
        speech lane makes it from the outbox, bot/voice/speaking.py)."""
        if turn.speech is None or turn.learner_id is None:
            return Spoken(None, "nothing to speak")
        try:
            learner = self.learners.get_learner(turn.learner_id)
            return self.tutor.speaking.speak(learner.id, turn.speech, learner.target_language)
        except LearnerGone:
            return Spoken(None, "forgotten")

    def after_send(self, turn: Turn) -> None:
        """Start the memory jobs `turn` made due (the review job among them, which grades the
        learner's items by its reply)."""
        self.after_sending.run(turn)

    def take(self, request: TurnRequest) -> Turn:
        """The whole turn at once: the reply stored, then its after-send work (the benchmarks
        and tests, which show nothing in between; no spoken copy is made)."""
        turn = self.reply(request)
        self.after_send(turn)
        return turn
