"""Review items on a real database (SQLite and Postgres), with a clock the tests move: each
correction joins its pattern, FSRS schedules it, turns grade it once, prompts ask for what is
due, and /review sessions keep their place."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import fsrs
import pytest
from sqlalchemy import Engine, event, select

from memory.clock import ManualClock
from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import LEARNER, CorrectionRecord, LearnerGone, ReviewOutlook
from memory.review.items import LEARNING_STEPS, RELEARNING_STEPS
from memory.review.reads import REST, DueItem, Exercise, ReviewState
from memory.store.message_store import Store
from tests.conftest import unique_user

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LEARNING, REVIEW, RELEARNING = (fsrs.State.Learning, fsrs.State.Review, fsrs.State.Relearning)

BUENO = CorrectionRecord(
    "Es un bueno libro.",
    "Es un buen libro.",
    "buen before a masculine noun",
    "grammar",
    "bueno → buen before a masculine singular noun",
)
BUENO_AGAIN = CorrectionRecord(
    "Qué bueno día",
    "Qué buen día",
    "apocope",
    "grammar",
    "Use buen instead of bueno before masc. singular nouns",
)
MALO = CorrectionRecord(
    "Un malo día", "Un mal día", "", "grammar", "malo → mal before a masculine singular noun"
)
GRANDE = CorrectionRecord(
    "una grande casa", "una gran casa", "", "grammar", "grande → gran before a singular noun"
)
SER = CorrectionRecord("Yo es Ana", "Yo soy Ana", "ser", "verb", "ser for identity")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def reviewing(engine: Engine, clock: ManualClock) -> Store:
    """A store on the test database whose time is `clock`'s."""
    return Store(engine, clock)


def _learner(store: Store) -> int:
    return store.learners.learner(unique_user("review")).id


def _say(store: Store, learner_id: int, text: str = "hola") -> int:
    """Store one learner message; its id."""
    return store.conversation.add_message(learner_id, LEARNER, text, 3).id


def _only_item(store: Store, learner_id: int) -> ReviewItem:
    with store.inspection.sessions() as session:
        return session.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id)).one()


def _items(store: Store, learner_id: int) -> list[ReviewItem]:
    with store.inspection.sessions() as session:
        query = select(ReviewItem).where(ReviewItem.learner_id == learner_id)
        return list(session.scalars(query.order_by(ReviewItem.id)))


def _logs(store: Store, learner_id: int) -> list[tuple[int, str, int | None, int]]:
    """(rating, source, message id, state after) of every grade of the learner's, in order."""
    with store.inspection.sessions() as session:
        rows = session.execute(
            select(ReviewLog.rating, ReviewLog.source, ReviewLog.message_id, ReviewLog.state)
            .where(ReviewLog.learner_id == learner_id)
            .order_by(ReviewLog.id)
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


def _mistake(store: Store, learner_id: int, *corrections: CorrectionRecord) -> int:
    """A learner message with these corrections, recorded; its id."""
    message_id = _say(store, learner_id)
    store.reviews.record_turn(learner_id, message_id, corrections)
    return message_id


# -- FSRS scheduling ----------------------------------------------------------------------------


def test_a_pattern_made_three_times_then_used_twice_is_learned(
    reviewing: Store, clock: ManualClock
) -> None:
    learner = _learner(reviewing)
    seen: list[tuple[fsrs.State, timedelta]] = []

    def after_each_step() -> None:
        item = _only_item(reviewing, learner)
        seen.append((fsrs.State(item.state), item.due - clock.now))

    for _ in range(3):
        _mistake(reviewing, learner, BUENO)
        after_each_step()
        clock.advance(timedelta(days=1))
    item_id = _only_item(reviewing, learner).id
    for _ in range(2):
        reviewing.reviews.record_turn(learner, _say(reviewing, learner), [], used=[item_id])
        after_each_step()
        clock.advance(timedelta(days=3))

    first_step, second_step = LEARNING_STEPS
    assert seen[:4] == [(LEARNING, first_step)] * 3 + [(LEARNING, second_step)]
    state, interval = seen[4]
    assert state == REVIEW
    assert interval >= timedelta(days=1)
    assert interval % timedelta(days=1) == timedelta(0)  # FSRS gives whole days, no fuzz

    item = reviewing.reviews.item(learner, item_id)
    assert item is not None
    assert (item.mistakes, item.successes, item.state) == (3, 2, REVIEW.value)
    assert [(rating, source, state) for rating, source, _, state in _logs(reviewing, learner)] == [
        (fsrs.Rating.Again.value, "mistake", LEARNING.value),
        (fsrs.Rating.Again.value, "mistake", LEARNING.value),
        (fsrs.Rating.Again.value, "mistake", LEARNING.value),
        (fsrs.Rating.Good.value, "used", LEARNING.value),
        (fsrs.Rating.Good.value, "used", REVIEW.value),
    ]

    # Made again once learned: a lapse, back later in the same chat.
    clock.advance(timedelta(days=30))
    _mistake(reviewing, learner, BUENO)
    item = reviewing.reviews.item(learner, item_id)
    assert item is not None
    assert item.state == RELEARNING.value
    assert item.due == clock.now + RELEARNING_STEPS[0]


def test_the_same_turns_give_the_same_schedule(engine: Engine) -> None:
    """No fuzz: two learners with the same history have the same due dates."""
    dues = []
    for _ in range(2):
        clock = ManualClock(START)
        store = Store(engine, clock)
        learner = _learner(store)
        _mistake(store, learner, BUENO)
        item_id = _only_item(store, learner).id
        for _ in range(3):
            clock.advance(timedelta(days=2))
            store.reviews.record_turn(learner, _say(store, learner), [], used=[item_id])
        dues.append(_only_item(store, learner).due)
    assert dues[0] == dues[1]


def test_missed_grades_again_and_counts_a_mistake(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    item_id = _only_item(reviewing, learner).id
    clock.advance(timedelta(days=1))
    missed_in = _say(reviewing, learner)
    reviewing.reviews.record_turn(learner, missed_in, [], missed=[item_id])
    item = _only_item(reviewing, learner)
    assert (item.mistakes, item.successes, item.last_message_id) == (2, 0, missed_in)
    assert item.due == clock.now + LEARNING_STEPS[0]
    assert _logs(reviewing, learner)[-1] == (fsrs.Rating.Again.value, "missed", missed_in, 1)


# -- grouping -----------------------------------------------------------------------------------


def test_two_wordings_of_one_rule_land_in_one_item(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    _mistake(reviewing, learner, BUENO_AGAIN)
    (item,) = _items(reviewing, learner)
    assert item.mistakes == 2
    # The latest wording and example are the ones shown.
    assert (item.rule, item.original, item.corrected, item.explanation) == (
        BUENO_AGAIN.rule,
        BUENO_AGAIN.original,
        BUENO_AGAIN.corrected,
        BUENO_AGAIN.explanation,
    )


def test_a_near_wording_of_a_rule_joins_its_item(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    near = CorrectionRecord(
        "Un bueno amigo",
        "Un buen amigo",
        "",
        "grammar",
        "bueno shortens to buen before a masculine singular noun (apocope)",
    )
    _mistake(reviewing, learner, near)
    (item,) = _items(reviewing, learner)
    assert item.mistakes == 2
    assert item.rule == near.rule


def test_different_rules_sharing_a_frame_stay_apart(reviewing: Store) -> None:
    learner = _learner(reviewing)
    rules = (BUENO, MALO, GRANDE, SER)
    for correction in rules:
        _mistake(reviewing, learner, correction)
    assert [item.rule for item in _items(reviewing, learner)] == [c.rule for c in rules]


def test_rule_less_corrections_group_by_their_change(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, CorrectionRecord("Yo es Ana", "Yo soy Ana", category="verb"))
    _mistake(reviewing, learner, CorrectionRecord("y es alto", "y soy alto", category="verb"))
    _mistake(reviewing, learner, CorrectionRecord("Fui playa", "Fui a la playa"))
    items = _items(reviewing, learner)
    assert [(item.rule, item.mistakes) for item in items] == [("es → soy", 2), ("… → a la", 1)]


def test_a_rule_less_correction_of_a_named_change_joins_the_named_item(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    _mistake(reviewing, learner, CorrectionRecord("Qué bueno día", "Qué buen día"))
    (item,) = _items(reviewing, learner)
    assert item.mistakes == 2


def test_a_correction_with_nothing_to_name_groups_by_its_category(reviewing: Store) -> None:
    """A rule of nothing but punctuation is none: the change names it; a change of nothing
    but punctuation, the category."""
    learner = _learner(reviewing)
    _mistake(reviewing, learner, CorrectionRecord("hola", "¡Hola!", "", "punctuation", "!!"))
    _mistake(reviewing, learner, CorrectionRecord("?", "¿?", "", "punctuation", ""))
    _mistake(reviewing, learner, CorrectionRecord("!", "¡!", "", "punctuation", "the"))
    items = [(item.rule, item.rule_key, item.mistakes) for item in _items(reviewing, learner)]
    assert items == [("hola → ¡Hola!", "hola", 1), ("! → ¡!", "punctuat", 2)]


def test_same_category_is_preferred_then_the_closest(reviewing: Store) -> None:
    """A wording near two items joins the one of its own category; of any category, the
    more similar one."""
    learner = _learner(reviewing)

    def correction(rule: str, category: str) -> CorrectionRecord:
        return CorrectionRecord("las casa", "las casas", "", category, rule)

    _mistake(
        reviewing, learner, correction("adjective agreement feminine plural article", "grammar")
    )
    _mistake(
        reviewing,
        learner,
        correction("adjective agreement feminine plural noun ending", "spelling"),
    )
    assert len(_items(reviewing, learner)) == 2
    near_both = "adjective agreement feminine plural noun"
    _mistake(reviewing, learner, correction(near_both, "grammar"))
    _mistake(reviewing, learner, correction(near_both, "vocabulary"))
    assert [item.mistakes for item in _items(reviewing, learner)] == [2, 2]


def test_two_corrections_of_one_pattern_in_one_message_grade_it_once(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO, BUENO_AGAIN, SER)
    assert [item.mistakes for item in _items(reviewing, learner)] == [1, 1]
    assert len(_logs(reviewing, learner)) == 2


def test_a_model_answer_of_any_size_fits_the_columns(reviewing: Store) -> None:
    learner = _learner(reviewing)
    huge = CorrectionRecord("a" * 5000, "b" * 5000, "c" * 5000, "x" * 300, "rule " * 300)
    _mistake(reviewing, learner, huge)
    (item,) = _items(reviewing, learner)
    assert len(item.rule) <= 200 and len(item.rule_key) <= 200 and len(item.category) <= 40


# -- idempotency and isolation -----------------------------------------------------------------


def test_a_turn_recorded_twice_grades_once(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    message = _say(reviewing, learner)
    for _ in range(2):
        reviewing.reviews.record_turn(learner, message, [BUENO])
    item = _only_item(reviewing, learner)
    assert (item.mistakes, len(_logs(reviewing, learner))) == (1, 1)

    clock.advance(timedelta(hours=1))
    later = _say(reviewing, learner)
    for _ in range(2):
        reviewing.reviews.record_turn(learner, later, [], used=[item.id], offered=[item.id])
    again = _only_item(reviewing, learner)
    assert (again.successes, again.step, again.offers) == (1, 1, 0)
    assert len(_logs(reviewing, learner)) == 2


def test_the_same_turn_recorded_at_once_grades_once(engine: Engine) -> None:
    """Two runs of one turn racing (a lease expired under a slow worker): one grade, and the
    run that loses the unique constraint loses quietly."""
    store = Store(engine, ManualClock(START))
    learner = _learner(store)
    message = _say(store, learner)
    start = threading.Barrier(4)

    def record() -> None:
        start.wait()
        store.reviews.record_turn(learner, message, [BUENO])

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(record) for _ in range(4)]:
            future.result()
    assert len(_items(store, learner)) == 1
    assert len(_logs(store, learner)) == 1


def test_other_learners_item_ids_are_ignored(reviewing: Store) -> None:
    learner, other = _learner(reviewing), _learner(reviewing)
    _mistake(reviewing, other, BUENO)
    theirs = _only_item(reviewing, other)
    message = _say(reviewing, learner)
    reviewing.reviews.record_turn(
        learner, message, [], used=[theirs.id], missed=[theirs.id], offered=[theirs.id, 10**9]
    )
    reviewing.reviews.grade(learner, theirs.id, True, message)
    after = _only_item(reviewing, other)
    assert (after.mistakes, after.successes, after.offers, after.due) == (1, 0, 0, theirs.due)
    assert _logs(reviewing, learner) == []
    assert reviewing.reviews.item(learner, theirs.id) is None


def test_a_forgotten_learner_raises_learner_gone(reviewing: Store) -> None:
    learner = _learner(reviewing)
    message = _mistake(reviewing, learner, BUENO)
    item_id = _only_item(reviewing, learner).id
    reviewing.learners.forget(learner)
    with pytest.raises(LearnerGone):
        reviewing.reviews.record_turn(learner, message, [SER])
    with pytest.raises(LearnerGone):
        reviewing.reviews.record_turn(learner, message, [], used=[item_id])
    with pytest.raises(LearnerGone):
        reviewing.reviews.grade(learner, item_id, True, None)
    with pytest.raises(LearnerGone):
        reviewing.reviews.start_session(learner, Exercise(item_id, "fix", "a", "b"), [])


def test_forget_during_a_turn_leaves_nothing_and_raises_learner_gone(
    reviewing: Store, engine: Engine
) -> None:
    """/forget commits after record_turn found the learner and before it wrote: the turn's
    items and grades are not written, and it says the learner is gone."""
    user = unique_user("review")
    learner = reviewing.learners.learner(user).id
    message = _say(reviewing, learner)
    forgot: list[bool] = []

    def forget_first(_c: Any, _cu: Any, statement: str, *_: Any) -> None:
        if not forgot and "FROM review_items" in statement:
            forgot.append(True)
            reviewing.learners.forget(learner)  # on another pooled connection

    event.listen(engine, "before_cursor_execute", forget_first)
    try:
        with pytest.raises(LearnerGone):
            reviewing.reviews.record_turn(learner, message, [BUENO, SER])
    finally:
        event.remove(engine, "before_cursor_execute", forget_first)
    assert forgot
    counts = reviewing.inspection.rows_about(learner, user)
    assert counts == dict.fromkeys(counts, 0), counts


def test_forget_leaves_no_review_rows(reviewing: Store) -> None:
    learner, bystander = _learner(reviewing), _learner(reviewing)
    for who in (learner, bystander):
        _mistake(reviewing, who, BUENO, SER)
        item_id = _items(reviewing, who)[0].id
        reviewing.reviews.start_session(who, Exercise(item_id, "fix", "un bueno", "un buen"), [])
    reviewing.learners.forget(learner)
    counts = reviewing.inspection.rows_about(learner, "nobody")
    assert {t: counts[t] for t in ("review_items", "review_logs", "review_sessions")} == {
        "review_items": 0,
        "review_logs": 0,
        "review_sessions": 0,
    }
    assert len(_items(reviewing, bystander)) == 2
    assert reviewing.reviews.session(bystander) is not None


# -- what is due --------------------------------------------------------------------------------


def test_due_for_prompt_waits_for_the_window_and_orders_by_overdue(
    reviewing: Store, clock: ManualClock
) -> None:
    learner = _learner(reviewing)
    first = _mistake(reviewing, learner, BUENO)
    clock.advance(timedelta(minutes=5))
    second = _mistake(reviewing, learner, SER)
    clock.advance(timedelta(minutes=5))
    third = _mistake(reviewing, learner, MALO)
    assert reviewing.reviews.due_for_prompt(learner, third + 1) == []  # not due yet

    clock.advance(LEARNING_STEPS[0])
    rules = [item.rule for item in reviewing.reviews.due_for_prompt(learner, third + 1, limit=5)]
    assert rules == [BUENO.rule, SER.rule, MALO.rule]  # most overdue first
    # Only what has left the window (the oldest message in it is `second`).
    assert [i.rule for i in reviewing.reviews.due_for_prompt(learner, second)] == [BUENO.rule]
    assert reviewing.reviews.due_for_prompt(learner, first) == []
    assert len(reviewing.reviews.due_for_prompt(learner, third + 1)) == 2  # the default limit
    assert [i.rule for i in reviewing.reviews.due(learner)] == rules


def test_due_for_prompt_is_one_indexed_query(reviewing: Store, engine: Engine) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    statements: list[tuple[str, Any]] = []

    def seen(_connection: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        reviewing.reviews.due_for_prompt(learner, 10**9)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(statements) == 1
    statement, parameters = statements[0]
    assert "LIMIT" in statement
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            assert "ix_review_items_learner_id_due" in " ".join(map(str, plan))


def test_an_item_offered_twice_rests(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    clock.advance(LEARNING_STEPS[0])
    item_id = _only_item(reviewing, learner).id
    window = 10**9

    for _ in range(2):
        (due,) = reviewing.reviews.due_for_prompt(learner, window)
        reviewing.reviews.record_turn(learner, _say(reviewing, learner), [], offered=[due.id])
        clock.advance(timedelta(minutes=2))
    assert reviewing.reviews.due_for_prompt(learner, window) == []  # resting
    assert [i.id for i in reviewing.reviews.due(learner)] == [item_id]  # though still due

    clock.advance(REST)
    assert [i.id for i in reviewing.reviews.due_for_prompt(learner, window)] == [item_id]
    reviewing.reviews.record_turn(learner, _say(reviewing, learner), [], offered=[item_id])
    assert reviewing.reviews.due_for_prompt(learner, window) == []  # rests again, a REST

    # A grade ends the run of offers (and an item graded in a turn is not offered in it).
    clock.advance(REST)
    message = _say(reviewing, learner)
    reviewing.reviews.record_turn(learner, message, [], used=[item_id], offered=[item_id])
    item = _only_item(reviewing, learner)
    assert (item.offers, item.successes) == (0, 1)


def test_the_context_read_tells_when_review_could_offer_something(
    reviewing: Store, clock: ManualClock
) -> None:
    """A turn's read of its context says whether a /review is under way and when the
    learner's first item falls due (another learner's items and sessions aside): with neither
    due, review's own read is skipped."""
    learner, other = _learner(reviewing), _learner(reviewing)

    def outlook() -> ReviewOutlook | None:
        return reviewing.conversation.context(learner).review

    assert outlook() == ReviewOutlook(session=False, next_due=None)
    assert outlook().nothing_for_prompt(clock())  # type: ignore[union-attr]
    _mistake(reviewing, other, SER)
    clock.advance(timedelta(minutes=10))
    _mistake(reviewing, learner, BUENO)
    assert outlook() == ReviewOutlook(False, clock() + LEARNING_STEPS[0])
    assert outlook().nothing_for_prompt(clock())  # type: ignore[union-attr]
    clock.advance(LEARNING_STEPS[0])
    assert not outlook().nothing_for_prompt(clock())  # type: ignore[union-attr]

    bueno = _only_item(reviewing, learner).id
    reviewing.reviews.start_session(learner, Exercise(bueno, "fix", "un bueno", "un buen"), [])
    seen = outlook()
    assert seen is not None and seen.session
    assert not ReviewOutlook(True, None).nothing_for_prompt(clock())
    assert reviewing.conversation.context(other).review == ReviewOutlook(
        False, START + LEARNING_STEPS[0]
    )


def test_next_due_and_item(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    assert reviewing.reviews.next_due(learner) is None
    _mistake(reviewing, learner, BUENO)
    clock.advance(timedelta(minutes=10))
    _mistake(reviewing, learner, SER)
    assert reviewing.reviews.next_due(learner) == START + LEARNING_STEPS[0]
    bueno = _items(reviewing, learner)[0]
    assert reviewing.reviews.item(learner, bueno.id) == DueItem(
        id=bueno.id,
        rule=BUENO.rule,
        original=BUENO.original,
        corrected=BUENO.corrected,
        explanation=BUENO.explanation,
        category="grammar",
        due=START + LEARNING_STEPS[0],
        state=LEARNING.value,
        mistakes=1,
        successes=0,
    )
    assert reviewing.reviews.item(learner, 10**9) is None


def test_items_due_by_a_moment_are_counted(reviewing: Store, clock: ManualClock) -> None:
    """What "Next review: 2 items tomorrow" counts: the learner's items due by then."""
    learner, other = _learner(reviewing), _learner(reviewing)
    assert reviewing.reviews.due_by(learner, START + timedelta(days=1)) == 0
    _mistake(reviewing, learner, BUENO)
    clock.advance(timedelta(minutes=10))
    _mistake(reviewing, learner, SER)
    _mistake(reviewing, other, MALO)
    first = START + LEARNING_STEPS[0]
    assert reviewing.reviews.due_by(learner, first - timedelta(seconds=1)) == 0
    assert reviewing.reviews.due_by(learner, first) == 1
    assert reviewing.reviews.due_by(learner, first + timedelta(minutes=10)) == 2


def test_patterns_most_frequent_then_most_recent(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    assert reviewing.reviews.patterns(learner) == []
    for correction in (BUENO, SER, MALO, SER, GRANDE, BUENO, MALO):
        clock.advance(timedelta(hours=1))
        _mistake(reviewing, learner, correction)
    found = reviewing.reviews.patterns(learner)
    assert [(p.rule, p.mistakes) for p in found] == [
        (MALO.rule, 2),  # made last at 7h
        (BUENO.rule, 2),  # 6h
        (SER.rule, 2),  # 4h
    ]
    assert found[0].last_seen == START + timedelta(hours=7)
    assert len(reviewing.reviews.patterns(learner, limit=10)) == 4


# -- /review sessions --------------------------------------------------------------------------


def test_a_session_starts_moves_on_and_ends(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO, SER, MALO)
    bueno, ser, malo = (item.id for item in _items(reviewing, learner))
    assert reviewing.reviews.session(learner) is None

    first = Exercise(bueno, "fix", "Es un bueno libro.", "Es un buen libro.")
    reviewing.reviews.start_session(learner, first, [ser, malo])
    assert reviewing.reviews.session(learner) == ReviewState(first, (ser, malo), 1, 0, START)

    clock.advance(timedelta(minutes=1))
    second = Exercise(ser, "gap", "Yo ___ Ana", "soy")
    reviewing.reviews.next_exercise(learner, True, second)
    assert reviewing.reviews.session(learner) == ReviewState(second, (malo,), 2, 1, START)

    third = Exercise(malo, "fix", "Un malo día", "Un mal día")
    reviewing.reviews.next_exercise(learner, False, third)
    assert reviewing.reviews.session(learner) == ReviewState(third, (), 3, 1, START)

    reviewing.reviews.next_exercise(learner, None, None)
    assert reviewing.reviews.session(learner) is None
    reviewing.reviews.next_exercise(learner, True, second)  # no session: nothing happens
    assert reviewing.reviews.session(learner) is None


def test_a_new_session_replaces_one_under_way_and_end_ends_it(reviewing: Store) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO, SER)
    bueno, ser = (item.id for item in _items(reviewing, learner))
    reviewing.reviews.start_session(learner, Exercise(bueno, "fix", "a", "b"), [ser])
    again = Exercise(ser, "gap", "Yo ___", "soy")
    reviewing.reviews.start_session(learner, again, [])
    assert reviewing.reviews.session(learner) == ReviewState(again, (), 1, 0, START)
    reviewing.reviews.end_session(learner)
    reviewing.reviews.end_session(learner)
    assert reviewing.reviews.session(learner) is None


def test_a_session_is_only_about_the_learners_own_items(reviewing: Store) -> None:
    learner, other = _learner(reviewing), _learner(reviewing)
    _mistake(reviewing, other, BUENO)
    theirs = _only_item(reviewing, other).id
    with pytest.raises(ValueError, match="not the learner's"):
        reviewing.reviews.start_session(learner, Exercise(theirs, "fix", "a", "b"), [])


def test_a_review_answer_grades_once_per_message(reviewing: Store, clock: ManualClock) -> None:
    learner = _learner(reviewing)
    _mistake(reviewing, learner, BUENO)
    item_id = _only_item(reviewing, learner).id
    clock.advance(LEARNING_STEPS[0])
    answer = _say(reviewing, learner, "Es un buen libro")
    reviewing.reviews.grade(learner, item_id, True, answer)
    reviewing.reviews.grade(learner, item_id, True, answer)
    wrong = _say(reviewing, learner, "Es un bueno libro")
    reviewing.reviews.grade(learner, item_id, False, wrong)
    assert [(rating, source) for rating, source, _, _ in _logs(reviewing, learner)][1:] == [
        (fsrs.Rating.Good.value, "review"),
        (fsrs.Rating.Again.value, "review"),
    ]
    item = _only_item(reviewing, learner)
    assert (item.mistakes, item.successes) == (1, 1)  # a wrong exercise is no mistake made
