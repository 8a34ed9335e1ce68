"""Chat retention (PAM_CHAT_RETENTION_DAYS): what a learner's chat leaves in the database once
no feature reads it any more, pruned or compacted in small batches.

- `messages` older than the cutoff that the summary has folded and the profile job has read
  (id at or below both watermarks) go, with their `corrections`. Recall keeps what it finds in
  `recall_entries`, written when the fold took them; the reply prompt reads only unfolded
  messages (the last 10 are never folded); /progress reads learner messages and corrections of
  its last 8 weeks, which the shortest retention (memory/config.py's MIN_CHAT_RETENTION_DAYS)
  keeps.
- `llm_usage` rows older than the cutoff roll up into one row per learner, month, model and
  purpose, whose `calls` counts them: the budgets count today's tokens only, and every sum the
  ledger reports (calls, tokens, audio seconds and characters) stays the same.
- `review_logs` older than the cutoff shrink to what review and /progress read of them: FSRS
  schedules from the card on `review_items`, /progress counts each item's run of right answers
  (its last MASTERED_AFTER grades before the window tell it) and when it was first graded (any
  grade before the window tells that), and the profile's recurring mistakes ask when each was
  last made (its newest mistake grade).

Each batch is a transaction of its own, so no statement holds SQLite's write lock or many row
locks for long, and running it twice deletes nothing more."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, bindparam, delete, func, select, update

from memory.clock import Clock, utcnow
from memory.database.db import Tables
from memory.database.models import Correction, Learner, Message, Profile, Summary, Usage
from memory.database.models_review import ReviewLog, ReviewPending
from memory.review.items import MISSED, MISTAKE
from memory.review.progress import MASTERED_AFTER

# Rows per DELETE (messages), learners per page (usage, review logs): each a transaction of
# its own, as the queues prune (memory/queue/base.py).
HISTORY_BATCH = 500
LEARNER_PAGE = 50


class Pruned(NamedTuple):
    """What one round of chat retention removed, in rows."""

    messages: int = 0
    corrections: int = 0
    usage: int = 0  # usage rows merged into their month's
    grades: int = 0  # review logs compacted away

    @property
    def total(self) -> int:
        """All rows removed."""
        return sum(self)


class History(Tables):
    """The learners' chat history past the retention cutoff, pruned and compacted."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        super().__init__(engine, clock)
        # The month before which this process has rolled up all usage: later rounds read only
        # from there (an index range per learner), not every month since the first.
        self._rolled_before: datetime | None = None

    def prune(self, cutoff: datetime, batch: int = HISTORY_BATCH) -> Pruned:
        """Remove what no feature needs any more of the chat before `cutoff`; what went."""
        messages, corrections = self.prune_messages(cutoff, batch)
        return Pruned(
            messages,
            corrections,
            self.roll_up_usage(cutoff, LEARNER_PAGE),
            self.compact_grades(cutoff, LEARNER_PAGE),
        )

    def prune_messages(self, cutoff: datetime, batch: int = HISTORY_BATCH) -> tuple[int, int]:
        """Delete the messages sent before `cutoff` that the summary has folded and the
        profile job has read, and their corrections: (messages, corrections) deleted. A
        message whose grades the review job has still to write stays until it has.

        It walks `messages` in id order, `batch` ids a page, and stops at the first page that
        ends after `cutoff` (ids grow with time): no statement reads more than a page."""
        page_end = (
            select(Message.id, Message.created_at)
            .where(Message.id > bindparam("after"))
            .order_by(Message.id)
            .offset(batch - 1)
            .limit(1)
        )
        messages = corrections = after = 0
        while True:
            with self.single.connect() as connection:
                end = connection.execute(page_end, {"after": after}).first()
            page = [Message.id > after] + ([Message.id <= end.id] if end is not None else [])
            with self.sessions.begin() as session:
                ids = list(session.scalars(_prunable(cutoff, page)))
                if ids:
                    corrections += _deleted(
                        session.execute(delete(Correction).where(Correction.message_id.in_(ids)))
                    )
                    messages += _deleted(
                        session.execute(delete(Message).where(Message.id.in_(ids)))
                    )
            if end is None or end.created_at >= cutoff:
                return messages, corrections
            after = end.id

    def roll_up_usage(self, cutoff: datetime, page: int = LEARNER_PAGE) -> int:
        """Merge the usage rows of each learner, calendar month (UTC), model and purpose
        recorded before `cutoff` into one (their `calls` summed with the rest): the rows
        removed. Learner by learner, `page` learners a transaction."""
        months = self._months(cutoff)
        removed = 0
        for first, last in self._learner_pages(page):
            for start, end in months:
                with self.sessions.begin() as session:
                    removed += _roll_up(session, first, last, start, end)
        self._rolled_before = _month_of(cutoff)
        return removed

    def compact_grades(self, cutoff: datetime, page: int = LEARNER_PAGE) -> int:
        """Delete the review grades given before `cutoff` that neither review nor /progress
        reads: each item keeps its last MASTERED_AFTER grades before then and its latest
        mistake. The grades removed. `page` learners a transaction."""
        removed = 0
        for first, last in self._learner_pages(page):
            old = (
                ReviewLog.learner_id >= first,
                ReviewLog.learner_id <= last,
                ReviewLog.reviewed_at < cutoff,
            )
            with self.sessions.begin() as session:
                # Only the items with more old grades than any keeps are read whole.
                crowded = list(
                    session.scalars(
                        select(ReviewLog.item_id)
                        .where(*old)
                        .group_by(ReviewLog.item_id)
                        .having(func.count() > MASTERED_AFTER)
                    )
                )
                if not crowded:
                    continue
                rows = session.execute(
                    select(ReviewLog.id, ReviewLog.item_id, ReviewLog.source)
                    .where(*old, ReviewLog.item_id.in_(crowded))
                    .order_by(ReviewLog.item_id, ReviewLog.reviewed_at, ReviewLog.id)
                ).all()
                dropped = list(_droppable(rows))
                for chunk in _chunks(dropped, HISTORY_BATCH):
                    removed += _deleted(
                        session.execute(delete(ReviewLog).where(ReviewLog.id.in_(chunk)))
                    )
        return removed

    def _learner_pages(self, page: int) -> list[tuple[int, int]]:
        """The learners' ids in pages of `page`: (first, last) of each."""
        with self.single.connect() as connection:
            ids = list(connection.scalars(select(Learner.id).order_by(Learner.id)))
        return [(chunk[0], chunk[-1]) for chunk in _chunks(ids, page)]

    def _months(self, cutoff: datetime) -> list[tuple[datetime, datetime]]:
        """The calendar months (UTC) whose usage may still need rolling up, the last one
        ending at `cutoff`: from the oldest row's (by id: no index on time needed) on this
        process's first round, from the last round's cutoff's after that."""
        with self.single.connect() as connection:
            oldest = connection.scalar(select(Usage.created_at).order_by(Usage.id).limit(1))
        if oldest is None or oldest >= cutoff:
            return []
        start = _month_of(oldest)
        if self._rolled_before is not None:
            start = max(start, self._rolled_before)
        months = []
        while start < cutoff:
            following = _next_month(start)
            months.append((start, min(following, cutoff)))
            start = following
        return months


def _prunable(cutoff: datetime, page: list[Any]) -> Any:
    """The ids, within `page`, of messages before `cutoff` that both watermarks have passed
    and no pending grade names."""
    pending = select(ReviewPending.message_id).where(ReviewPending.message_id == Message.id)
    return (
        select(Message.id)
        .join(Summary, Summary.learner_id == Message.learner_id)
        .join(Profile, Profile.learner_id == Message.learner_id)
        .where(
            *page,
            Message.created_at < cutoff,
            Message.id <= Summary.watermark,
            Message.id <= Profile.watermark,
            ~pending.exists(),
        )
    )


def _roll_up(session: Any, first: int, last: int, start: datetime, end: datetime) -> int:
    """Merge the usage rows of learners `first`…`last` recorded in [start, end) into the
    oldest row of their (learner, model, purpose); the rows removed."""
    in_month = (
        Usage.learner_id >= first,
        Usage.learner_id <= last,
        Usage.created_at >= start,
        Usage.created_at < end,
    )
    groups = session.execute(
        select(
            func.min(Usage.id).label("keep"),
            func.count().label("rows"),
            func.sum(Usage.calls).label("calls"),
            func.sum(Usage.input_tokens).label("input_tokens"),
            func.sum(Usage.output_tokens).label("output_tokens"),
            func.sum(Usage.audio_seconds).label("audio_seconds"),
            func.sum(Usage.speech_chars).label("speech_chars"),
        )
        .where(*in_month)
        .group_by(Usage.learner_id, Usage.model, Usage.purpose)
    ).all()
    merged = [g for g in groups if g.rows > 1]
    if not merged:
        return 0
    sums = ("calls", "input_tokens", "output_tokens", "audio_seconds", "speech_chars")
    session.connection().execute(
        update(Usage)
        .where(Usage.id == bindparam("keep"))
        .values({name: bindparam(f"sum_{name}") for name in sums}),
        [{"keep": g.keep, **{f"sum_{name}": getattr(g, name) for name in sums}} for g in merged],
    )
    # Every other row of the month: each group's oldest now holds the group's sums.
    kept = [g.keep for g in groups]
    return _deleted(session.execute(delete(Usage).where(*in_month, Usage.id.not_in(kept))))


def _droppable(rows: Sequence[Any]) -> Iterable[int]:
    """The ids among one page's old grades (ordered by item, then time) that nothing reads:
    all but each item's last MASTERED_AFTER and its latest mistake."""
    by_item: dict[int, list[Any]] = {}
    for row in rows:
        by_item.setdefault(row.item_id, []).append(row)
    for grades in by_item.values():
        keep = {g.id for g in grades[-MASTERED_AFTER:]}
        mistakes = [g.id for g in grades if g.source in (MISTAKE, MISSED)]
        keep.update(mistakes[-1:])
        yield from (g.id for g in grades if g.id not in keep)


def _month_of(at: datetime) -> datetime:
    """The first instant of `at`'s calendar month, UTC."""
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def _next_month(start: datetime) -> datetime:
    """The first instant of the month after the one starting at `start`."""
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)


def _chunks(values: Sequence[int], size: int) -> list[list[int]]:
    return [list(values[n : n + size]) for n in range(0, len(values), size)]


def _deleted(result: Any) -> int:
    return int(result.rowcount or 0)
