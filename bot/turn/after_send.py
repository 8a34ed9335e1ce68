"""A turn's after-send work, done once its reply is on its way: the memory jobs the turn made
due asked for and started, and those its reply's write asked for itself started (the review
job, which grades the learner's items by the reply in the memory process: no grading runs on
the reply lane). Every caller that sends a reply does it after the send (the worker's
answering lane, the terminal); the reply never waits for it."""

from __future__ import annotations

from bot.turn.values import Turn
from memory.jobs.coordinator import JobRunner


class AfterSending:
    """Does a turn's `AfterSend` work: starts its memory jobs with `runner` (each in the
    background, where the runner runs them)."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner

    def run(self, turn: Turn) -> None:
        """Start the jobs `turn`'s reply's write asked for (no statement for those), then ask
        for the memory jobs it made due and start them. The review job goes first: a profile
        update reads the patterns it grades."""
        work = turn.after_send
        if not (work.memory_jobs or work.marked_jobs):
            return
        assert turn.learner_id is not None
        for kind in work.marked_jobs:
            self.runner.marked(turn.learner_id, kind)
        for kind in work.memory_jobs:
            self.runner.request(turn.learner_id, kind)
