"""Dated plans in the learned profile: what the learner said they will do, and when ("a job
interview on Thursday", "a trip to Oaxaca in July"), kept as
`{"what": ..., "when": "YYYY-MM-DD" | "YYYY-MM", "mentioned": "YYYY-MM-DD"}` so that a check-in
can follow one up when its day has come. Reading the model's plans (untrusted: a malformed date
drops the plan, never the profile), merging them with the ones Pam had (which were followed up
is Pam's to know, never the model's), and telling which is due. Pure functions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from memory.grounding import Said, content_words, fold, supported
from memory.model_output import key_name, scalar_text

MAX_PLANS = 5
WHAT_CHARS = 80
# When a plan's day has come, Pam may follow it up: from NEAR days before it (wish luck) to
# PASSED days after it (ask how it went); a plan for a month, from MONTH_NEAR days before the
# month to MONTH_PASSED days after it.
NEAR = timedelta(days=2)
PASSED = timedelta(days=4)
MONTH_NEAR = timedelta(days=7)
MONTH_PASSED = timedelta(days=10)
# A plan this long past is forgotten by the next profile update: the summary keeps the story.
KEPT_AFTER = timedelta(days=30)
# How far ahead a plan may be, from the day it was mentioned: further is a misread date.
AHEAD = timedelta(days=3 * 366)
# Pam's own mark on a plan it followed up (the day it did): never read from a model's answer.
FOLLOWED_UP = "followed_up"

_DAY = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ].*)?$")
_MONTH = re.compile(r"^(\d{4})-(\d{1,2})$")


@dataclass(frozen=True)
class Plan:
    """One plan as Pam keeps it: `first` and `last` are the days its `when` spans (one day,
    or a whole month)."""

    what: str
    when: str
    mentioned: str | None
    followed_up: str | None = None

    @property
    def first(self) -> date:
        return span(self.when)[0]  # type: ignore[index]

    @property
    def last(self) -> date:
        return span(self.when)[1]  # type: ignore[index]

    @property
    def is_month(self) -> bool:
        return _MONTH.match(self.when) is not None

    def as_dict(self) -> dict[str, str]:
        kept = {"what": self.what, "when": self.when}
        if self.mentioned:
            kept["mentioned"] = self.mentioned
        if self.followed_up:
            kept[FOLLOWED_UP] = self.followed_up
        return kept


def _day(text: str) -> date | None:
    found = _DAY.match(text.strip())
    if not found:
        return None
    try:
        return date(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    except ValueError:
        return None


# The years a plan's date may fall in: what a model writes outside them ("31 Dec 9999", a joke
# or an injection) is no plan, and date arithmetic near year 9999 would overflow.
MIN_YEAR = 1900
MAX_YEAR = 2999


def normal_when(value: Any) -> str | None:
    """A plan's `when` as Pam keeps it, "YYYY-MM-DD" or "YYYY-MM", from what a model writes
    ("2026-7-3", "2026-07-03T10:00"); None for anything else (a weekday, "next week")."""
    text = scalar_text(value)
    if not text:
        return None
    day = _day(text)
    if day is not None:
        return day.isoformat() if MIN_YEAR <= day.year <= MAX_YEAR else None
    found = _MONTH.match(text.strip())
    if found and 1 <= int(found.group(2)) <= 12 and MIN_YEAR <= int(found.group(1)) <= MAX_YEAR:
        return f"{int(found.group(1)):04d}-{int(found.group(2)):02d}"
    return None


def span(when: str) -> tuple[date, date] | None:
    """The first and last day of a kept `when`; None if it is neither form."""
    day = _day(when)
    if day is not None:
        return day, day
    found = _MONTH.match(when)
    if not found:
        return None
    year, month = int(found.group(1)), int(found.group(2))
    start = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return start, following - timedelta(days=1)


def read_plans(value: Any, notes: list[str]) -> list[dict[str, str]] | None:
    """The model's `plans` field: a list of objects with a short `what` and a `when` of either
    form; `mentioned` kept when it is a day. A plan without both is left out (noted: why, never
    its words); at most MAX_PLANS. None for nothing (null, []); [] when no plan was whole."""
    if value is None or value == []:
        return None
    items = value if isinstance(value, list) else [value]
    plans: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        if not isinstance(item, dict):
            notes.append("a plan that is no object left out")
            continue
        fields = {key_name(k): v for k, v in item.items() if isinstance(k, str)}
        what = scalar_text(fields.get("what"))
        when = normal_when(fields.get("when", fields.get("date")))
        if not what or len(what) > WHAT_CHARS or "\n" in what:
            notes.append(f"a plan without a short `what` (≤{WHAT_CHARS} characters) left out")
            continue
        if when is None:
            notes.append("a plan without a date (YYYY-MM-DD or YYYY-MM) left out")
            continue
        mentioned = _day(scalar_text(fields.get("mentioned")) or "")
        if (fold(what), when) in seen:
            continue
        seen.add((fold(what), when))
        plan = {"what": what, "when": when}
        if mentioned is not None:
            plan["mentioned"] = mentioned.isoformat()
        plans.append(plan)
    if len(plans) > MAX_PLANS:
        notes.append(f"{len(plans) - MAX_PLANS} plans past the first {MAX_PLANS} left out")
    return plans[:MAX_PLANS]


def kept_plans(value: Any) -> list[Plan]:
    """The plans a stored profile holds (written by Pam, read defensively all the same)."""
    plans = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        what, when = item.get("what"), item.get("when")
        if not isinstance(what, str) or not isinstance(when, str) or span(when) is None:
            continue
        mentioned = item.get("mentioned")
        followed = item.get(FOLLOWED_UP)
        plans.append(
            Plan(
                what,
                when,
                mentioned if isinstance(mentioned, str) else None,
                followed if isinstance(followed, str) else None,
            )
        )
    return plans


def same_plan(a: Plan, b: Plan) -> bool:
    """Whether two plans are one: the same `when`, and their `what`s the same or sharing a
    content word ("job interview" and "interview at the bank")."""
    if a.when != b.when:
        return False
    if fold(a.what) == fold(b.what):
        return True
    return bool(content_words(a.what) & content_words(b.what))


def merged(
    new: list[dict[str, str]], old: Any, first_day: date, last_day: date
) -> list[dict[str, str]]:
    """The plans to keep from a profile answer's `new` ones, told in messages from `first_day`
    to `last_day`. A plan Pam had (in `old`, see `same_plan`) keeps the day it was mentioned
    and Pam's mark that it was followed up. Of a new one, a `mentioned` outside those days (or
    none) is `last_day`, and one already over when it was mentioned (the learner told of the
    past: nothing to follow up) or more than AHEAD after it (a misread date) is left out.
    Plans over by more than KEPT_AFTER go."""
    before = kept_plans(old)
    kept: list[dict[str, str]] = []
    for plan in kept_plans(new):
        if plan.last + KEPT_AFTER < last_day:
            continue
        had = next((p for p in before if same_plan(p, plan)), None)
        if had is not None:
            kept.append(Plan(plan.what, plan.when, had.mentioned, had.followed_up).as_dict())
            continue
        mentioned = _day(plan.mentioned or "")
        if mentioned is None or not first_day <= mentioned <= last_day:
            mentioned = last_day
        if plan.last < mentioned or plan.first > mentioned + AHEAD:
            continue
        kept.append(Plan(plan.what, plan.when, mentioned.isoformat()).as_dict())
    return kept[:MAX_PLANS]


def without_marks(plans: Any) -> list[dict[str, str]]:
    """The plans as the profile job's model sees them: Pam's marks are none of its business."""
    return [{k: v for k, v in p.as_dict().items() if k != FOLLOWED_UP} for p in kept_plans(plans)]


def due_plan(plans: Any, today: date) -> tuple[Plan, str] | None:
    """The plan a check-in on `today` should follow up, and whether it has "passed" (ask how it
    went) or is "near" (wish luck): one not followed up yet whose day has just passed or is
    near (see NEAR, PASSED), the most recently passed first, then the nearest ahead. None when
    no plan is due."""
    passed: list[Plan] = []
    near: list[Plan] = []
    for plan in kept_plans(plans):
        if plan.followed_up:
            continue
        ahead, after = (MONTH_NEAR, MONTH_PASSED) if plan.is_month else (NEAR, PASSED)
        if plan.last < today <= plan.last + after:
            passed.append(plan)
        elif plan.first - ahead <= today <= plan.last:
            near.append(plan)
    if passed:
        return max(passed, key=lambda p: p.last), "passed"
    if near:
        return min(near, key=lambda p: p.first), "near"
    return None


def marked(plans: Any, plan: Plan, today: date) -> list[dict[str, str]]:
    """`plans` with `plan` marked followed up on `today`."""
    return [
        (Plan(p.what, p.when, p.mentioned, today.isoformat()) if p == plan else p).as_dict()
        for p in kept_plans(plans)
    ]


def upcoming(plans: Any, today: date, limit: int = 2) -> list[Plan]:
    """The plans still ahead (or under way) on `today`, soonest first, at most `limit`: what
    the reply prompt carries of them."""
    ahead = [p for p in kept_plans(plans) if p.last >= today]
    return sorted(ahead, key=lambda p: p.first)[:limit]


def plans_supported(
    plans: Sequence[dict[str, str]], old: Any, source: Sequence[str]
) -> list[dict[str, str]]:
    """The plans whose `what` the learner's words (`source`) or the plans Pam had support:
    a plan the model made up is no plan of theirs."""
    said = Said([*source, *(p.what for p in kept_plans(old))])
    return [p for p in plans if supported(p["what"], said)]
