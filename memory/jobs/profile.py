"""The learned profile: a small JSON document about the learner, updated in the background from
their new messages. The model's answer is read leniently, field by field, and kept strictly:
known fields only, within their caps (see memory.jobs.profile_answer)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from memory.clock import utcnow
from memory.config import MemoryConfig
from memory.database.records import DENSITIES, LEARNER, ProfileState, StoredMessage
from memory.jobs.density import is_low_information
from memory.jobs.plans import merged, plans_supported, without_marks
from memory.jobs.profile_answer import (
    FIELDS,
    LEVELS,
    LIST_FIELDS,
    MAX_PROFILE_CHARS,
    InvalidProfile,
    parse_profile_answer,
)
from memory.jobs.profile_facts import grounded, settled
from memory.llm import ChatModel, JsonSchema, LLMError, Misconfigured, Outage
from memory.review.reads import PatternCount
from memory.store.message_store import Store
from prompts import as_data, render

# What other modules import from here; reading the answer lives in memory.jobs.profile_answer.
__all__ = [
    "FIELDS",
    "MAX_PROFILE_CHARS",
    "PROFILE_SCHEMA",
    "InvalidProfile",
    "document",
    "learn_profile",
    "parse_profile_answer",
    "profile_due",
]

log = logging.getLogger(__name__)

# Room for a whole profile at the size cap, even in scripts that take more tokens per char.
PROFILE_MAX_TOKENS = 1500
# A failed profile update leaves its messages unread, and the next one is due
# `profile_every` informative messages later: the backlog counts the attempts made on it.
# Once it holds this many attempts' worth, a failure passes the batch instead of re-sending
# it for ever (a learner whose words make the model fail or refuse would otherwise cost a
# prompt of up to `profile_max_batch` messages every few turns). Three: one bad answer is
# common, three on the same messages is the batch, not bad luck.
MAX_FAILED_ATTEMPTS = 3
# The profile's recurring mistakes: the learner's most frequent patterns (memory/review/reviews.py
# counts them) lead the list, the model's guesses fill it up to RECURRING_MAX. Every reply
# prompt carries the list: it stays short.
RECURRING_MAX = 3
KNOWN_PATTERNS = 50  # a guess that names any of these is the pattern's, not the model's
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _field_schema(name: str) -> dict[str, Any]:
    """The schema of one profile field: its kind, or null for "unchanged"."""
    if name in LIST_FIELDS:
        kind: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    elif name == "plans":
        text = {"type": "string"}
        plan = {"what": text, "when": text, "mentioned": text}
        kind = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": plan,
                "required": list(plan),
                "additionalProperties": False,
            },
        }
    elif name == "level":
        kind = {"type": "string", "enum": list(LEVELS)}
    elif name == "corrections":
        kind = {"type": "string", "enum": list(DENSITIES)}
    else:
        kind = {"type": "string"}
    return {"anyOf": [kind, {"type": "null"}]}


# Structured output for the profile answer. Strict, because only strict mode makes OpenAI keep
# to the schema (non-strict it is a hint). Strict mode wants every property required and no
# others, so "only the keys that change" is null for the rest, and "no change" is a boolean
# every answer carries. Length and item caps are left out: strict mode has not always taken
# them, other servers' grammars differ, and Pam keeps the caps when it reads the answer.
PROFILE_SCHEMA: JsonSchema = {
    "name": "profile_update",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {
            "no_change": {"type": "boolean"},
            **{name: _field_schema(name) for name in FIELDS},
        },
        "required": ["no_change", *FIELDS],
        "additionalProperties": False,
    },
}


def document(state: ProfileState) -> dict[str, Any]:
    """The profile as shown to people: the learned fields plus `_meta`."""
    learned_at: datetime | None = state.updated_at if state.messages_processed else None
    return {
        **state.data,
        "_meta": {
            "last_learned_at": learned_at.isoformat(timespec="seconds") if learned_at else None,
            "messages_processed": state.messages_processed,
        },
    }


def profile_due(unread_learner_messages: int, config: MemoryConfig) -> bool:
    """Whether a new learner message should trigger a profile update: at every
    `profile_every`-th unread message, so a profile that keeps failing costs one attempt per
    batch, not one per message."""
    every = config.profile_every
    return unread_learner_messages >= every and unread_learner_messages % every == 0


def recurring_mistakes(patterns: Sequence[PatternCount], guessed: Any) -> list[str]:
    """The profile's recurring mistakes: the learner's most frequent mistake patterns
    (`patterns`, as review grouped their corrections), then what the model guessed
    (`guessed`) that names none of them, up to RECURRING_MAX."""
    rules = [p.rule.casefold() for p in patterns]
    named = [p.rule for p in patterns[:RECURRING_MAX]]
    extra = [
        g
        for g in (guessed if isinstance(guessed, list) else [])
        if isinstance(g, str) and not g.casefold().startswith(tuple(rules))
    ]
    return (named + extra)[:RECURRING_MAX]


def _with_patterns(
    store: Store, learner_id: int, old: dict[str, Any], data: dict[str, Any] | None
) -> dict[str, Any] | None:
    """`data` (None: the answer changed nothing) with its recurring mistakes led by the
    learner's patterns, so the profile says what the learner really keeps getting wrong, not
    the model's guess alone; None still when that changes nothing either."""
    patterns = store.reviews.patterns(learner_id, limit=KNOWN_PATTERNS)
    if not patterns:
        return data
    current = old if data is None else data
    mistakes = recurring_mistakes(patterns, current.get("recurring_mistakes"))
    if mistakes == current.get("recurring_mistakes"):
        return data
    return {**current, "recurring_mistakes": mistakes}


def dated(messages: Sequence[StoredMessage]) -> str:
    """The learner's messages for the profile prompt, one a line, each day's under its date
    ("[Thu 2026-12-03]"), so that the model can resolve "on Thursday" to a day: a line per day,
    not per message, as most batches are a day or two."""
    lines: list[str] = []
    day: date | None = None
    for message in messages:
        said = message.said_at.date() if message.said_at is not None else None
        if said is not None and said != day:
            lines.append(f"[{WEEKDAYS[said.weekday()]} {said.isoformat()}]")
            day = said
        lines.append(f"- {message.content}")
    return "\n".join(lines)


def _days(messages: Sequence[StoredMessage]) -> tuple[date, date]:
    """The first and last day `messages` were written on (today for undated ones)."""
    days = [m.said_at.date() for m in messages if m.said_at is not None]
    return (min(days), max(days)) if days else (utcnow().date(), utcnow().date())


def _with_plans(
    data: dict[str, Any], old: dict[str, Any], batch: Sequence[StoredMessage]
) -> dict[str, Any]:
    """`data` with its plans kept to those the learner's words support, dated within the
    batch's days and carrying Pam's marks over (memory.jobs.plans.merged); without the key
    when none of them is supported (the old plans stay), an empty list when every one is over
    (the plans go)."""
    if "plans" not in data:
        return data
    first, last = _days(batch)
    supported = plans_supported(data["plans"], old.get("plans"), [m.content for m in batch])
    if not supported:
        return {k: v for k, v in data.items() if k != "plans"}
    return {**data, "plans": merged(supported, old.get("plans"), first, last)}


def _no_empty_plans(profile: dict[str, Any]) -> dict[str, Any]:
    """`profile` without a plans key that holds no plan."""
    return {k: v for k, v in profile.items() if k != "plans" or v}


def _for_the_model(profile: dict[str, Any]) -> dict[str, Any]:
    """The current profile as the profile prompt shows it: plans without Pam's marks."""
    if "plans" not in profile:
        return profile
    return {**profile, "plans": without_marks(profile["plans"])}


def _pass_failing_batch(
    store: Store,
    learner_id: int,
    state: ProfileState,
    new: list[StoredMessage],
    config: MemoryConfig,
) -> None:
    """After a failed update: move the watermark past `new`, unread, once the backlog holds
    MAX_FAILED_ATTEMPTS attempts' worth of informative messages."""
    informative = sum(not is_low_information(m.content) for m in new)
    if informative < MAX_FAILED_ATTEMPTS * config.profile_every:
        return
    if store.memory.save_profile(learner_id, state.version, None, new[-1].id, 0):
        log.warning(
            "profile for learner %s: no usable answer with %s messages unread (%s attempts' "
            "worth); passed unread",
            learner_id,
            len(new),
            informative // config.profile_every,
        )


def learn_profile(learner_id: int, *, store: Store, model: ChatModel, config: MemoryConfig) -> bool:
    """Update the learner's profile from their messages after the profile watermark, with
    every billed call recorded in usage. A "no change" answer still advances the watermark;
    an answer with nothing readable raises InvalidProfile and changes nothing, as does an
    LLMError (re-raised) — except that a batch that failed MAX_FAILED_ATTEMPTS times is
    passed (see `_pass_failing_batch`). Written compare-and-set: a racing writer or
    /forget wins. True if the watermark moved."""
    state = store.memory.profile(learner_id)
    new = store.conversation.messages(learner_id, after=state.watermark, role=LEARNER)
    if not new:
        return False
    if all(is_low_information(m.content) for m in new):
        # "ok", "thanks", "jaja", 👍: nothing to learn, so no LLM call; the watermark moves on.
        return store.memory.save_profile(learner_id, state.version, None, new[-1].id, len(new))
    batch = new[-config.profile_max_batch :]
    prompt = render(
        "profile",
        current_profile=as_data(
            json.dumps(_for_the_model(state.data), ensure_ascii=False), MAX_PROFILE_CHARS
        ),
        messages=as_data(dated(batch), 24000),
    )
    try:
        completion = model.complete(
            prompt,  # type: ignore[arg-type]
            model=config.memory_model,
            max_tokens=PROFILE_MAX_TOKENS,
            purpose="profile",
            schema=PROFILE_SCHEMA,
        )
    except LLMError as exc:
        store.ledger.record_calls(learner_id, "profile", exc.billed)
        # An outage or a wrong setting says nothing about the batch: it is tried again.
        if not isinstance(exc, Outage | Misconfigured):
            _pass_failing_batch(store, learner_id, state, new, config)
        raise
    store.ledger.record_calls(learner_id, "profile", completion.calls)
    try:
        data = parse_profile_answer(completion.text, learner_id, state.data)
    except InvalidProfile:
        _pass_failing_batch(store, learner_id, state, new, config)
        raise
    if data is not None:
        # Only what the learner said and did not set is kept (memory.jobs.profile_facts).
        learner = store.learners.get_learner(learner_id)
        data = grounded(data, state.data, [m.content for m in batch], learner)
        data = _with_plans(data, state.data, batch)
        # Keys the answer leaves out keep their old values: a terse model cannot wipe facts.
        data = settled(_no_empty_plans({**state.data, **data}), learner) if data else None
    data = _with_patterns(store, learner_id, state.data, data)
    written = store.memory.save_profile(learner_id, state.version, data, new[-1].id, len(new))
    if not written:
        log.info("profile update for learner %s discarded: changed meanwhile", learner_id)
    return written
