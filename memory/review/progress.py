"""What /progress shows of a learner's last weeks: corrections per week by category, review
items learned versus due at each week's end, and the days they practised. Weeks start on
Monday, in UTC, and the current one ends now."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from fsrs import State
from sqlalchemy import Engine, Row, literal, select, union_all

from memory.database.models import Correction, Message
from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import LEARNER

WEEKS = 8
REVIEW = State.Review.value
# The rows of the two reads: (kind, category, at) and (item id, due, state, reviewed_at).
Happened = Row[str, str, datetime]
Graded = Row[int, datetime, int, datetime]


@dataclass(frozen=True)
class Week:
    """One week of a learner's practice, from Monday `start` (UTC)."""

    start: date
    corrections: dict[str, int] = field(default_factory=dict)  # by category
    learned: int = 0  # review items in FSRS Review state at the week's end
    due: int = 0  # review items due at the week's end
    active_days: int = 0  # days with a message from the learner

    @property
    def total_corrections(self) -> int:
        """Corrections of every category."""
        return sum(self.corrections.values())


def week_starts(now: datetime, weeks: int = WEEKS) -> list[datetime]:
    """The Mondays at 00:00 UTC that start the `weeks` weeks up to `now`, oldest first."""
    monday = datetime.combine(now.date() - timedelta(days=now.weekday()), time(), now.tzinfo)
    return [monday - timedelta(weeks=weeks - 1 - n) for n in range(weeks)]


def progress(engine: Engine, learner_id: int, now: datetime, weeks: int = WEEKS) -> list[Week]:
    """The learner's last `weeks` weeks as of `now`, oldest first (the last one is this week,
    so far). Two reads: what happened in the weeks (corrections, learner messages), and every
    review item with its grades."""
    starts = week_starts(now, weeks)
    happened, grades = _read(engine, learner_id, starts[0], now)
    corrections: dict[int, Counter[str]] = defaultdict(Counter)
    days: dict[int, set[date]] = defaultdict(set)
    for row in happened:
        n = _week_of(row.at, starts)
        if row.kind == "c":
            corrections[n][row.category or "other"] += 1
        else:
            days[n].add(row.at.date())
    items = _grades_by_item(grades)
    result = []
    for n, start in enumerate(starts):
        end = min(start + timedelta(weeks=1), now)
        learned, due = _items_at(items, end)
        result.append(Week(start.date(), dict(corrections[n]), learned, due, len(days[n])))
    return result


def _read(
    engine: Engine, learner_id: int, since: datetime, now: datetime
) -> tuple[Sequence[Happened], Sequence[Graded]]:
    """The corrections and learner messages since `since`, then each review item's grades
    up to `now` (every one: a state at the window's start may come from an older grade)."""
    happened = union_all(
        select(
            literal("c").label("kind"),
            Correction.category.label("category"),
            Correction.created_at.label("at"),
        ).where(Correction.learner_id == learner_id, Correction.created_at >= since),
        select(literal("m"), literal(""), Message.created_at).where(
            Message.learner_id == learner_id,
            Message.role == LEARNER,
            Message.created_at >= since,
        ),
    )
    grades = (
        select(ReviewItem.id, ReviewItem.due, ReviewLog.state, ReviewLog.reviewed_at)
        .join(ReviewLog, ReviewLog.item_id == ReviewItem.id)
        .where(ReviewItem.learner_id == learner_id, ReviewLog.reviewed_at <= now)
        .order_by(ReviewItem.id, ReviewLog.reviewed_at, ReviewLog.id)
    )
    with engine.connect() as connection:
        return connection.execute(happened).all(), connection.execute(grades).all()


def _week_of(at: datetime, starts: list[datetime]) -> int:
    """The index of the week `at` falls in (`at` is never before the first)."""
    return min((at - starts[0]) // timedelta(weeks=1), len(starts) - 1)


@dataclass(frozen=True)
class _Item:
    due: datetime  # when it is due now
    grades: list[tuple[datetime, int]]  # (when, the card's state after it), in order


def _grades_by_item(rows: Iterable[Graded]) -> list[_Item]:
    items: dict[int, _Item] = {}
    for item_id, due, state, reviewed_at in rows:
        items.setdefault(item_id, _Item(due, [])).grades.append((reviewed_at, state))
    return list(items.values())


def _items_at(items: Iterable[_Item], end: datetime) -> tuple[int, int]:
    """How many items were learned (in Review state) and how many due at `end`.

    Only the current due date is stored, not each past one: an item graded again after `end`
    counts as due at `end` if it was still being learned then (learning steps are short), and
    one not graded since is due if its current due date has come by `end`."""
    learned = due = 0
    for item in items:
        before = [state for at, state in item.grades if at <= end]
        if not before:
            continue  # not made yet
        graded_since = len(before) < len(item.grades)
        learned += before[-1] == REVIEW
        due += (before[-1] != REVIEW) if graded_since else item.due <= end
    return learned, due
