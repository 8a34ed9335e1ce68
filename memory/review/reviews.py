"""Review: each learner's recurring mistakes as spaced-repetition items. Every correction
joins its pattern's item (memory/review/patterns.py finds it), which FSRS schedules; a turn grades
its items (made again, used correctly, missed where the reply invited it), the reply prompt
asks for the items due, and /review practises them one exercise at a time. What it reads, and
the statements that read it, are memory/review/reads.py's; how a turn changes an item,
memory/review/items.py's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import fsrs
from sqlalchemy import Select, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from memory.database.db import Tables
from memory.database.models import Correction, Learner
from memory.database.models_review import ReviewItem, ReviewLog, ReviewPending, ReviewSession
from memory.database.records import CorrectionRecord, LearnerGone
from memory.review.items import (
    MISSED,
    MISTAKE,
    REVIEW,
    USED,
    Patterns,
    grade_item,
    graded_for,
    learner_items,
)
from memory.review.reads import (
    DUE_COLUMNS,
    FOR_PROMPT,
    REST,
    SESSION_COLUMNS,
    DueItem,
    Exercise,
    PatternCount,
    ReviewState,
    due_query,
    review_state,
)

_MAX_KIND = 20

T = TypeVar("T")


class Reviews(Tables):
    """Review items, their grades, the items due, and /review sessions."""

    def record_turn(
        self,
        learner_id: int,
        message_id: int,
        corrections: Sequence[CorrectionRecord],
        *,
        used: Sequence[int] = (),
        missed: Sequence[int] = (),
        offered: Sequence[int] = (),
    ) -> None:
        """Record what one learner message (`message_id`) did to the learner's items, in one
        transaction: each correction joins its pattern's item and grades it Again; `missed`
        items grade Again and `used` ones Good; `offered` ones (in this turn's prompt) count
        an offer unless graded. One grade per item and message: a turn run again grades
        nothing twice. Item ids not the learner's are ignored. Nothing to record: no query."""
        if not (corrections or used or missed or offered):
            return
        self._transaction(
            learner_id,
            lambda session, now: self._record(
                session, learner_id, message_id, corrections, used, missed, offered, now
            ),
            checked=False,
        )

    def record_pending(self, learner_id: int) -> int:
        """The "review" memory job: grade every turn the learner's replies left grades for
        (review_pending, written with each reply), oldest first, each as `record_turn` would,
        and delete them, in one transaction. Idempotent: run again, or after a crash, it
        grades nothing twice (one grade per item and message). How many turns it graded."""

        def work(session: Session, now: datetime) -> int:
            pending = list(
                session.scalars(
                    select(ReviewPending)
                    .where(ReviewPending.learner_id == learner_id)
                    .order_by(ReviewPending.message_id)
                )
            )
            if not pending:
                return 0
            made = _corrections_of(session, learner_id, [row.message_id for row in pending])
            for row in pending:
                corrections = made.get(row.message_id, ())
                self._record(
                    session,
                    learner_id,
                    row.message_id,
                    corrections,
                    _ids(row.used),
                    _ids(row.missed),
                    _ids(row.offered),
                    now,
                )
                session.delete(row)
            return len(pending)

        return self._transaction(learner_id, work, checked=False)

    def _record(
        self,
        session: Session,
        learner_id: int,
        message_id: int,
        corrections: Sequence[CorrectionRecord],
        used: Sequence[int],
        missed: Sequence[int],
        offered: Sequence[int],
        now: datetime,
    ) -> None:
        items, done = learner_items(session, learner_id, message_id)
        if not items and not corrections and session.get(Learner, learner_id) is None:
            raise LearnerGone(learner_id)  # grades asked of items that are gone with them
        made: dict[int, ReviewItem] = {}
        if corrections:
            patterns = Patterns(session, learner_id, now, items)
            for correction in corrections:
                item = patterns.join(correction, message_id)
                made.setdefault(item.id, item)
        mine = {item.id: item for item in items if item.id not in made}
        grades = [
            *((item, fsrs.Rating.Again, MISTAKE) for item in made.values()),
            *((mine[i], fsrs.Rating.Again, MISSED) for i in missed if i in mine),
            *((mine[i], fsrs.Rating.Good, USED) for i in used if i in mine),
        ]
        for item, rating, source in grades:
            if item.id not in done:
                grade_item(session, item, rating, source, message_id, now)
                done.add(item.id)
        for item_id in dict.fromkeys(offered):
            if item_id in mine and item_id not in done:
                mine[item_id].offers += 1
                mine[item_id].offered_at = now
                mine[item_id].offered_message_id = message_id

    def grade(self, learner_id: int, item_id: int, right: bool, message_id: int | None) -> None:
        """Grade a /review answer: Good if `right`, else Again (one per item and message; an
        item not the learner's is ignored)."""

        def work(session: Session, now: datetime) -> None:
            item = session.get(ReviewItem, item_id)
            if item is None or item.learner_id != learner_id:
                return
            if item.id in graded_for(session, [item.id], message_id):
                return
            rating = fsrs.Rating.Good if right else fsrs.Rating.Again
            grade_item(session, item, rating, REVIEW, message_id, now)

        self._transaction(learner_id, work)

    def due_for_prompt(
        self,
        learner_id: int,
        before_message_id: int,
        limit: int = 2,
        *,
        previous_message_id: int | None = None,
    ) -> list[DueItem]:
        """The items to carry in a reply prompt, most overdue first: due now, last made in a
        message older than `before_message_id` (out of the prompt's verbatim window, which
        shows the correction already), and not resting (see memory/review/reads.py's REST).

        One invitation at a time, at most once per window: when the prompt that carried
        items was that of a message still in the window, nothing new is offered — except
        that the items offered for `previous_message_id` (the learner's message before this
        one) come again, ungraded, so the model can grade the answer to its invitation. A
        friend brings an old mistake up now and then, not in every other message. One query
        on the index (learner_id, due), built once, as it runs on every turn."""
        found = self.for_prompt(
            learner_id, before_message_id, limit, previous_message_id=previous_message_id
        )
        return [] if isinstance(found, ReviewState) else found

    def for_prompt(
        self,
        learner_id: int,
        before_message_id: int,
        limit: int = 2,
        *,
        previous_message_id: int | None = None,
    ) -> ReviewState | list[DueItem]:
        """What a reply prompt carries of review, in one statement (it runs on every turn):
        the learner's /review under way, if any, else `due_for_prompt`'s items."""
        now = self.clock()
        values = {
            "learner_id": learner_id,
            "now": now,
            "rested": now - REST,
            "before": before_message_id,
            "previous": previous_message_id or -1,
            "limit": max(limit, 0),
        }
        with self.single.connect() as connection:
            rows = connection.execute(FOR_PROMPT, values).all()
        if rows and rows[0].started_at is not None:
            return review_state(rows[0])
        return [
            DueItem(**{c.key: row._mapping[c.key] for c in DUE_COLUMNS})
            for row in rows
            if row.id is not None
        ]

    def due(self, learner_id: int, now: datetime | None = None) -> list[DueItem]:
        """Every item due at `now` (the clock's now when None), most overdue first."""
        return self._items(due_query(learner_id, now or self.clock()))

    def next_due(self, learner_id: int) -> datetime | None:
        """When the learner's next item is due (in the past if one is due now); None without
        items."""
        with self.single.connect() as connection:
            return connection.scalar(
                select(func.min(ReviewItem.due)).where(ReviewItem.learner_id == learner_id)
            )

    def due_by(self, learner_id: int, until: datetime) -> int:
        """How many of the learner's items are due by `until` (those due now included)."""
        with self.single.connect() as connection:
            found = connection.scalar(
                select(func.count())
                .select_from(ReviewItem)
                .where(ReviewItem.learner_id == learner_id, ReviewItem.due <= until)
            )
        return int(found or 0)

    def item(self, learner_id: int, item_id: int) -> DueItem | None:
        """The learner's item `item_id`, or None (none such, or another learner's)."""
        found = self._items(
            select(*DUE_COLUMNS).where(
                ReviewItem.learner_id == learner_id, ReviewItem.id == item_id
            )
        )
        return found[0] if found else None

    def patterns(self, learner_id: int, limit: int = 3) -> list[PatternCount]:
        """The learner's recurring mistakes for the profile: the most often made first, then
        the most recently made."""
        last_seen = func.max(ReviewLog.reviewed_at).label("last_seen")
        query = (
            select(ReviewItem.rule, ReviewItem.mistakes, last_seen)
            .join(ReviewLog, ReviewLog.item_id == ReviewItem.id)
            .where(
                ReviewItem.learner_id == learner_id,
                ReviewItem.mistakes > 0,
                ReviewLog.source.in_((MISTAKE, MISSED)),
            )
            .group_by(ReviewItem.id, ReviewItem.rule, ReviewItem.mistakes)
            .order_by(ReviewItem.mistakes.desc(), last_seen.desc(), ReviewItem.id.desc())
            .limit(max(limit, 0))
        )
        with self.single.connect() as connection:
            return [
                PatternCount(r.rule, r.mistakes, r.last_seen) for r in connection.execute(query)
            ]

    def _items(self, query: Select[*tuple[Any, ...]]) -> list[DueItem]:
        with self.single.connect() as connection:
            return [DueItem(**row._mapping) for row in connection.execute(query)]

    def _transaction(
        self, learner_id: int, work: Callable[[Session, datetime], T], *, checked: bool = True
    ) -> T:
        """`work` in one transaction, the learner's row there (else LearnerGone), given the
        clock's time. A unique constraint lost to a concurrent writer (the same turn run
        twice at once) runs it once more, to see the winner's rows and write nothing twice;
        a row deleted under it (/forget) ends the same way, in LearnerGone. Not `checked`:
        the first run does not look the learner up first (a turn's grading, on every turn:
        a row of a forgotten learner fails its foreign key, or is gone, and the second run
        looks)."""
        try:
            return self._attempt(learner_id, work, checked)
        except (IntegrityError, StaleDataError):
            return self._attempt(learner_id, work, True)

    def _attempt(self, learner_id: int, work: Callable[[Session, datetime], T], checked: bool) -> T:
        with self.sessions.begin() as session:
            if checked and session.get(Learner, learner_id) is None:
                raise LearnerGone(learner_id)
            return work(session, self.clock().astimezone(UTC))

    # -- /review sessions -------------------------------------------------------------------

    def session(self, learner_id: int) -> ReviewState | None:
        """The learner's /review under way, or None."""
        query = select(*SESSION_COLUMNS).where(ReviewSession.learner_id == learner_id)
        with self.single.connect() as connection:
            row = connection.execute(query).first()
        return review_state(row) if row is not None else None

    def start_session(self, learner_id: int, first: Exercise, queue: Sequence[int]) -> None:
        """Start a /review (replacing any under way) that asks `first`, then the items of
        `queue`. Raises ValueError if `first` is not about one of the learner's items."""

        def work(session: Session, now: datetime) -> None:
            item = session.get(ReviewItem, first.item_id)
            if item is None or item.learner_id != learner_id:
                raise ValueError(f"item {first.item_id} is not the learner's")
            session.execute(delete(ReviewSession).where(ReviewSession.learner_id == learner_id))
            row = ReviewSession(
                learner_id=learner_id,
                queue=[int(i) for i in queue],
                asked=1,
                right=0,
                started_at=now,
            )
            _ask(row, first, now)
            session.add(row)

        self._transaction(learner_id, work)

    def next_exercise(
        self, learner_id: int, right: bool | None, following: Exercise | None
    ) -> None:
        """Score the answer to the exercise asked (`right`; None: it was no attempt) and ask
        `following` (taken from the queue); or with None end the session (its score gone
        with it: `session` has it, up to this answer)."""
        with self.sessions.begin() as session:
            row = session.get(ReviewSession, learner_id)
            if row is None:
                return
            if following is None:
                session.delete(row)
                return
            row.right += 1 if right else 0
            row.asked += 1
            queue = list(row.queue)
            if following.item_id in queue:
                queue.remove(following.item_id)
            row.queue = queue
            _ask(row, following, self.clock())

    def end_session(self, learner_id: int) -> None:
        """End the learner's /review, if one is under way."""
        with self.sessions.begin() as session:
            session.execute(delete(ReviewSession).where(ReviewSession.learner_id == learner_id))


def _corrections_of(
    session: Session, learner_id: int, message_ids: Sequence[int]
) -> dict[int, list[CorrectionRecord]]:
    """The corrections stored with each of the learner's messages `message_ids`, in the order
    they were made."""
    rows = session.execute(
        select(
            Correction.message_id,
            Correction.original,
            Correction.corrected,
            Correction.explanation,
            Correction.category,
            Correction.rule,
        )
        .where(Correction.learner_id == learner_id, Correction.message_id.in_(message_ids))
        .order_by(Correction.id)
    )
    made: dict[int, list[CorrectionRecord]] = {}
    for row in rows:
        record = CorrectionRecord(
            row.original, row.corrected, row.explanation, row.category, row.rule
        )
        made.setdefault(row.message_id, []).append(record)
    return made


def _ids(values: Any) -> list[int]:
    """Item ids as a review_pending row keeps them (a JSON list), as ints."""
    return [int(value) for value in values or ()]


def _ask(row: ReviewSession, exercise: Exercise, now: datetime) -> None:
    """Make `exercise` the one the session is waiting on."""
    row.item_id = exercise.item_id
    row.kind = exercise.kind[:_MAX_KIND]
    row.exercise = exercise.prompt
    row.expected = exercise.expected
    row.updated_at = now
