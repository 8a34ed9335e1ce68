"""The rolling summary: fold everything but the last window of messages into it, atomically."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from memory.config import MemoryConfig
from memory.database.records import LEARNER, StoredMessage
from memory.grounding import sentence_end
from memory.llm import ChatModel, LLMError
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from prompts import as_data, render

log = logging.getLogger(__name__)

# The summary request's output cap, over the summary's own: room for a model that writes past
# the words it was asked for to reach the end of its sentence, instead of being cut mid-word
# (whatever passes the summary's cap is trimmed to a whole sentence here).
SUMMARY_ROOM = 1.5
# One fold reads at most this many tokens of conversation; a longer backlog (after an outage)
# is folded over several runs, oldest first, so one prompt never grows without bound.
MAX_FOLD_INPUT_TOKENS = 8000


@dataclass(frozen=True)
class FoldPlan:
    """Which messages one fold takes: the oldest unfolded ones, never the last window."""

    messages: list[StoredMessage]

    @property
    def watermark(self) -> int:
        """The id of the newest message the fold takes: the summary's new watermark."""
        return self.messages[-1].id


def fold_due(unfolded_count: int, unfolded_tokens: int, config: MemoryConfig) -> bool:
    """A fold is due when the unfolded conversation is over the token trigger and at least a
    batch of it lies outside the verbatim window."""
    # The batch keeps folds rare for learners who write long messages, whose window alone is
    # over the trigger: without it every turn would fold its two newest messages, one more call
    # per message and a summary re-compressed until it drifts. A fold takes everything outside
    # the window, so a batch of 2b messages means at most one fold every b turns.
    outside = unfolded_count - config.window_messages
    return unfolded_tokens > config.summary_trigger_tokens and outside >= config.fold_batch_messages


def plan_fold(unfolded: Sequence[StoredMessage], config: MemoryConfig) -> FoldPlan | None:
    """The next fold over `unfolded` (oldest first), or None when no fold is due."""
    if not fold_due(len(unfolded), sum(m.tokens for m in unfolded), config):
        return None
    foldable = list(unfolded[: max(0, len(unfolded) - config.window_messages)])
    if not foldable:
        return None
    taken: list[StoredMessage] = []
    budget = MAX_FOLD_INPUT_TOKENS
    for message in foldable:
        if taken and message.tokens > budget:
            break
        taken.append(message)
        budget -= message.tokens
    return FoldPlan(taken)


def transcript(messages: Sequence[StoredMessage]) -> str:
    """The messages as a plain `Learner: …` / `Pam: …` transcript."""
    return "\n".join(f"{'Learner' if m.role == LEARNER else 'Pam'}: {m.content}" for m in messages)


def fitted(text: str, truncated: bool, counter: TokenCounter, cap: int) -> str:
    """The summary to keep of the model's answer `text`: as it is when it ended by itself
    within `cap` tokens; else (cut off at the output cap, or longer than `cap`) cut to `cap`
    and trimmed to its last full sentence, so it never ends mid-word."""
    text = text.strip()
    if not truncated and counter.count(text) <= cap:
        return text
    log.info("summary answer over its cap (cut off: %s): kept to its last full sentence", truncated)
    return sentence_end(counter.truncate(text, cap))


def fold(
    learner_id: int,
    *,
    store: Store,
    model: ChatModel,
    counter: TokenCounter,
    config: MemoryConfig,
) -> bool:
    """Fold the learner's older messages into the summary if a fold is due. The new summary and
    its watermark are written together, compare-and-set on the summary's version, so a fold
    that fails, or races another writer or /forget, writes nothing. True if a fold landed."""
    state = store.memory.summary(learner_id)
    plan = plan_fold(store.conversation.messages(learner_id, after=state.watermark), config)
    if plan is None:
        return False
    max_words = max(40, int(config.summary_max_tokens * 0.6))
    prompt = render(
        "summary",
        max_words=str(max_words),
        previous_summary=as_data(state.text, config.summary_max_tokens * 8) or "(none yet)",
        transcript=as_data(transcript(plan.messages), MAX_FOLD_INPUT_TOKENS * 8),
    )
    try:
        completion = model.complete(
            prompt,  # type: ignore[arg-type]
            model=config.memory_model,
            max_tokens=int(config.summary_max_tokens * SUMMARY_ROOM),
            purpose="summary",
        )
    except LLMError as exc:
        # Answers the provider billed but Pam could not use cost all the same.
        store.ledger.record_calls(learner_id, "summary", exc.billed)
        raise
    store.ledger.record_calls(learner_id, "summary", completion.calls)
    text = fitted(completion.text, completion.truncated, counter, config.summary_max_tokens)
    if not text:
        # Not even a whole word to keep: the old summary stays, the fold is tried again later.
        log.warning("fold for learner %s discarded: no whole sentence in the answer", learner_id)
        return False
    written = store.memory.save_summary(
        learner_id,
        state.version,
        text,
        counter.count(text),
        plan.watermark,
        previous_watermark=state.watermark,
    )
    if not written:
        log.info("fold for learner %s discarded: the summary changed meanwhile", learner_id)
    return written
