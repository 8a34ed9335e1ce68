"""Review in tests of turns and /review: Pam on a manual clock that folds every turn (so a
mistake leaves the prompt after two), learners with corrected mistakes that are due, and the
store's review rows as tests read them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, select

from bot.turn.values import Turn, TurnRequest
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import LearnerInfo
from tests.conftest import learner_of, unique_user
from tests.fakes import Call, FakeChatModel, reply_json
from webhooks.settings import Settings
from webhooks.wiring import build

MISTAKE = "Tengo un bueno amigo y yo es de Madrid."
BUEN = {
    "original": "un bueno amigo",
    "corrected": "un buen amigo",
    "explanation": "bueno → buen before a masculine singular noun",
    "category": "grammar",
    "rule": "bueno → buen before a masculine singular noun",
}
SER = {
    "original": "yo es",
    "corrected": "yo soy",
    "explanation": "ser: yo soy",
    "category": "conjugation",
    "rule": "ser, first person singular",
}
CHAT = "¿Y tú qué haces hoy?"


def review_pam(
    settings: Settings, engine: Engine, model: FakeChatModel, clock: ManualClock, **memory: object
) -> Pam:
    """Pam on `clock` with inline memory jobs and no rate limit, folding at every turn: the
    window keeps the last two messages, so a learner message leaves the prompt two turns on."""
    knobs = {"window_messages": 2, "summary_trigger_tokens": 1, "fold_batch_messages": 1}
    return build(
        settings.replace(limits={"rate_limit_per_minute": 0}, memory={**knobs, **memory}),
        model=model,
        submit=lambda work: work(),
        engine=engine,
        clock=clock,
    )


def say(pam: Pam, user: str, text: str) -> Turn:
    """One turn as a channel runs it: the reply stored, then the memory jobs it made due."""
    turn = pam.local_turns().reply(TurnRequest(user, text))
    pam.after_sending.run(turn)
    return turn


@dataclass(frozen=True)
class Learner:
    user: str
    info: LearnerInfo


def with_due_mistakes(
    pam: Pam, model: FakeChatModel, clock: ManualClock, *corrections: dict[str, str]
) -> Learner:
    """A Spanish learner whose MISTAKE Pam corrected with `corrections`, chatted on until the
    message left the prompt, an hour ago: each correction's item is due."""
    user = unique_user("review")
    say(pam, user, "/language Spanish English")
    model.queue("reply", reply_json("¡Qué bien!", list(corrections)))
    say(pam, user, MISTAKE)
    say(pam, user, "Hoy hace sol.")  # its turn folds MISTAKE out of the prompt
    clock.advance(timedelta(hours=1))
    return Learner(user, learner_of(pam, user))


def due_scene(
    settings: Settings, engine: Engine, *corrections: dict[str, str], **memory: object
) -> tuple[Pam, FakeChatModel, ManualClock, Learner]:
    """A fresh `review_pam` (with `memory` knobs) and a learner `with_due_mistakes`."""
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock, **memory)
    return pam, model, clock, with_due_mistakes(pam, model, clock, *corrections)


def system_of(call: Call) -> str:
    return call.messages[0]["content"]


def section(text: str, tag: str) -> str:
    """The data between `<tag>` and `</tag>` (exactly one such section)."""
    assert text.count(f"<{tag}>") == 1 and text.count(f"</{tag}>") == 1, tag
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def item_ids(engine: Engine, learner_id: int) -> dict[str, int]:
    """The learner's review items' ids by rule."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(ReviewItem.rule, ReviewItem.id).where(ReviewItem.learner_id == learner_id)
        )
        return {rule: item_id for rule, item_id in rows}


def offers(engine: Engine, item_id: int) -> int:
    with engine.connect() as connection:
        found = connection.scalar(select(ReviewItem.offers).where(ReviewItem.id == item_id))
        assert found is not None
        return found


def grades(engine: Engine, learner_id: int, *sources: str) -> list[tuple[int, str, int]]:
    """(item id, source, FSRS rating) of the learner's review logs, oldest first; only those
    of `sources` when given."""
    query = select(ReviewLog.item_id, ReviewLog.source, ReviewLog.rating).where(
        ReviewLog.learner_id == learner_id
    )
    if sources:
        query = query.where(ReviewLog.source.in_(sources))
    with engine.connect() as connection:
        return [(i, s, r) for i, s, r in connection.execute(query.order_by(ReviewLog.id))]
