"""What a check-in follows up, chosen from memory in a fixed order: a dated plan whose day has
just passed or is near (memory/jobs/plans.py), else an open thread of the rolling summary,
else an invitation that gives a due review item a natural chance, else a light invitation to a
learner who has chatted before. Pure: the caller reads memory and hands it in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from memory.jobs.plans import Plan, due_plan
from memory.review.reads import DueItem
from prompts import as_data

PLAN, THREAD, REVIEW, INVITATION = "plan", "thread", "review", "invitation"
FOLLOWS_UP = (PLAN, THREAD, REVIEW, INVITATION)
FOLLOW_UP_TAG = "follow_up"
FIELD_CHARS = 120  # an item's or a plan's text in the prompt
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

# What the model is asked to write about, one line each (the prompt's ${task}).
TASKS = {
    "passed": "Ask how the plan in <follow_up> went: its day has just passed.",
    "near": "The plan in <follow_up> is coming up: wish them well and ask about it (how they "
    "prepare, how they feel).",
    THREAD: "Pick up one open thread of the summary (something they were doing, planning or "
    "wondering about) that the recent conversation has not already asked about.",
    REVIEW: "Invite them to chat about something where the old mistake in <follow_up> comes "
    "up naturally, so they get a chance to use the corrected form; never drill, quote or "
    "mention the mistake.",
    INVITATION: "Invite them to chat: a light, curious question about their day or one of "
    "their interests.",
}


@dataclass(frozen=True)
class Subject:
    """What a check-in follows up: `follows_up` (one of FOLLOWS_UP), the operator's `topic`
    label (None: the model names it), the model's `task`, the `follow_up` data section ("" for
    none), and the `plan` to mark followed up once the message is written."""

    follows_up: str
    topic: str | None
    task: str
    follow_up: str = ""
    plan: Plan | None = None


def _section(lines: Sequence[str]) -> str:
    return f"\n\n<{FOLLOW_UP_TAG}>\n" + "\n".join(lines) + f"\n</{FOLLOW_UP_TAG}>"


def _line(text: str) -> str:
    return as_data(" ".join(text.split()), FIELD_CHARS)


def _day(day: date, today: date) -> str:
    """A plan's day as the model reads it best: the date, its weekday, and how far from
    today ("Thu 2026-12-10, 2 days ago")."""
    days = (day - today).days
    if days == 0:
        far = "today"
    elif abs(days) == 1:
        far = "tomorrow" if days > 0 else "yesterday"
    else:
        far = f"in {days} days" if days > 0 else f"{-days} days ago"
    return f"{WEEKDAYS[day.weekday()]} {day.isoformat()}, {far}"


def _plan_section(plan: Plan, today: date) -> str:
    when = plan.when if plan.is_month else _day(plan.first, today)
    return _section([f"plan: {_line(plan.what)}", f"when: {when}"])


def choose(
    profile: dict[str, Any],
    summary: str,
    due: Sequence[DueItem],
    chatted: bool,
    today: date,
) -> Subject | None:
    """What a check-in on `today` follows up, in order: a plan due (memory.jobs.plans.due_plan)
    in the `profile`; an open thread of the `summary` (not empty); the first of the `due`
    review items; a light invitation when the learner `chatted` before. None when nothing fits:
    a learner who never wrote gets nothing, as the first word of a chat is theirs."""
    found = due_plan(profile.get("plans"), today)
    if found is not None:
        plan, how = found
        return Subject(PLAN, plan.what, TASKS[how], _plan_section(plan, today), plan)
    if summary.strip():
        return Subject(THREAD, None, TASKS[THREAD])
    if due:
        item = due[0]
        lines = [f"mistake: {_line(item.original)} → {_line(item.corrected)}"]
        if item.rule:
            lines.append(f"rule: {_line(item.rule)}")
        return Subject(
            REVIEW, f"review: {item.rule or item.category}", TASKS[REVIEW], _section(lines)
        )
    if chatted:
        return Subject(INVITATION, INVITATION, TASKS[INVITATION])
    return None
