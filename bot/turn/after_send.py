"""A turn's after-send work, done once its reply is on its way: the learner's review items
graded by the reply, and the memory jobs the turn made due started. Every caller that sends a
reply does it after the send (the worker's answering lane, the terminal); the reply never
waits for it."""

from __future__ import annotations

from bot.review.reviewing import Reviewing
from bot.turn.values import Turn
from memory.jobs.coordinator import JobRunner


class AfterSending:
    """Does a turn's `AfterSend` work: grades with `review`, starts the memory jobs with
    `runner` (each in the background, where the runner runs them)."""

    def __init__(self, review: Reviewing, runner: JobRunner) -> None:
        self.review = review
        self.runner = runner

    def run(self, turn: Turn) -> None:
        """Grade `turn`'s review items by its reply, then start the memory jobs it made due."""
        work = turn.after_send
        if work.grading is not None:
            self.review.record(work.grading)
        for kind in work.memory_jobs:
            assert turn.learner_id is not None
            self.runner.request(turn.learner_id, kind)
