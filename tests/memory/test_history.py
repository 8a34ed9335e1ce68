"""Chat retention (PAM_CHAT_RETENTION_DAYS): what the summary has folded and the profile has
read is pruned once past the cutoff, with its corrections; usage rolls up by month with every
sum the ledger and the budgets read unchanged; review grades shrink to what review and
/progress read, which show the same. Real SQLite and Postgres, real turns on a manual clock;
the cutoff is passed in, never waited for."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, event, func, select, update

from bot.settings import ServiceSettings
from bot.turn import taps
from bot.worker.retention import Retention
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.config import MIN_CHAT_RETENTION_DAYS
from memory.database.models import Correction, Message, Profile, Summary, Usage
from memory.database.models_recall import RecallEntry
from memory.database.models_review import ReviewItem, ReviewLog, ReviewPending
from memory.database.records import ActivityWindow
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.review.progress import progress
from memory.store.history import History
from memory.store.ledger import Ledger
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.review import BUEN, SER, review_pam, say, with_due_mistakes
from tests.support import forget
from webhooks.settings import Settings

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
RETENTION = timedelta(days=90)
WINDOW = 10  # the verbatim window: the last 10 messages are never folded
MISTAKE = {"original": "yo es", "corrected": "yo soy", "explanation": "ser", "rule": "ser: soy"}


def corrected(messages: Sequence[Any]) -> str:
    """The fake's reply: a correction of every learner message, asking after its number (a
    reply that repeats Pam's previous one is no reply)."""
    latest = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    number = latest.rsplit(" ", 1)[-1].rstrip(".")
    mistake = {**MISTAKE, "original": f"yo es en el parque con mi amigo número {number}"}
    mistake["corrected"] = f"estuve en el parque con mi amigo número {number}"
    return reply_json(f"¡Qué bien! ¿Y qué pasó con el {number}?", [mistake])


def chatting_pam(settings: Settings, engine: Engine, clock: ManualClock) -> Pam:
    """Pam on `clock` folding at every turn all but the last WINDOW messages, learning the
    profile every 5 learner messages, correcting every learner message."""
    model = FakeChatModel()
    model.defaults["reply"] = corrected
    return review_pam(settings, engine, model, clock, window_messages=WINDOW)


def chat(pam: Pam, clock: ManualClock, user: str, turns: int) -> None:
    """`turns` learner messages, an hour apart."""
    for n in range(turns):
        say(pam, user, f"Ayer yo es en el parque con mi amigo número {n}.")
        clock.advance(timedelta(hours=1))


def rows(engine: Engine, model: Any, learner_id: int) -> list[Any]:
    with engine.connect() as connection:
        return connection.execute(
            select(model).where(model.learner_id == learner_id).order_by(model.id)
        ).all()


def watermarks(engine: Engine, learner_id: int) -> tuple[int, int]:
    with engine.connect() as connection:
        summary = connection.scalar(
            select(Summary.watermark).where(Summary.learner_id == learner_id)
        )
        profile = connection.scalar(
            select(Profile.watermark).where(Profile.learner_id == learner_id)
        )
    return int(summary or 0), int(profile or 0)


@contextmanager
def deleted_messages(engine: Engine) -> Iterator[list[int]]:
    """The rows each DELETE of messages on `engine` removed, in order."""
    counts: list[int] = []

    def record(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM MESSAGES"):
            counts.append(cursor.rowcount)

    event.listen(engine, "after_cursor_execute", record)
    try:
        yield counts
    finally:
        event.remove(engine, "after_cursor_execute", record)


@pytest.fixture
def clock(engine: Engine) -> ManualClock:
    """A clock later than every message already stored (the test Postgres is shared by the
    session's tests): message ids grow with time, as retention's walk in id order expects."""
    with engine.connect() as connection:
        latest = connection.scalar(select(func.max(Message.created_at)))
    return ManualClock(START if latest is None else max(START, latest + timedelta(days=1)))


def test_prune_deletes_folded_and_read_messages_past_the_cutoff_and_keeps_the_rest(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("old")
    say(pam, user, "/language Spanish English")
    chat(pam, clock, user, 30)
    clock.advance(RETENTION)
    chat(pam, clock, user, 4)  # after the cutoff: kept whatever the watermarks say
    learner = learner_of(pam, user).id
    cutoff = clock() - RETENTION
    summary_mark, profile_mark = watermarks(engine, learner)
    assert summary_mark and profile_mark, "the chat was folded and read"
    before = rows(engine, Message, learner)
    recall_before = len(rows(engine, RecallEntry, learner))
    corrections_before = rows(engine, Correction, learner)

    pruned = pam.store.history.prune(cutoff)

    # Pruning is the whole database's: on a Postgres schema other tests share, it may also
    # take their old chat, so its counts are at least this learner's.
    bound = min(summary_mark, profile_mark)
    gone = [m.id for m in before if m.id <= bound and m.created_at < cutoff]
    kept = [m.id for m in before if m.id not in gone]
    assert gone and pruned.messages >= len(gone)
    assert [m.id for m in rows(engine, Message, learner)] == kept
    assert [m.id for m in before[-WINDOW:]] == kept[-WINDOW:], "the last 10 stay verbatim"
    assert all(m.created_at >= cutoff for m in before if m.id > bound and m.id in kept[:-WINDOW])
    # Their corrections went with them; the others' stayed.
    assert pruned.corrections > 0
    assert rows(engine, Correction, learner) == [
        c for c in corrections_before if c.message_id in kept
    ]
    assert pruned.corrections >= len(corrections_before) - len(rows(engine, Correction, learner))
    # Recall still finds them: its entries were written when they were folded.
    assert len(rows(engine, RecallEntry, learner)) == recall_before
    # The reply prompt reads the same unfolded messages as before.
    assert [m.id for m in pam.store.conversation.context(learner).messages] == [
        m.id for m in before if m.id > summary_mark
    ]
    after = rows(engine, Message, learner)
    pam.store.history.prune(cutoff)
    assert rows(engine, Message, learner) == after, "a second round finds nothing of theirs"


def test_prune_keeps_what_the_profile_has_not_read_or_the_review_job_not_graded(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("unread")
    say(pam, user, "/language Spanish English")
    chat(pam, clock, user, 24)
    learner = learner_of(pam, user).id
    before = rows(engine, Message, learner)
    learner_ids = [m.id for m in before if m.role == "learner"]
    # The profile job fell behind (its model failed, say): it read up to the 8th message.
    read_upto = learner_ids[7]
    pending = learner_ids[3]  # and a grade of the 4th is still to write
    with engine.begin() as connection:
        connection.execute(
            update(Profile).where(Profile.learner_id == learner).values(watermark=read_upto)
        )
        connection.execute(
            ReviewPending.__table__.insert().values(
                learner_id=learner,
                message_id=pending,
                used=[],
                missed=[],
                offered=[],
                created_at=clock(),
            )
        )
    clock.advance(RETENTION + timedelta(days=1))

    pam.store.history.prune(clock() - RETENTION)

    left = [m.id for m in rows(engine, Message, learner)]
    assert left == [m.id for m in before if m.id > read_upto or m.id == pending]


def test_prune_goes_in_batches(settings: Settings, engine: Engine, clock: ManualClock) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("batches")
    say(pam, user, "/language Spanish English")
    chat(pam, clock, user, 20)
    learner = learner_of(pam, user).id
    clock.advance(RETENTION * 2)
    before = len(rows(engine, Message, learner))

    with deleted_messages(engine) as counts:
        messages, _ = History(engine, clock).prune_messages(clock() - RETENTION, batch=4)

    assert messages == before - WINDOW
    assert counts and max(counts) <= 4
    assert sum(counts) == messages


def test_forget_after_pruning_leaves_nothing(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("forget")
    say(pam, user, "/language Spanish English")
    chat(pam, clock, user, 20)
    learner = learner_of(pam, user).id
    clock.advance(RETENTION * 2)
    assert pam.store.history.prune(clock() - RETENTION).messages

    forget(pam, user)

    assert not any(pam.store.inspection.rows_about(learner, user).values())


def test_a_tap_under_a_pruned_reply_finds_no_message(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("tap")
    say(pam, user, "/language Spanish English")
    first = say(pam, user, "Ayer yo es en el parque con mi amigo número 0.")
    translate = next(b.command for b in first.buttons if b.command.startswith("/translate "))
    chat(pam, clock, user, 16)
    clock.advance(RETENTION * 2)
    assert pam.store.history.prune(clock() - RETENTION).messages

    answer = say(pam, user, translate)

    assert answer.replies == [str(taps.NOT_FOUND)]


def test_retention_prunes_the_chat_by_the_setting_and_zero_keeps_it(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    user = unique_user("setting")
    say(pam, user, "/language Spanish English")
    chat(pam, clock, user, 16)
    learner = learner_of(pam, user).id
    clock.advance(timedelta(days=91))
    before = len(rows(engine, Message, learner))
    inbox, outbox = Inbox(engine, 60), Outbox(engine, 60)
    keep_all = Retention(inbox, outbox, 0, clock, history=pam.store.history, chat_days=0)
    keep_all.prune()
    assert len(rows(engine, Message, learner)) == before

    days = Retention(inbox, outbox, 0, clock, history=pam.store.history, chat_days=90)
    assert days.prune() > 0
    assert len(rows(engine, Message, learner)) == WINDOW


@pytest.mark.parametrize("days", [1, 30, MIN_CHAT_RETENTION_DAYS - 1])
def test_a_retention_shorter_than_progress_reads_is_refused(days: int) -> None:
    with pytest.raises(ValidationError, match=r"PAM_CHAT_RETENTION_DAYS is .* at least 57"):
        ServiceSettings(chat_retention_days=days)


def test_retention_of_57_days_or_none_is_taken() -> None:
    assert MIN_CHAT_RETENTION_DAYS == 57
    assert ServiceSettings(chat_retention_days=57).chat_retention_days == 57
    assert ServiceSettings(chat_retention_days=0).chat_retention_days == 0
    assert ServiceSettings().chat_retention_days == 90


# -- usage ------------------------------------------------------------------------------------


def spent_today(pam: Pam, learner: int) -> tuple[int, int | None]:
    """What the budgets count now: the learner's tokens today and everyone's."""
    now = pam.clock()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    window = ActivityWindow(now - timedelta(minutes=1), today, True)
    activity = pam.store.conversation.context_and_activity(learner, window)[1]
    assert activity is not None
    return activity.tokens, activity.everyone_tokens


def everyone_ever(engine: Engine) -> tuple[int, int, float, int]:
    with engine.connect() as connection:
        row = connection.execute(
            select(
                func.sum(Usage.calls),
                func.sum(Usage.input_tokens + Usage.output_tokens),
                func.sum(Usage.audio_seconds),
                func.sum(Usage.speech_chars),
            )
        ).one()
    return int(row[0]), int(row[1]), float(row[2]), int(row[3])


def test_usage_rolls_up_by_month_and_the_ledger_and_budgets_read_the_same(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    pam = chatting_pam(settings, engine, clock)
    users = [unique_user("usage") for _ in range(2)]
    learners = []
    for user in users:
        say(pam, user, "/language Spanish English")
        learners.append(learner_of(pam, user).id)
    ledger = Ledger(engine, clock)
    # Four months of calls, every few hours, of two models and purposes, with audio.
    start = clock()
    for hour in range(0, 24 * 120, 7):
        clock.now = start + timedelta(hours=hour)
        for n, learner in enumerate(learners):
            ledger.record_usage(learner, "gpt-4o", "reply", 300 + hour % 50, 40 + n)
            if hour % 3 == 0:
                ledger.record_usage(learner, "gpt-4o-mini", "summary", 900, 100)
            if hour % 5 == 0:
                ledger.record_audio(learner, "whisper-1", "transcription", 25, seconds=2.5)
    chat(pam, clock, users[0], 2)  # and today's turns
    before = {learner: (ledger.usage(learner), ledger.audio_usage(learner)) for learner in learners}
    today = {learner: spent_today(pam, learner) for learner in learners}
    totals = everyone_ever(engine)
    rows_before = {learner: len(rows(engine, Usage, learner)) for learner in learners}
    cutoff = clock() - timedelta(days=60)

    removed = History(engine, clock).roll_up_usage(cutoff, page=1)

    assert removed == sum(rows_before.values()) - sum(
        len(rows(engine, Usage, learner)) for learner in learners
    )
    assert removed > 0
    for learner in learners:
        assert (ledger.usage(learner), ledger.audio_usage(learner)) == before[learner]
        assert spent_today(pam, learner) == today[learner]
        old = [r for r in rows(engine, Usage, learner) if r.created_at < cutoff]
        groups = {(r.created_at.year, r.created_at.month, r.model, r.purpose) for r in old}
        assert len(old) == len(groups), "one row per month, model and purpose"
    assert everyone_ever(engine) == pytest.approx(totals)
    assert History(engine, clock).roll_up_usage(cutoff) == 0, "a second round merges nothing"


# -- review grades ----------------------------------------------------------------------------


def review_state(pam: Pam, learner: int, now: datetime) -> tuple[Any, ...]:
    """What review schedules by and /progress shows: the items' cards, the chart's figures,
    the profile's recurring mistakes."""
    with pam.engine.connect() as connection:
        cards = connection.execute(
            select(
                ReviewItem.id,
                ReviewItem.due,
                ReviewItem.state,
                ReviewItem.stability,
                ReviewItem.difficulty,
                ReviewItem.last_review,
            )
            .where(ReviewItem.learner_id == learner)
            .order_by(ReviewItem.id)
        ).all()
    shown = progress(pam.engine, learner, now)
    return (
        cards,
        pam.store.reviews.due(learner),
        shown,
        pam.store.reviews.patterns(learner),
    )


def test_review_grades_compact_and_review_and_progress_stay_the_same(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    model = FakeChatModel()
    pam = review_pam(settings, engine, model, clock)
    learner = with_due_mistakes(pam, model, clock, BUEN, SER)
    items = [i.id for i in pam.store.reviews.due(learner.info.id)]
    assert len(items) == 2
    # Half a year of /review answers, every few days: runs of right answers and slips.
    for day in range(0, 180, 3):
        clock.advance(timedelta(days=3))
        for n, item in enumerate(items):
            right = (day // 3 + n) % 4 != 0
            pam.store.reviews.grade(learner.info.id, item, right, None)
    now = clock()
    before = review_state(pam, learner.info.id, now)
    logs_before = len(rows(engine, ReviewLog, learner.info.id))
    cutoff = now - RETENTION

    removed = History(engine, clock).compact_grades(cutoff)

    assert removed > 0
    assert len(rows(engine, ReviewLog, learner.info.id)) == logs_before - removed
    assert review_state(pam, learner.info.id, now) == before
    # And so every day after, as the chart's weeks move on.
    for _ in range(3):
        clock.advance(timedelta(days=5))
        for n, item in enumerate(items):
            pam.store.reviews.grade(learner.info.id, item, n == 0, None)
    assert History(engine, clock).compact_grades(cutoff) == 0, "a second round finds nothing"


def test_compacting_day_after_day_changes_nothing_review_or_progress_show(
    settings: Settings, engine: Engine, clock: ManualClock
) -> None:
    """As a worker compacts, round after round while the learner goes on: each time, review
    and /progress read the same as just before."""
    model = FakeChatModel()
    pam = review_pam(settings, engine, model, clock)
    learner = with_due_mistakes(pam, model, clock, BUEN, SER)
    items = [i.id for i in pam.store.reviews.due(learner.info.id)]
    history = History(engine, clock)
    removed = 0
    for day in range(200):
        clock.advance(timedelta(days=1))
        for n, item in enumerate(items):
            if (day + n) % 3 == 0:
                pam.store.reviews.grade(learner.info.id, item, (day // 3 + n) % 5 != 0, None)
        if day % 10 == 0:
            before = review_state(pam, learner.info.id, clock())
            removed += history.compact_grades(clock() - RETENTION)
            assert review_state(pam, learner.info.id, clock()) == before
    assert removed > 0
