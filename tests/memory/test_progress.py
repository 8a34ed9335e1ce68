"""What /progress reads (memory/review/progress.py) on a fixed clock — the weeks since the
learner began, the days practised and the streak, each pattern's stage from its grades — and
the stored charts
(memory/store/charts.py): saved, found by id and nonce, pruned, erased by /forget, and the links'
signing key made once for every process."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from memory.clock import ManualClock
from memory.database.models import Correction, Message
from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import LEARNER, PAM, LearnerGone
from memory.review.progress import Patterns, Week, progress, week_starts
from memory.store.charts import Charts
from memory.store.message_store import Store
from tests.conftest import unique_user

# A Wednesday, noon: this week began on Monday 23 November.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MONDAY = datetime(2026, 11, 23, tzinfo=UTC)
AGAIN, GOOD = 1, 3


def at(days_before_now: float) -> datetime:
    return NOW - timedelta(days=days_before_now)


def add_messages(engine: Engine, learner_id: int, *whens: datetime, role: str = LEARNER) -> None:
    with Session(engine) as session, session.begin():
        session.add_all(
            Message(learner_id=learner_id, role=role, content="hola", tokens=2, created_at=when)
            for when in whens
        )


def add_corrections(engine: Engine, learner_id: int, *made: tuple[str, datetime]) -> None:
    with Session(engine) as session, session.begin():
        session.add_all(
            Correction(
                learner_id=learner_id,
                original="yo es",
                corrected="yo soy",
                category=category,
                created_at=when,
            )
            for category, when in made
        )


def add_item(engine: Engine, learner_id: int, due: datetime, *grades: tuple[datetime, int]) -> None:
    """A review item due at `due`, graded at each (when, rating)."""
    with Session(engine) as session, session.begin():
        item = ReviewItem(
            learner_id=learner_id,
            rule=f"rule {uuid.uuid4().hex}",
            rule_key=uuid.uuid4().hex,
            terms="",
            original="yo es",
            corrected="yo soy",
            state=1,
            due=due,
        )
        session.add(item)
        session.flush()
        session.add_all(
            ReviewLog(
                learner_id=learner_id,
                item_id=item.id,
                rating=rating,
                source="mistake" if rating == AGAIN else "review",
                message_id=None,
                state=1,
                reviewed_at=when,
            )
            for when, rating in grades
        )


def test_weeks_start_on_monday_utc_and_end_with_this_one() -> None:
    starts = week_starts(NOW)
    assert len(starts) == 8
    assert starts[-1] == MONDAY
    assert starts[0] == MONDAY - timedelta(weeks=7)
    assert all(start.weekday() == 0 for start in starts)
    # On Monday at midnight a new week has just begun.
    assert week_starts(MONDAY, 2) == [MONDAY - timedelta(weeks=1), MONDAY]


def test_a_new_learner_has_this_week_only_and_nothing_to_show(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    found = progress(store.charts.engine, learner.id, NOW)
    assert found.weeks == [Week(MONDAY.date())]
    assert found.empty and found.streak == 0 and found.patterns == Patterns()


def test_corrections_by_category_and_active_days_per_week(store: Store) -> None:
    engine = store.charts.engine
    learner = store.learners.learner(unique_user())
    other = store.learners.learner(unique_user())
    add_corrections(
        engine,
        learner.id,
        ("grammar", at(0)),
        ("grammar", at(1)),
        ("vocabulary", at(2)),  # Monday, this week
        ("spelling", at(3)),  # Sunday, last week
        ("grammar", at(100)),  # before the eight weeks
    )
    add_corrections(engine, other.id, ("grammar", at(0)))
    # Learner messages on Monday (twice), Wednesday; last Sunday; Pam's own do not count.
    add_messages(engine, learner.id, at(2), at(2) + timedelta(hours=1), at(0), at(3))
    add_messages(engine, learner.id, at(1), at(4), role=PAM)
    add_messages(engine, other.id, at(1))

    found = progress(engine, learner.id, NOW)
    weeks = found.weeks

    assert len(weeks) == 2  # from the first week with anything in it (100 days ago is out)
    assert weeks[-1].start == date(2026, 11, 23)
    assert weeks[-1].corrections == {"grammar": 2, "vocabulary": 1}
    assert weeks[-1].total_corrections == 3
    assert weeks[-1].active_days == 2  # Monday and Wednesday
    assert weeks[-2].corrections == {"spelling": 1}
    assert weeks[-2].active_days == 1
    assert found.practised == {date(2026, 11, 22), date(2026, 11, 23), date(2026, 11, 25)}
    assert found.week_days[0] == date(2026, 11, 23) and len(found.week_days) == 7
    assert found.streak == 1  # today; Tuesday was missed


def test_the_streak_counts_days_in_a_row_up_to_today_or_yesterday(store: Store) -> None:
    engine = store.charts.engine
    learner = store.learners.learner(unique_user())
    add_messages(engine, learner.id, at(1), at(2), at(3), at(5))
    assert progress(engine, learner.id, NOW).streak == 3  # not yet today: still alive
    add_messages(engine, learner.id, at(0))
    assert progress(engine, learner.id, NOW).streak == 4


def test_three_right_answers_are_three_patterns_getting_there_not_zero_learned(
    store: Store,
) -> None:
    engine = store.charts.engine
    learner = store.learners.learner(unique_user())
    soon = NOW + timedelta(days=1)
    for _ in range(3):  # made yesterday, answered right in /review today
        add_item(engine, learner.id, soon, (at(1), AGAIN), (at(0.1), GOOD))
    found = progress(engine, learner.id, NOW)
    assert found.patterns == Patterns(to_practise=0, getting_there=3, mastered=0, ready=0)
    assert found.patterns.met == 3


def test_each_pattern_counts_by_its_latest_grades(store: Store) -> None:
    engine = store.charts.engine
    learner = store.learners.learner(unique_user())
    later, past = NOW + timedelta(days=1), NOW - timedelta(hours=1)
    # Made three weeks ago, right twice since: mastered two weeks ago.
    add_item(engine, learner.id, later, (at(21), AGAIN), (at(20), GOOD), (at(14), GOOD))
    # Made last week, never right since, due an hour ago: to practise, and ready.
    add_item(engine, learner.id, past, (at(6), AGAIN))
    # Mastered four weeks ago, made again yesterday: to practise again.
    add_item(
        engine, learner.id, later, (at(35), AGAIN), (at(30), GOOD), (at(29), GOOD), (at(1), AGAIN)
    )

    found = progress(engine, learner.id, NOW)

    assert found.patterns == Patterns(to_practise=2, getting_there=0, mastered=1, ready=1)
    # From the week the oldest pattern was made (Oct 19); mastered at each week's end.
    assert found.weeks[0].start == date(2026, 10, 19)
    assert [w.mastered for w in found.weeks] == [0, 1, 1, 2, 2, 1]


def test_a_chart_is_found_by_its_id_and_nonce_only(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    chart_id, nonce = store.charts.save(learner.id, b"\x89PNG...", "two lines")
    assert len(nonce) >= 16
    assert store.charts.get(chart_id, nonce) == (b"\x89PNG...", learner.id)
    assert store.charts.get(chart_id, nonce[:-1] + ("A" if nonce[-1] != "A" else "B")) is None
    assert store.charts.get(chart_id + 1000, nonce) is None
    found = store.charts.find(chart_id)
    assert found is not None and (found.learner_id, found.nonce) == (learner.id, nonce)
    assert store.charts.find(chart_id + 1000) is None


def test_forget_erases_the_charts(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    chart_id, nonce = store.charts.save(learner.id, b"png", "")
    store.learners.forget(learner.id)
    assert store.charts.get(chart_id, nonce) is None
    with pytest.raises(LearnerGone):
        store.charts.save(learner.id, b"png", "")


def test_prune_deletes_the_charts_made_before_the_cutoff(engine: Engine) -> None:
    clock = ManualClock(NOW)
    charts = Charts(engine, clock)
    learner = Store(engine, clock).learners.learner(unique_user())
    old = charts.save(learner.id, b"old", "")
    clock.advance(timedelta(days=1))
    new = charts.save(learner.id, b"new", "")
    assert charts.prune(NOW + timedelta(hours=1)) >= 1
    assert charts.get(*old) is None
    assert charts.get(*new) == (b"new", learner.id)


def test_the_signing_key_is_made_once_and_shared(engine: Engine) -> None:
    web, worker = Charts(engine), Charts(engine)
    key = web.signing_key(None)
    assert len(key) >= 32
    assert worker.signing_key(None) == key == web.signing_key(None)
    assert worker.signing_key("operator-secret") == "operator-secret"
