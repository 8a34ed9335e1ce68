"""The learned profile: a small JSON document about the learner, updated in the background from
their new messages, validated strictly before it is kept."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from bot.llm import ChatModel
from memory.config import MemoryConfig
from memory.density import is_low_information
from memory.store import LEARNER, CorrectionRecord, ProfileState, Store
from prompts import as_data, render

log = logging.getLogger(__name__)

MAX_PROFILE_CHARS = 4000
# Room for a whole profile at the size cap, even in scripts that take more tokens per char.
PROFILE_MAX_TOKENS = 1500

ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120)]
LongText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=300)]
Language = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
Level = Literal["A1", "A2", "B1", "B2", "C1", "C2"]


class ProfileData(BaseModel):
    """The profile's schema. Unknown keys are rejected, so chat cannot add any."""

    model_config = ConfigDict(extra="forbid")

    who: LongText | None = None
    style: LongText | None = None
    focus: LongText | None = None
    interests: list[ShortText] = Field(default_factory=list, max_length=10)
    misc: list[ShortText] = Field(default_factory=list, max_length=10)
    native_language: Language | None = None
    target_language: Language | None = None
    level: Level | None = None
    recurring_mistakes: list[ShortText] = Field(default_factory=list, max_length=10)


FIELDS = tuple(ProfileData.model_fields)


class InvalidProfile(ValueError):
    """The model's profile answer was not a valid profile; the old profile stays."""


def extract_json_object(text: str) -> Any:
    """The first JSON object in `text`, tolerating code fences and chatter around it.
    Raises ValueError when there is none."""
    text = re.sub(r"^```[a-zA-Z]*\s*|\s*```\s*$", "", text.strip())
    # RecursionError: a degenerate answer such as "[" * 3000 from a looping small model.
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
            return value
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
    raise ValueError("no JSON object found")


def parse_profile_answer(text: str) -> dict[str, Any] | None:
    """The new profile data from the model's answer, or None for "no change".
    Raises InvalidProfile for anything else."""
    try:
        value = extract_json_object(text)
    except ValueError as exc:
        raise InvalidProfile(str(exc)) from None
    if not isinstance(value, dict):
        raise InvalidProfile("the answer is not a JSON object")
    if value.get("no_change") is True and len(value) == 1:
        return None
    value = {k: v for k, v in value.items() if v is not None}
    if isinstance(value.get("level"), str):
        value["level"] = value["level"].strip().upper()
    try:
        data = ProfileData.model_validate(value).model_dump(exclude_none=True)
    except ValidationError as exc:
        raise InvalidProfile(f"{exc.error_count()} schema errors") from None
    data = {k: v for k, v in data.items() if v not in ([], "")}
    if len(json.dumps(data, ensure_ascii=False)) > MAX_PROFILE_CHARS:
        raise InvalidProfile("the profile is over the size cap")
    return data


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


def correction_lines(corrections: Sequence[CorrectionRecord]) -> str:
    """One line per distinct correction, most recent first, with how often it was made: a
    mistake made three times costs one line, and says it recurs."""
    seen: dict[tuple[str, str, str], tuple[CorrectionRecord, int]] = {}
    for c in corrections:
        key = (c.original.casefold(), c.corrected.casefold(), c.category)
        first, times = seen.get(key, (c, 0))
        seen[key] = (first, times + 1)
    return "\n".join(
        f"- {c.original} → {c.corrected} ({c.category})" + (f" ×{times}" if times > 1 else "")
        for c, times in seen.values()
    )


def learn_profile(learner_id: int, *, store: Store, model: ChatModel, config: MemoryConfig) -> bool:
    """Update the learner's profile from their messages after the profile watermark.
    A "no change" answer still advances the watermark; an invalid answer raises InvalidProfile
    and changes nothing. Written compare-and-set: a racing writer or /forget wins. True if the
    watermark moved."""
    state = store.profile(learner_id)
    new = store.messages(learner_id, after=state.watermark, role=LEARNER)
    if not new:
        return False
    if all(is_low_information(m.content) for m in new):
        # "ok", "thanks", "jaja", 👍: nothing to learn, so no LLM call; the watermark moves on.
        return store.save_profile(learner_id, state.version, None, new[-1].id, len(new))
    batch = new[-config.profile_max_batch :]
    corrections = store.corrections(learner_id, limit=10)
    prompt = render(
        "profile",
        current_profile=as_data(json.dumps(state.data, ensure_ascii=False), MAX_PROFILE_CHARS),
        corrections=as_data(correction_lines(corrections), 3000) or "(none)",
        messages=as_data("\n".join(f"- {m.content}" for m in batch), 24000),
    )
    completion = model.complete(
        prompt,  # type: ignore[arg-type]
        model=config.memory_model,
        max_tokens=PROFILE_MAX_TOKENS,
        purpose="profile",
    )
    store.record_usage(
        learner_id, completion.model, "profile", completion.input_tokens, completion.output_tokens
    )
    data = parse_profile_answer(completion.text)
    if data is not None:
        # Keys the answer leaves out keep their old values: a terse model cannot wipe facts.
        data = {**state.data, **data}
        if len(json.dumps(data, ensure_ascii=False)) > MAX_PROFILE_CHARS:
            raise InvalidProfile("the merged profile is over the size cap")
    written = store.save_profile(learner_id, state.version, data, new[-1].id, len(new))
    if not written:
        log.info("profile update for learner %s discarded: changed meanwhile", learner_id)
    return written
