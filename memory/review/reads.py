"""What review reads: a due item, a recurring mistake's count, a /review under way and its
exercise, and the statements that find them — the items due, and the one a reply prompt runs on
every turn (a /review under way, else the items to offer: due, out of the verbatim window, not
resting), built once at import. memory/review/reviews.py writes what a turn and /review change."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Select, and_, bindparam, func, literal, or_, select
from sqlalchemy.orm import aliased

from memory.database.models import Id, UTCDateTime
from memory.database.models_review import ReviewItem, ReviewSession

# An item the reply prompt carried this many times without the learner taking it up (no
# grade) rests: a friend who brings the same thing up every few messages is nagging. It is
# offered again once REST has passed since the last offer: a later conversation.
OFFERS_BEFORE_REST = 2
REST = timedelta(hours=4)


@dataclass(frozen=True)
class DueItem:
    """A review item as the prompt and /review use it: its rule and latest example."""

    id: int
    rule: str
    original: str
    corrected: str
    explanation: str
    category: str
    due: datetime
    state: int
    mistakes: int
    successes: int


@dataclass(frozen=True)
class PatternCount:
    """One of a learner's recurring mistakes: how often made, and when last."""

    rule: str
    mistakes: int
    last_seen: datetime


@dataclass(frozen=True)
class Exercise:
    """What /review asks about one item: "fix" (the learner's original, to correct) or "gap"
    (the corrected form with the changed words blanked), and the answer it takes."""

    item_id: int
    kind: str
    prompt: str
    expected: str


@dataclass(frozen=True)
class ReviewState:
    """A /review under way: the exercise asked, the item ids still to come, the score."""

    exercise: Exercise
    queue: tuple[int, ...]
    asked: int
    right: int
    started_at: datetime


DUE_COLUMNS = (
    ReviewItem.id,
    ReviewItem.rule,
    ReviewItem.original,
    ReviewItem.corrected,
    ReviewItem.explanation,
    ReviewItem.category,
    ReviewItem.due,
    ReviewItem.state,
    ReviewItem.mistakes,
    ReviewItem.successes,
)


def due_query(learner_id: Any, now: Any) -> Select[*tuple[Any, ...]]:
    """The learner's items due at `now`, most overdue first (the index on (learner_id, due));
    either may be a bound parameter, for a statement built once."""
    return (
        select(*DUE_COLUMNS)
        .where(ReviewItem.learner_id == learner_id, ReviewItem.due <= now)
        .order_by(ReviewItem.due, ReviewItem.id)
    )


SESSION_COLUMNS = (
    ReviewSession.item_id.label("session_item_id"),
    ReviewSession.kind,
    ReviewSession.exercise,
    ReviewSession.expected,
    ReviewSession.queue,
    ReviewSession.asked,
    ReviewSession.right,
    ReviewSession.started_at,
)


def review_state(row: Any) -> ReviewState:
    """A /review under way, from a row of SESSION_COLUMNS."""
    exercise = Exercise(row.session_item_id, row.kind, row.exercise, row.expected)
    queue = tuple(i for i in row.queue or () if isinstance(i, int))
    return ReviewState(exercise, queue, row.asked, row.right, row.started_at)


def _for_prompt() -> Any:
    """`Reviews.for_prompt`'s statement: a /review under way, else the items due for the
    prompt (see `Reviews.due_for_prompt`), left-joined to one row so that either comes back;
    its parameters are bound at each call."""
    learner_id = bindparam("learner_id", type_=Id)
    now = bindparam("now", type_=UTCDateTime())
    before = bindparam("before", type_=Id)
    offered: Any = aliased(ReviewItem, name="offered")
    last_offer = (
        select(func.coalesce(func.max(offered.offered_message_id), 0))
        .where(offered.learner_id == learner_id)
        .scalar_subquery()
    )
    in_window = last_offer >= before
    follow_up = and_(
        last_offer == bindparam("previous", type_=Id),
        ReviewItem.offered_message_id == last_offer,
        ReviewItem.offers == 1,
    )
    fresh = or_(
        ReviewItem.offers < OFFERS_BEFORE_REST,
        ReviewItem.offered_at <= bindparam("rested", type_=UTCDateTime()),
    )
    due = (
        due_query(learner_id, now)
        .where(
            ReviewItem.last_message_id < before,
            or_(and_(in_window, follow_up), and_(~in_window, fresh)),
        )
        .limit(bindparam("limit", type_=Integer))
        .subquery("due")
    )
    one = select(literal(1).label("one")).subquery("one")
    return (
        select(*SESSION_COLUMNS, *due.c)
        .select_from(
            one.outerjoin(ReviewSession, ReviewSession.learner_id == learner_id).outerjoin(
                due, ReviewSession.learner_id.is_(None)
            )
        )
        .order_by(due.c.due, due.c.id)
    )


FOR_PROMPT = _for_prompt()
