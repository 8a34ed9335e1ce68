"""The reply prompt: stable instructions first, then the learner's data, then the conversation."""

from __future__ import annotations

import json
from datetime import date

from bot import corrections
from bot.languages import LEVEL_DESCRIPTIONS, explanation_language, languages_of
from bot.llm.answers import has_reasoning_markup, strip_reasoning
from bot.review.prompt import Asked
from memory.database.records import ALL, LEARNER, Context
from memory.jobs.plans import upcoming
from memory.jobs.profile import MAX_PROFILE_CHARS
from memory.jobs.profile_facts import density, settled
from memory.llm import ChatMessage
from prompts import as_data, render

UNKNOWN = "not known yet"
# What the rules call the recall section, named only in a prompt that has one (or that offers
# the tool whose answer brings one).
RECALLED_NAMED = (
    ", recalled conversation (dated snippets of earlier chats, also when a tool returns them)"
)
# How many of the learner's mistakes the model reports, by their correction density
# (bot/turn/density.py). FEW asks as NORMAL does, word for word: every mistake found is stored
# for review, and the reply shows the most important one. NORMAL's words are the prompt's as it
# was before densities, so a learner who never chose one costs not one token more.
HOW_MANY = (
    "up to three real mistakes, most useful first; not style, nor punctuation that changes no "
    "meaning"
)
HOW_MANY_ALL = (
    "every mistake, most useful first, up to five; minor slips too (spelling, accents, "
    "punctuation, unnatural wording)"
)
# The learned density is said by the rule above: the profile section does not repeat it; the
# plans are carried briefly, only those just ahead (see `_soon`).
NOT_IN_PROFILE = ("corrections", "plans")
# Plans starting within this many days are in the reply prompt: a friend remembers the
# interview on Thursday, and the trip next summer is for the check-ins.
SOON_DAYS = 14
# Said only when the latest message is a voice note's transcript: the rest of the prompt
# stays as it is, and a text turn costs nothing more.
SPOKEN_RULE = (
    "\n\nTheir latest message is a voice note, transcribed by software: correct only the "
    "grammar and vocabulary they used, never spelling, punctuation or capitals (the "
    "transcriber wrote those)."
)


def reply_prompt(
    context: Context,
    summary_cap_chars: int,
    recalled: str = "",
    *,
    tool: bool = False,
    review: Asked | None = None,
    today: date | None = None,
) -> list[ChatMessage]:
    """System prompt (persona, correction policy, settings, profile, summary, and what recall
    found, if anything) followed by every message not yet folded into the summary, verbatim.
    `recalled`: the recall section (bot.turn.recall.section), or nothing; `tool`: the recall tool
    is offered, so its answer may bring recalled conversation. Only then do the rules name
    recalled conversation as data: a turn without recall costs not one token more. `review`:
    what review adds (bot.review.prompt: due items or a /review exercise, their rule and report);
    without it the prompt has none of it. `today`: the day it is, for the learner's plans just
    ahead (none without it)."""
    # What the learner set is said once, in the settings lines: not again as learned.
    learner, learned = context.learner, context.profile.data
    profile = {k: v for k, v in settled(learned, learner).items() if k not in NOT_IN_PROFILE}
    soon = _soon(learned.get("plans"), today) if today is not None else []
    if soon:
        profile["plans"] = soon
    # The settings lines sit outside the data sections: learned languages stand there only
    # as a language's canonical name (see languages_of).
    target, native, level = languages_of(
        learner.target_language, learner.native_language, learner.level, profile
    )
    explained_in = explanation_language(level, target, native)
    system = render(
        "reply",
        target_language=target
        or "the language the learner writes in (not set yet; if they write in what looks like "
        "their native language, ask which language they want to practise)",
        native_language=native or UNKNOWN,
        # One line, whatever the channel allowed in a name.
        learner_name=as_data(" ".join((learner.display_name or UNKNOWN).split()), 100),
        level_description=LEVEL_DESCRIPTIONS.get(
            level or "", "level not known yet: start simple and adapt to how they write"
        ),
        explanation_language=explained_in
        or "the learner's native language if you can tell, else English",
        how_many=HOW_MANY_ALL if density(learner, learned) == ALL else HOW_MANY,
        # Compact JSON: indentation costs tokens in every reply prompt and tells the model nothing.
        profile=as_data(json.dumps(profile, ensure_ascii=False), MAX_PROFILE_CHARS)
        if profile
        else "(nothing learned yet)",
        summary=as_data(context.summary.text, summary_cap_chars) or "(no earlier conversation yet)",
        recall=f"\n\n{recalled}" if recalled else "",
        recalled_named=RECALLED_NAMED if recalled or tool else "",
        # Last, after every stable part: a turn with due items changes only the prompt's end.
        review=review.added if review else "",
        spoken=SPOKEN_RULE if _spoken(context) else "",
    )[0]["content"]
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for message in context.messages:
        if message.role == LEARNER:
            messages.append({"role": "user", "content": message.content})
        else:
            messages.append({"role": "assistant", "content": _said(message.content)})
    return messages


def _soon(plans: object, today: date) -> list[str]:
    """The learner's plans within SOON_DAYS of `today`, at most two, in a few words each:
    "job interview (in 2 days)", "trip to Oaxaca (2026-07)"."""
    said = []
    for plan in upcoming(plans, today):
        if (plan.first - today).days > SOON_DAYS:
            continue
        if plan.is_month:
            when = plan.when
        else:
            days = (plan.first - today).days
            when = "today" if days == 0 else "tomorrow" if days == 1 else f"in {days} days"
        said.append(f"{plan.what} ({when})")
    return said


def _spoken(context: Context) -> bool:
    """Whether the message being answered (the latest) was a voice note."""
    latest = context.messages[-1] if context.messages else None
    return latest is not None and latest.role == LEARNER and latest.spoken_seconds is not None


def _said(stored: str) -> str:
    """What Pam said in a stored reply, for the model to read again: without its correction
    lines (stored apart), and without any reasoning a reply stored before Pam removed it
    from answers carried (never replayed)."""
    if has_reasoning_markup(stored):
        stored = strip_reasoning(stored)
    return corrections.chat_part(stored)
