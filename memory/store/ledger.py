"""What turns leave on record about a learner besides the conversation: the corrections Pam
made, the LLM tokens spent, and the counts the cost and abuse limits look at."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import exists, func, insert, literal, select
from sqlalchemy.exc import IntegrityError

from memory import metrics
from memory.clock import Clock
from memory.database.db import Tables
from memory.database.models import Correction, Learner, Usage
from memory.database.records import BilledCall, CorrectionRecord, LearnerGone
from memory.database.statements import INSERT_CORRECTIONS, correction_rows


class Ledger(Tables):
    """Corrections and usage, read and written."""

    def add_corrections(
        self, learner_id: int, message_id: int | None, corrections: Sequence[CorrectionRecord]
    ) -> None:
        """Store the corrections Pam made to one learner message."""
        if not corrections:
            return
        try:
            with self.engine.begin() as connection:
                rows = correction_rows(learner_id, message_id, corrections, self.clock())
                connection.execute(INSERT_CORRECTIONS, rows)
        except IntegrityError as exc:
            raise LearnerGone(learner_id) from exc

    def corrections(self, learner_id: int, limit: int = 20) -> list[CorrectionRecord]:
        """The learner's most recent corrections, newest last."""
        with self.sessions() as session:
            rows = session.scalars(
                select(Correction)
                .where(Correction.learner_id == learner_id)
                .order_by(Correction.id.desc())
                .limit(limit)
            ).all()
            return [
                CorrectionRecord(r.original, r.corrected, r.explanation, r.category, r.rule)
                for r in reversed(rows)
            ]

    def corrections_of(self, learner_id: int, message_id: int) -> list[CorrectionRecord]:
        """The corrections Pam made to the learner's message `message_id`, in the order she
        made them (none for another learner's message)."""
        with self.sessions() as session:
            rows = session.scalars(
                select(Correction)
                .where(Correction.learner_id == learner_id, Correction.message_id == message_id)
                .order_by(Correction.id)
            ).all()
            return [
                CorrectionRecord(r.original, r.corrected, r.explanation, r.category, r.rule)
                for r in rows
            ]

    def record_usage(
        self, learner_id: int, model: str, purpose: str, input_tokens: int, output_tokens: int
    ) -> None:
        """Record one LLM call's tokens — unless the learner has been forgotten meanwhile."""
        self.record_calls(learner_id, purpose, [_Call(model, input_tokens, output_tokens)])

    def record_calls(self, learner_id: int, purpose: str, calls: Iterable[BilledCall]) -> None:
        """Record the tokens of LLM calls made for `purpose` (the unusable answers before a
        completion, then its own), in one transaction — unless the learner has been forgotten
        meanwhile."""
        calls = list(calls)
        if not calls:
            return
        # IntegrityError: forgotten while the insert ran (Postgres checks the key).
        with contextlib.suppress(IntegrityError), self.sessions.begin() as session:
            for call in calls:
                session.execute(_usage_insert(learner_id, purpose, call, self.clock))

    def record_audio(
        self,
        learner_id: int,
        model: str,
        purpose: str,
        tokens: int,
        *,
        seconds: float = 0.0,
        chars: int = 0,
    ) -> None:
        """Record one audio call: the seconds heard (a transcription) or the characters spoken
        (speech), and the `tokens` they count as toward the budgets — unless the learner has
        been forgotten meanwhile."""
        metrics.count_audio(purpose, model, tokens, seconds=seconds, chars=chars)
        call = _Call(model[:100], tokens, 0)
        billed_by = {"audio_seconds": float(seconds), "speech_chars": chars}
        with contextlib.suppress(IntegrityError), self.single.begin() as connection:
            connection.execute(_usage_insert(learner_id, purpose, call, self.clock, billed_by))

    def audio_usage(self, learner_id: int) -> dict[str, tuple[float, int]]:
        """Per purpose: (seconds heard, characters spoken) by the learner's audio calls."""
        with self.single.connect() as connection:
            rows = connection.execute(
                select(
                    Usage.purpose,
                    func.sum(Usage.audio_seconds).label("seconds"),
                    func.sum(Usage.speech_chars).label("chars"),
                )
                .where(Usage.learner_id == learner_id)
                .where((Usage.audio_seconds > 0) | (Usage.speech_chars > 0))
                .group_by(Usage.purpose)
            )
            return {row.purpose: (float(row.seconds), int(row.chars)) for row in rows}

    def usage(self, learner_id: int) -> dict[str, tuple[int, int, int]]:
        """Per purpose: (calls, input tokens, output tokens) for the learner (a row rolled up
        by chat retention counts the calls it stands for)."""
        with self.sessions() as session:
            rows = session.execute(
                select(
                    Usage.purpose,
                    func.sum(Usage.calls).label("calls"),
                    func.sum(Usage.input_tokens).label("input_tokens"),
                    func.sum(Usage.output_tokens).label("output_tokens"),
                )
                .where(Usage.learner_id == learner_id)
                .group_by(Usage.purpose)
            )
            return {
                row.purpose: (int(row.calls), int(row.input_tokens), int(row.output_tokens))
                for row in rows
            }


class _Call(NamedTuple):
    """One call's tokens, as `record_usage` is given them."""

    model: str
    input_tokens: int
    output_tokens: int


def _usage_insert(
    learner_id: int,
    purpose: str,
    call: BilledCall,
    clock: Clock,
    billed_by: dict[str, float | int] | None = None,
) -> Any:
    """The INSERT of one call's usage row, which inserts nothing once the learner is gone.
    `billed_by`: an audio call's `audio_seconds` or `speech_chars`."""
    extra = billed_by or {}
    return insert(Usage).from_select(
        ["learner_id", "model", "purpose", "input_tokens", "output_tokens", *extra, "created_at"],
        select(
            literal(learner_id),
            literal(call.model),
            literal(purpose),
            literal(call.input_tokens),
            literal(call.output_tokens),
            *(literal(value) for value in extra.values()),
            literal(clock(), Usage.created_at.type),
        ).where(exists().where(Learner.id == learner_id)),
    )
