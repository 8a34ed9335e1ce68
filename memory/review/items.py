"""How a turn changes a learner's review items, inside the transaction memory/review/reviews.py
opens: each correction joins the item of its pattern (memory/review/patterns.py says which), and
each grade reviews the item's FSRS card and is logged."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

import fsrs
from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.database.models_review import ReviewItem, ReviewLog
from memory.database.records import CorrectionRecord
from memory.review.patterns import (
    MAX_KEY,
    derived_rule,
    pattern_terms,
    rule_key,
    same_pattern,
    similarity,
)

# Learning steps for a chat, not a deck: a minute (FSRS's default first step) would make a
# mistake due while its correction is still on screen, in the prompt's verbatim window. Half
# an hour brings it back later in the same chat, once it has scrolled out; a day, in the next
# chat on another day; after that FSRS's intervals. A lapse (made again once learned) comes
# back the same way, later in that chat.
LEARNING_STEPS = (timedelta(minutes=30), timedelta(days=1))
RELEARNING_STEPS = (timedelta(minutes=30),)
# Deterministic (no fuzz), so the same turns always give the same schedule, and tests can
# say which.
SCHEDULER = fsrs.Scheduler(
    learning_steps=LEARNING_STEPS, relearning_steps=RELEARNING_STEPS, enable_fuzzing=False
)
# What earned a grade (review_logs.source).
MISTAKE = "mistake"  # made again: a correction of its pattern
USED = "used"  # used correctly in chat
MISSED = "missed"  # got wrong again where the reply invited it
REVIEW = "review"  # an answer in /review

_MAX_CATEGORY = 40


def _card(item: ReviewItem) -> fsrs.Card:
    """The item's FSRS card, as its columns keep it."""
    return fsrs.Card(
        card_id=item.id,
        state=fsrs.State(item.state),
        step=item.step,
        stability=item.stability,
        difficulty=item.difficulty,
        due=item.due,
        last_review=item.last_review,
    )


def grade_item(
    session: Session,
    item: ReviewItem,
    rating: fsrs.Rating,
    source: str,
    message_id: int | None,
    now: datetime,
) -> None:
    """Review the item's card with `rating` at `now`, keep the card in its columns and log
    the grade. A mistake (made again, or missed) counts as one and marks the message it was
    made in; a Good grade counts as a success. Any grade ends the item's run of offers."""
    card, _ = SCHEDULER.review_card(_card(item), rating, review_datetime=now)
    item.state = card.state.value
    item.step = card.step
    item.stability = card.stability
    item.difficulty = card.difficulty
    item.due = card.due
    item.last_review = card.last_review
    item.offers = 0
    item.updated_at = now
    if source in (MISTAKE, MISSED):
        item.mistakes += 1
        item.last_message_id = max(item.last_message_id, message_id or 0)
    elif rating == fsrs.Rating.Good:
        item.successes += 1
    session.add(
        ReviewLog(
            learner_id=item.learner_id,
            item_id=item.id,
            rating=rating.value,
            source=source,
            message_id=message_id,
            state=card.state.value,
            reviewed_at=now,
        )
    )


def graded_for(session: Session, item_ids: Iterable[int], message_id: int | None) -> set[int]:
    """Which of the items already have a grade for `message_id` (none for no message)."""
    ids = set(item_ids)
    if message_id is None or not ids:
        return set()
    return set(
        session.scalars(
            select(ReviewLog.item_id).where(
                ReviewLog.item_id.in_(ids), ReviewLog.message_id == message_id
            )
        )
    )


def learner_items(
    session: Session, learner_id: int, message_id: int
) -> tuple[list[ReviewItem], set[int]]:
    """Every item of the learner (a handful: one per pattern), oldest first, and which of
    them already have a grade for `message_id`: one query, so a turn's grading costs few
    round trips."""
    graded = (
        select(ReviewLog.id)
        .where(ReviewLog.item_id == ReviewItem.id, ReviewLog.message_id == message_id)
        .exists()
        .label("graded")
    )
    rows = session.execute(
        select(ReviewItem, graded)
        .where(ReviewItem.learner_id == learner_id)
        .order_by(ReviewItem.id)
    ).all()
    return [row[0] for row in rows], {row[0].id for row in rows if row.graded}


class Patterns:
    """A learner's `items` as corrections are matched to them within one transaction: by the
    exact rule key first, then by `same_pattern` over their terms (an item of the same
    category first, the most similar wins), else a new item."""

    def __init__(
        self, session: Session, learner_id: int, now: datetime, items: Iterable[ReviewItem]
    ) -> None:
        self.session = session
        self.learner_id = learner_id
        self.now = now
        self.items = {item.id: item for item in items}
        self.by_key = {item.rule_key: item.id for item in self.items.values()}
        # (id, category, terms) of every item, for the near matches.
        self.known = [
            (item.id, item.category, frozenset(item.terms.split())) for item in self.items.values()
        ]

    def join(self, correction: CorrectionRecord, message_id: int) -> ReviewItem:
        """The item of the correction's pattern, its rule and example brought up to this
        correction (a new item, not yet graded, if there is none). An item keeps the key and
        terms of the wording that made it, so that what it matches stays put however its
        later wordings drift."""
        rule = " ".join(correction.rule.split())[:MAX_KEY]
        if not rule_key(rule):  # no rule, or one of nothing but filler and punctuation
            rule = derived_rule(correction.original, correction.corrected)
        key = rule_key(rule) or rule_key(correction.category) or "other"
        terms = pattern_terms(rule, correction.original, correction.corrected)
        found = self.by_key.get(key) or self._similar(terms, correction.category)
        item = self.items.get(found) if found is not None else None
        if item is None:
            return self._new(key, terms, rule, correction, message_id)
        _show(item, rule, correction, self.now)
        return item

    def _similar(self, terms: frozenset[str], category: str) -> int | None:
        """The item whose terms are the same pattern's: of the same category if any is, the
        most similar of those (the older on a tie)."""
        matches = [
            (item_category == category, similarity(terms, known), -item_id)
            for item_id, item_category, known in self.known
            if same_pattern(terms, known)
        ]
        return -max(matches)[2] if matches else None

    def _new(
        self,
        key: str,
        terms: frozenset[str],
        rule: str,
        correction: CorrectionRecord,
        message_id: int,
    ) -> ReviewItem:
        card = fsrs.Card(card_id=0, due=self.now)
        item = ReviewItem(
            learner_id=self.learner_id,
            rule_key=key,
            terms=" ".join(sorted(terms)),
            category=(correction.category or "other")[:_MAX_CATEGORY],
            mistakes=0,
            successes=0,
            state=card.state.value,
            step=card.step,
            due=card.due,
            last_message_id=message_id,
            offers=0,
            created_at=self.now,
        )
        _show(item, rule, correction, self.now)
        self.session.add(item)
        self.session.flush()  # its id, for the grade
        self.items[item.id] = item
        self.by_key[key] = item.id
        self.known.append((item.id, item.category, terms))
        return item


def _show(item: ReviewItem, rule: str, correction: CorrectionRecord, now: datetime) -> None:
    """Make `rule` the item's name and the correction its example: the latest are shown."""
    item.rule = rule
    item.original = correction.original
    item.corrected = correction.corrected
    item.explanation = correction.explanation
    item.updated_at = now
