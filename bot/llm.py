"""The chat-model edge: one small interface, and its OpenAI-compatible implementation."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

import openai

from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

Purpose = Literal["reply", "summary", "profile"]


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


# A JSON schema for structured output: {"name": ..., "schema": {...}} as OpenAI's
# `response_format: {"type": "json_schema", "json_schema": ...}` takes it.
JsonSchema = dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """What one billed call cost: the model that answered, input and output tokens."""

    model: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Completion:
    """What the model answered (its reasoning removed), and what the call cost. `billed`:
    earlier calls made for this completion whose answers were unusable, each billed all the
    same (the caller records them with this one). `truncated`: the answer stopped at the
    output cap."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    truncated: bool = False
    billed: tuple[Usage, ...] = ()


class LLMError(Exception):
    """The model gave no usable answer, after the client's own retries. `billed`: the calls
    that were made (and billed) on the way, to record in usage."""

    def __init__(self, message: str, billed: tuple[Usage, ...] = ()) -> None:
        super().__init__(message)
        self.billed = billed


class Outage(LLMError):
    """The provider was unreachable, timed out, rate-limited or failed (5xx): worth trying
    the whole turn again later, with backoff."""


class Unusable(LLMError):
    """The provider answered (200) with something that is no usable answer — malformed,
    empty, the wrong shape — as often as Pam was willing to ask: not worth asking again."""


class Refused(LLMError):
    """The model refused or its content filter stopped the answer: not retried. `reason`
    is the provider's own word for it (for the log, never shown to the learner)."""

    def __init__(self, message: str, reason: str, billed: tuple[Usage, ...] = ()) -> None:
        super().__init__(message, billed)
        self.reason = reason


class Misconfigured(LLMError):
    """The provider rejected the configuration — a wrong API key, an unknown model, a base
    URL that is not an OpenAI-compatible API: an operator must act. `advice` says what to
    do, naming the URL or model (never the key)."""

    def __init__(self, message: str, advice: str, billed: tuple[Usage, ...] = ()) -> None:
        super().__init__(message, billed)
        self.advice = advice


class ChatModel(Protocol):
    """Anything that can complete a chat: the OpenAI client in production, fakes in tests."""

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> Completion:
        """Answer `messages` with `model`; with `schema`, ask for JSON of that shape
        (structured output where the provider has it). Raise LLMError (one of its kinds)
        when no answer can be had."""
        ...


class OpenAIChatModel:
    """A ChatModel over the openai SDK: OpenAI itself or any compatible server (Ollama, vLLM,
    LM Studio). The SDK retries connection errors, timeouts, 429 and 5xx with exponential
    backoff and honours Retry-After; this class turns what still fails into LLMError."""

    def __init__(self, client: openai.OpenAI, counter: TokenCounter) -> None:
        self.client = client
        self.counter = counter

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> Completion:
        # The SDK retries errors it can see (status codes, timeouts); a 200 whose body is not
        # a completion (a proxy cutting the body, a server glitch) it hands over as is. Such
        # answers are retried here, as often as the SDK would retry an error.
        malformed = 0
        while True:
            try:
                return self._complete_once(messages, model, max_tokens, purpose)
            except _Malformed as exc:
                if malformed >= self.client.max_retries:
                    raise LLMError(str(exc)) from exc
                time.sleep(min(2.0, 0.25 * 2**malformed))
                malformed += 1

    def _complete_once(
        self, messages: Sequence[ChatMessage], model: str, max_tokens: int, purpose: Purpose
    ) -> Completion:
        try:
            # The raw response: the SDK still retries and raises for errors, but does not build
            # its typed model of the answer (half a millisecond a call); the few fields Pam
            # reads are checked here.
            raw = self.client.chat.completions.with_raw_response.create(
                model=model,
                # The SDK walks `messages` against its typed schema on every call: 2.4 ms for
                # a 13-message prompt, a sixth of a whole turn. They are plain dicts of strings
                # already, so they go into the body as they are (extra_body replaces the key).
                messages=[],
                extra_body={"messages": list(messages)},
                max_tokens=max_tokens,
                temperature=0.7 if purpose == "reply" else 0.2,
            )
            body = raw.http_response.json()
        except (openai.APIResponseValidationError, ValueError) as exc:  # a body that is not JSON
            log.warning("LLM %s call failed: %s", purpose, type(exc).__name__)
            raise _Malformed(f"{type(exc).__name__}: {exc}") from exc
        except openai.OpenAIError as exc:
            log.warning("LLM %s call failed: %s", purpose, type(exc).__name__)
            raise LLMError(f"{type(exc).__name__}: {exc}") from exc
        try:
            content = body["choices"][0]["message"]["content"]
        except (IndexError, KeyError, TypeError):
            content = None  # a 200 of the wrong shape from a "compatible" server
        text = content.strip() if isinstance(content, str) else ""
        if not text:
            log.warning("LLM %s call failed: no text in the answer", purpose)
            raise _Malformed(f"the model returned no text for the {purpose} call")
        usage = body.get("usage")
        input_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        output_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if not isinstance(input_tokens, int):  # some servers omit usage: count it ourselves
            input_tokens = sum(self.counter.count_message(m["content"]) for m in messages)
        if not isinstance(output_tokens, int):
            output_tokens = self.counter.count(text)
        answered_by = body.get("model")
        return Completion(
            text,
            answered_by if isinstance(answered_by, str) and answered_by else model,
            input_tokens,
            output_tokens,
        )


class _Malformed(Exception):
    """A 200 that is not a usable completion: worth another try."""


def openai_client(
    api_key: str | None, base_url: str | None, timeout: float, max_retries: int
) -> openai.OpenAI:
    """The one place Pam constructs the OpenAI client."""
    return openai.OpenAI(
        # Local servers (Ollama, LM Studio) ignore the key but the SDK insists on one.
        api_key=api_key or "not-needed",
        base_url=base_url or None,
        timeout=timeout,
        max_retries=max_retries,
    )
