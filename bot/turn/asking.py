"""The reply request of a turn: the prompt, and recall of the learner's past when the turn
calls for it — the `recall` tool offered to the model (PAM_RECALL=tool) and its call answered
in at most one more request, or Pam's own search (auto) — each call the reply cost counted in
the completion's `billed`."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot import corrections
from bot.reply_format import REPLY_SCHEMA, reply_schema
from bot.review.prompt import Asked
from bot.settings import CoreSettings
from bot.turn import recall
from bot.turn.prompt import reply_prompt
from bot.turn.recall import NO_RECALL, RecallUse
from memory.clock import Clock, utcnow
from memory.database.records import LEARNER, Context
from memory.llm import (
    Accept,
    ChatMessage,
    ChatModel,
    Completion,
    LLMError,
    Tool,
    ToolCall,
    ToolsRefused,
    Unusable,
    Usage,
)
from memory.recall.search import Searcher, Snippet
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)


def _previous_reply(context: Context) -> str:
    """What Pam said last before the learner's new message, without its correction lines:
    "" when it has said nothing yet (in the prompt's messages)."""
    earlier = context.messages[:-1] if context.messages else []
    said = next((m.content for m in reversed(earlier) if m.role != LEARNER), "")
    return corrections.chat_part(said)


def _checked(
    completion: Completion, used: RecallUse, accept: Accept
) -> tuple[Completion, RecallUse]:
    """`completion` and `used` as they are, unless the completion is an answer cut off at the
    cap that the client returned without asking `accept` (it salvages what arrived) and
    `accept` turns it down: then Unusable, billed, so that an echo is never Pam's reply."""
    problem = accept(completion.text) if completion.truncated else None
    if problem is not None:
        raise Unusable(problem, completion.calls)
    return completion, used


def _known(context: Context, current_id: int) -> str:
    """What the reply prompt already tells the model, besides the learner's new message:
    what recall need not find."""
    window = (m.content for m in context.messages if m.id != current_id)
    profile = json.dumps(context.profile.data, ensure_ascii=False)
    return "\n".join((context.summary.text, profile, *window))


class Asking:
    """Asks the model for a turn's reply (`ask`), recalling what it needs of the learner's
    past through `searcher` (None: never)."""

    def __init__(
        self,
        model: ChatModel,
        counter: TokenCounter,
        settings: CoreSettings,
        searcher: Searcher | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.model = model
        self.counter = counter
        self.settings = settings
        self.memory = settings.memory
        self.searcher = searcher
        self.clock = clock  # recall's dates go by it

    def ask(
        self,
        learner_id: int,
        text: str,
        context: Context,
        stored_id: int,
        review: Asked | None = None,
    ) -> tuple[Completion, RecallUse]:
        """The reply's completion (every call before its own in `billed`) and what recall
        did. PAM_RECALL=tool offers the model the recall tool and, when it calls it, asks
        once more without tools with what the search found; a provider that takes no tools
        gets the auto path instead (learned once per process by the client). auto searches
        when the message asks for it (bot.turn.recall.wants_recall). `review`: what review adds
        to the prompt and to the answer's schema (bot.review.prompt), on every request."""
        mode = self.memory.recall if self.searcher is not None else "off"
        earlier: tuple[Usage, ...] = ()
        previous = _previous_reply(context)

        def accept(answer: str) -> str | None:
            # JSON with no chat message in it, or an echo, is asked for again (unusable).
            return corrections.answer_problem(answer, text, previous, learner_id)

        if mode == "tool":
            prompt = self._prompt(context, review, tool=True)
            try:
                first = self._complete(prompt, review, accept, tools=[recall.RECALL_TOOL])
            except ToolsRefused as exc:
                earlier, mode = exc.billed, "auto"
            else:
                asked = self._after_tools(first, prompt, learner_id, text, review, accept)
                return _checked(*asked, accept)
        lines, used = "", NO_RECALL
        if mode == "auto" and recall.wants_recall(text, _known(context, stored_id)):
            lines, count = self._recall(learner_id, text)
            used = RecallUse(
                "auto", count, self.counter.count(recall.section(lines)) if count else 0
            )
        prompt = self._prompt(context, review, recall.section(lines) if lines else "")
        return _checked(self._again(prompt, review, accept, earlier), used, accept)

    def _after_tools(
        self,
        first: Completion,
        prompt: list[ChatMessage],
        learner_id: int,
        text: str,
        review: Asked | None,
        accept: Accept,
    ) -> tuple[Completion, RecallUse]:
        """The reply after an answer to a request that offered the recall tool. No tool
        called: that answer. A recall call (the first, if several; anything it wrote beside
        the call is dropped): the search run for this learner with its query (the learner's
        message when its arguments are unusable), then the reply asked without tools. Only
        unknown tools called: the text that came with them if it is a reply, else the reply
        asked again without tools."""
        if not first.tool_calls:
            return first, NO_RECALL
        calls = [c for c in first.tool_calls if c.name == recall.TOOL_NAME]
        if len(first.tool_calls) > 1 or not calls:
            # Counts only: a tool name is the model's text.
            log.info(
                "recall tool answer learner=%s tool_calls=%d recall_calls=%d (running %d)",
                learner_id,
                len(first.tool_calls),
                len(calls),
                min(1, len(calls)),
            )
        if not calls:
            if first.text and accept(first.text) is None:
                return replace(first, tool_calls=()), NO_RECALL
            return self._again(prompt, review, accept, first.calls), NO_RECALL
        query = recall.tool_query(calls[0]) or text
        lines, count = self._recall(learner_id, query)
        # The call as it was run: arguments the model garbled are not sent back to it.
        ran = ToolCall(calls[0].id, recall.TOOL_NAME, json.dumps({"query": query}))
        asked = [*prompt, *recall.tool_exchange(ran, lines)]
        tokens = self.counter.count(recall.section(lines)) if count else 0
        return self._again(asked, review, accept, first.calls), RecallUse("tool", count, tokens)

    def _recall(self, learner_id: int, query: str) -> tuple[str, int]:
        """What a search of `learner_id`'s past for `query` found, as the section's lines
        (under PAM_RECALL_MAX_TOKENS), and how many snippets they hold. A failing search
        finds nothing: recall never costs the learner their reply."""
        assert self.searcher is not None
        try:
            found: Sequence[Snippet] = self.searcher.search(
                learner_id, query, limit=recall.MAX_SNIPPETS
            )
        except Exception as exc:
            log.warning("recall search failed learner=%s: %s", learner_id, type(exc).__name__)
            found = ()
        return recall.snippet_lines(
            found, self.clock(), self.counter, self.memory.recall_max_tokens
        )

    def _prompt(
        self, context: Context, review: Asked | None, recalled: str = "", *, tool: bool = False
    ) -> list[ChatMessage]:
        return reply_prompt(
            context,
            summary_cap_chars=self.memory.summary_max_tokens * 8,
            recalled=recalled,
            tool=tool,
            review=review,
            today=self.clock().date(),
        )

    def _complete(
        self,
        messages: Sequence[ChatMessage],
        review: Asked | None,
        accept: Accept,
        tools: Sequence[Tool] | None = None,
    ) -> Completion:
        """One reply completion, in the schema with `review`'s report when it asks for one;
        `tools` are passed only when offered (older ChatModels take none)."""
        offered: dict[str, Any] = {"tools": tools} if tools else {}
        return self.model.complete(
            messages,
            model=self.settings.llm.model,
            max_tokens=self.settings.llm.reply_max_tokens,
            purpose="reply",
            schema=reply_schema(review.schema) if review else REPLY_SCHEMA,
            accept=accept,
            **offered,
        )

    def _again(
        self,
        messages: Sequence[ChatMessage],
        review: Asked | None,
        accept: Accept,
        earlier: tuple[Usage, ...],
    ) -> Completion:
        """A reply completion without tools, the calls `earlier` billed before it counted
        with it (or with the failure)."""
        try:
            completion = self._complete(messages, review, accept)
        except LLMError as exc:
            exc.billed = (*earlier, *exc.billed)
            raise
        return replace(completion, billed=(*earlier, *completion.billed))
