"""Storing the end of a turn: its reply (if any) written with memory.turns.TurnWriter, in one
transaction with finishing the inbox claim the turn answers (none for the terminal) and
queueing its texts, split into the parts the channel sends."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from bot.turn.values import Turn
from memory.database.claims import InboxClaim
from memory.database.records import LearnerGone
from memory.turns import TurnWriter, Written

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stored:
    """What storing a turn came to: the parts queued (or, with no claim, to show), what the
    write handed back, and whether they are the turn's own reply — not when /forget won a
    race with the turn (nothing is said or kept) or another worker answered the message first
    (its reply is sent instead)."""

    parts: list[str]
    written: Written
    own: bool


def store_turn(
    writer: TurnWriter,
    claim: InboxClaim | None,
    turn: Turn,
    split: Callable[[list[str]], list[str]] = list,
) -> Stored:
    """Write the end of `turn` with `writer`, finishing `claim` (if any) with the turn's
    texts, `split` into the parts a channel sends; the turn's buttons go with the last part."""
    parts = split(turn.replies)
    buttons = [(button.label, button.command) for button in turn.buttons]
    try:
        written = writer.write(
            claim, parts, turn.reply, chart_id=turn.chart_id, speech=turn.speech, buttons=buttons
        )
    except LearnerGone:  # /forget won a race with this turn: say nothing, keep nothing
        log.info("turn for learner %s dropped: forgotten mid-turn", turn.learner_id)
        return Stored([], writer.write(claim, []), own=False)
    if written.existing is None:
        return Stored(parts, written, own=True)
    parts = split([written.existing])  # another worker answered this message first
    return Stored(parts, writer.write(claim, parts), own=False)
