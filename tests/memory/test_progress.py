"""What /progress reads (memory/review/progress.py) on a fixed clock, and the stored charts
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
from memory.review.progress import Week, progress, week_starts
from memory.store.charts import Charts
from memory.store.message_store import Store
from tests.conftest import unique_user

# A Wednesday, noon: this week began on Monday 23 November.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MONDAY = datetime(2026, 11, 23, tzinfo=UTC)
LEARNING, REVIEW, RELEARNING = 1, 2, 3


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
    """A review item due at `due`, graded at each (when, state after it)."""
    with Session(engine) as session, session.begin():
        item = ReviewItem(
            learner_id=learner_id,
            rule=f"rule {uuid.uuid4().hex}",
            rule_key=uuid.uuid4().hex,
            terms="",
            original="yo es",
            corrected="yo soy",
            state=grades[-1][1],
            due=due,
        )
        session.add(item)
        session.flush()
        session.add_all(
            ReviewLog(
                learner_id=learner_id,
                item_id=item.id,
                rating=1,
                source="mistake",
                message_id=None,
                state=state,
                reviewed_at=when,
            )
            for when, state in grades
        )


def test_weeks_start_on_monday_utc_and_end_with_this_one() -> None:
    starts = week_starts(NOW)
    assert len(starts) == 8
    assert starts[-1] == MONDAY
    assert starts[0] == MONDAY - timedelta(weeks=7)
    assert all(start.weekday() == 0 for start in starts)
    # On Monday at midnight a new week has just begun.
    assert week_starts(MONDAY, 2) == [MONDAY - timedelta(weeks=1), MONDAY]


def test_a_new_learner_has_eight_empty_weeks(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    weeks = progress(store.charts.engine, learner.id, NOW)
    assert weeks == [Week(start.date()) for start in week_starts(NOW)]


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

    weeks = progress(engine, learner.id, NOW)

    assert weeks[-1].start == date(2026, 11, 23)
    assert weeks[-1].corrections == {"grammar": 2, "vocabulary": 1}
    assert weeks[-1].total_corrections == 3
    assert weeks[-1].active_days == 2  # Monday and Wednesday
    assert weeks[-2].corrections == {"spelling": 1}
    assert weeks[-2].active_days == 1
    assert all(w.total_corrections == 0 and w.active_days == 0 for w in weeks[:-2])


def test_learned_and_due_at_each_weeks_end_come_from_the_grades(store: Store) -> None:
    engine = store.charts.engine
    learner = store.learners.learner(unique_user())
    # Made three weeks ago, learned two weeks ago, not graded since, due again tomorrow.
    add_item(engine, learner.id, NOW + timedelta(days=1), (at(21), LEARNING), (at(14), REVIEW))
    # Made last week, still being learned, due now.
    add_item(engine, learner.id, NOW - timedelta(hours=1), (at(6), LEARNING))
    # Learned four weeks ago, forgotten (relearning) this week, due tomorrow.
    add_item(
        engine,
        learner.id,
        NOW + timedelta(days=1),
        (at(35), LEARNING),
        (at(29), REVIEW),
        (at(1), RELEARNING),
    )

    weeks = progress(engine, learner.id, NOW)
    learned = [w.learned for w in weeks]
    due = [w.due for w in weeks]

    # Weeks ending (Mondays) Oct 12 … Nov 23, and now.
    assert learned == [0, 0, 0, 1, 1, 2, 2, 1]
    # Still in learning at a week's end and graded since: due then; not graded since: due
    # by its due date (the second item's, an hour ago, has come only in this week).
    assert due == [0, 0, 1, 0, 1, 0, 0, 1]


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
