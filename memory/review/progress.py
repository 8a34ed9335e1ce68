"""What /progress shows of a learner: the days they practised (this week's, and their streak),
the mistake patterns Pam noticed and how far each has come, and — once there is more than one
— their weeks: corrections by category, mastered patterns and days practised in each. Weeks
start on Monday, in UTC, and the current one ends now.

A pattern (a review item) counts by its latest grades, the way a learner would count it: made
(or missed) last time, it is one to practise; right last time, it is "getting there"; right
twice in a row since the last slip, it is "mastered". Three right answers in /review are three
patterns getting there — never "0 learned" because a scheduler's state has not moved yet."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from fsrs import Rating
from sqlalchemy import Engine, Row, literal, select, union_all

from memory.config import PROGRESS_WEEKS
from memory.database.models import Correction, Message
from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import LEARNER

WEEKS = PROGRESS_WEEKS  # the most weeks the chart shows
GOOD = Rating.Good.value
MASTERED_AFTER = 2  # right this many times in a row since the last slip
# The rows of the two reads: (kind, category, at) and (item id, due, rating, reviewed_at).
Happened = Row[str, str, datetime]
Graded = Row[int, datetime, int, datetime]


@dataclass(frozen=True)
class Week:
    """One week of a learner's practice, from Monday `start` (UTC)."""

    start: date
    corrections: dict[str, int] = field(default_factory=dict)  # by category
    mastered: int = 0  # patterns mastered at the week's end
    active_days: int = 0  # days with a message from the learner

    @property
    def total_corrections(self) -> int:
        """Corrections of every category."""
        return sum(self.corrections.values())


@dataclass(frozen=True)
class Patterns:
    """The learner's mistake patterns now, each in one of three stages, and how many are
    ready to practise (due for review)."""

    to_practise: int = 0  # made or missed last time
    getting_there: int = 0  # right last time
    mastered: int = 0  # right MASTERED_AFTER times in a row since the last slip
    ready: int = 0  # due now: /review has them

    @property
    def met(self) -> int:
        """Every pattern Pam has noticed."""
        return self.to_practise + self.getting_there + self.mastered


@dataclass(frozen=True)
class Progress:
    """What the chart and its caption show, as of `now`."""

    now: datetime
    weeks: list[Week]  # since the learner's first week in the window, oldest first (≥ 1)
    practised: frozenset[date]  # the days with a learner message in the window
    patterns: Patterns = Patterns()

    @property
    def this_week(self) -> Week:
        return self.weeks[-1]

    @property
    def week_days(self) -> list[date]:
        """This week's seven days, Monday first."""
        return [self.this_week.start + timedelta(days=n) for n in range(7)]

    @property
    def days_this_week(self) -> int:
        """How many of this week's days were practised."""
        return sum(day in self.practised for day in self.week_days)

    @property
    def streak(self) -> int:
        """Days in a row practised up to today (or up to yesterday, while today is young)."""
        day = self.now.date()
        if day not in self.practised:
            day -= timedelta(days=1)
        count = 0
        while day in self.practised:
            count += 1
            day -= timedelta(days=1)
        return count

    @property
    def empty(self) -> bool:
        """Nothing to show yet: no message, no correction, no pattern."""
        return not self.practised and not self.patterns.met and not self.this_week.corrections


def week_starts(now: datetime, weeks: int = WEEKS) -> list[datetime]:
    """The Mondays at 00:00 UTC that start the `weeks` weeks up to `now`, oldest first."""
    monday = datetime.combine(now.date() - timedelta(days=now.weekday()), time(), now.tzinfo)
    return [monday - timedelta(weeks=weeks - 1 - n) for n in range(weeks)]


def progress(engine: Engine, learner_id: int, now: datetime, weeks: int = WEEKS) -> Progress:
    """The learner's progress as of `now`: their last weeks (at most `weeks`, from the first
    with anything in it; this week at least), the days practised, their patterns. Two reads:
    what happened in the weeks (corrections, learner messages), and every review item's
    grades."""
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
        mastered = sum(_stage(item, end) == "mastered" for item in items)
        result.append(Week(start.date(), dict(corrections[n]), mastered, len(days[n])))
    first = next(
        (n for n, w in enumerate(result) if w.corrections or w.active_days or w.mastered),
        len(result) - 1,
    )
    if items:  # a pattern made before the window shows from the window's start
        first = min([first] + [_week_of(max(i.grades[0][0], starts[0]), starts) for i in items])
    practised = frozenset(day for found in days.values() for day in found)
    return Progress(now, result[first:], practised, _patterns(items, now))


def _read(
    engine: Engine, learner_id: int, since: datetime, now: datetime
) -> tuple[Sequence[Happened], Sequence[Graded]]:
    """The corrections and learner messages since `since`, then each review item's grades
    up to `now` (every one: a stage at the window's start may come from an older grade)."""
    happened = union_all(
        select(
            literal("c").label("kind"),
            Correction.category.label("category"),
            Correction.created_at.label("at"),
        ).where(
            Correction.learner_id == learner_id,
            Correction.created_at >= since,
            Correction.created_at <= now,
        ),
        select(literal("m"), literal(""), Message.created_at).where(
            Message.learner_id == learner_id,
            Message.role == LEARNER,
            Message.created_at >= since,
            Message.created_at <= now,
        ),
    )
    grades = (
        select(ReviewItem.id, ReviewItem.due, ReviewLog.rating, ReviewLog.reviewed_at)
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
    grades: list[tuple[datetime, int]]  # (when, rating), in order


def _grades_by_item(rows: Iterable[Graded]) -> list[_Item]:
    items: dict[int, _Item] = {}
    for item_id, due, rating, reviewed_at in rows:
        items.setdefault(item_id, _Item(due, [])).grades.append((reviewed_at, rating))
    return list(items.values())


def _stage(item: _Item, end: datetime) -> str | None:
    """The item's stage at `end` from its grades until then: "to practise", "getting there"
    or "mastered"; None before it was made."""
    right = 0
    graded = False
    for at, rating in item.grades:
        if at > end:
            break
        graded = True
        right = right + 1 if rating >= GOOD else 0
    if not graded:
        return None
    if right >= MASTERED_AFTER:
        return "mastered"
    return "getting there" if right else "to practise"


def _patterns(items: Iterable[_Item], now: datetime) -> Patterns:
    stages: Counter[str | None] = Counter()
    ready = 0
    for item in items:
        stages[_stage(item, now)] += 1
        ready += item.due <= now
    return Patterns(stages["to practise"], stages["getting there"], stages["mastered"], ready)
