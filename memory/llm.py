"""The chat-model edge: one small interface and its kinds of failure. The OpenAI-compatible
implementation is `bot.llm.openai_chat`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict

Purpose = Literal["reply", "summary", "profile", "translate", "explain", "checkin"]
# How a model is asked for JSON (PAM_STRUCTURED_OUTPUT): a schema the server enforces, the
# schema inside JSON mode (llama.cpp's servers), JSON mode, the prompt's word alone, or `auto`
# (learned per model); and how hard a reasoning model
# thinks (PAM_REASONING_EFFORT, `off`: not sent). Operator settings, named here, at the edge
# they configure, so that the settings and the adapters both depend on it and not on each other.
StructuredOutput = Literal["auto", "json_schema", "json_object_schema", "json_object", "off"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "off"]


class ChatMessage(TypedDict):
    """One message of a chat prompt, as chat-completions APIs take it. An assistant message
    that called tools carries them in `tool_calls` (its content may be empty); the answer to
    one call is a "tool" message naming the call's id in `tool_call_id`."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]


# A JSON schema for structured output: {"name": ..., "schema": {...}} as OpenAI's
# `response_format: {"type": "json_schema", "json_schema": ...}` takes it.
JsonSchema = dict[str, Any]
# A caller's check of an answer's text: None when it can use it, else why not (for the log;
# never the text itself).
Accept = Callable[[str], str | None]
# A function the model may call, as chat-completions APIs take it:
# {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}.
Tool = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool the model asked for: the provider's id for it, the function's name
    and its arguments as the model wrote them (JSON text, untrusted: the caller parses and
    checks them)."""

    id: str
    name: str
    arguments: str

    def message_part(self) -> dict[str, Any]:
        """This call as an assistant message's `tool_calls` entry takes it."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


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
    output cap. `tool_calls`: the tools the model asked to call (only when it was offered
    tools); its `text` is then whatever it wrote beside them, maybe nothing."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    truncated: bool = False
    billed: tuple[Usage, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def calls(self) -> tuple[Usage, ...]:
        """Every call billed for this completion: the unusable ones, then its own."""
        return (*self.billed, Usage(self.model, self.input_tokens, self.output_tokens))


class LLMError(Exception):
    """The model gave no usable answer, after the client's own retries. `billed`: the calls
    that were made (and billed) on the way, to record in usage. `advice`: what an operator
    should do about it, where there is something (an Outage or a Misconfigured says)."""

    advice: str | None = None

    def __init__(self, message: str, billed: tuple[Usage, ...] = ()) -> None:
        super().__init__(message)
        self.billed = billed


class Outage(LLMError):
    """The provider was unreachable, timed out, rate-limited or failed (5xx): worth trying
    the whole turn again later, with backoff. `advice`: set when an operator should look
    (the base URL cannot be reached at all), naming the URL. `retry_after`: seconds the turn
    should wait at least before it is tried again (a server that timed out may still be
    working on the request for that long), None for the usual backoff."""

    def __init__(
        self,
        message: str,
        billed: tuple[Usage, ...] = (),
        *,
        advice: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, billed)
        self.advice = advice
        self.retry_after = retry_after


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


class ToolsRefused(LLMError):
    """The provider will not take tools for this model (a server started without tool
    calling, a model without it): learned once per process, after which asking with tools
    raises this at once, without a request. Ask again without tools."""


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
        accept: Accept | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> Completion:
        """Answer `messages` with `model`; with `schema`, ask for JSON of that shape
        (structured output where the provider has it). `accept` checks an answer's text as
        the caller will read it: one it rejects is unusable, asked again within the same
        budget as any other. With `tools`, the model may answer with tool calls instead
        (`Completion.tool_calls`; `accept` does not check text that comes with them), and
        ToolsRefused says the provider takes no tools. Raise LLMError (one of its kinds)
        when no answer can be had."""
        ...
