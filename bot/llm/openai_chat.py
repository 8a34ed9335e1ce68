"""The ChatModel over the openai SDK: OpenAI itself or any compatible server (Ollama, vLLM,
llama.cpp, LM Studio, OpenRouter, Groq, Azure, DeepSeek). Failed requests are sent again with
backoff (bot.llm.retries: never one the server may still be working on); this module asks
again for what the SDK cannot see (a 200 that is no answer), within a fixed budget, adapts
the request to what each model accepts, and turns the rest into LLMError kinds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import openai
from openai.types.chat import ChatCompletionAssistantMessageParam, ChatCompletionMessageParam

from bot.llm.answers import Reading, complete_json_object
from bot.llm.answers import read_answer as read
from bot.llm.errors import Edge, ServerError, failed_generation, refuses, server_error
from bot.llm.failures import Call, Failures
from bot.llm.requests import OPTIONAL, ModelQuirks, mode_sent, refuses_structured
from bot.llm.retries import CONNECT_SECONDS, Retrying
from memory.llm import (
    Accept,
    ChatMessage,
    Completion,
    Effort,
    JsonSchema,
    LLMError,
    Purpose,
    Refused,
    StructuredOutput,
    Tool,
    ToolsRefused,
    Unusable,
    Usage,
)
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

# Calls whose 200 answer was unusable, at most, for one learner message: a fixed cost, not
# PAM_LLM_MAX_RETRIES (which is about outages, and multiplies with the turn's attempts).
MAX_UNUSABLE_CALLS = 4
# Requests adapted to what a model refuses, at most, within one call: each 400 teaches one
# thing, and there are only so many things to learn.
MAX_ADAPTATIONS = 6


class OpenAIChatModel:
    """A ChatModel over the openai SDK. `structured_output`: "auto" (json_schema, stepping
    down to the schema inside JSON mode, to json_object and to plain instructions when a model
    cannot) or a pinned mode.
    `reasoning_effort` / `memory_reasoning_effort`: what reasoning models are asked for on
    replies and on memory jobs. `sleep` waits between unusable answers (tests pass their
    own)."""

    def __init__(
        self,
        client: openai.OpenAI,
        counter: TokenCounter,
        *,
        structured_output: StructuredOutput = "auto",
        reasoning_effort: Effort = "low",
        memory_reasoning_effort: Effort = "low",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.counter = counter
        self.quirks = ModelQuirks(
            structured_output,
            {
                "reply": reasoning_effort,
                "checkin": reasoning_effort,
                "summary": memory_reasoning_effort,
                "profile": memory_reasoning_effort,
            },
        )
        self.sleep = sleep
        self.failures = Failures(log)
        self._once = self.failures.once  # what a server taught, told once
        # Pam decides what is sent again (bot.llm.retries), not the SDK: never a request the
        # server may still be working on.
        timeout = client.timeout
        read = timeout.read if isinstance(timeout, openai.Timeout) else timeout
        self.retrying = Retrying(client.max_retries, read, self._base_url(), sleep=sleep)
        self._sender = client.with_options(max_retries=0)

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
        """Answer `messages`; see ChatModel. Unusable 200s (`accept` rejecting one too) are
        asked again, at most MAX_UNUSABLE_CALLS calls in all; an answer cut off by the cap
        before it holds any text (or the whole JSON asked for) once more with twice the room.
        An answer with tool calls is returned as it is when `tools` were offered; a model
        that calls a tool it was not offered, and writes nothing else, is unusable at once
        (asked the same, it would call it again)."""
        billed: list[Usage] = []
        room, adaptations = 1, 0
        while True:
            if tools and not self.quirks.takes_tools(model):
                raise ToolsRefused(f"{model} takes no tools here (learned)", tuple(billed))
            params = self.quirks.params(model, purpose, max_tokens, schema, room=room, tools=tools)
            try:
                body = self._post(messages, model, params)
            except openai.APIStatusError as exc:
                error = server_error(exc)
                self._raise_if_tools_refused(error, model, params, billed)
                failed = _failed_generation(error)
                if failed is None:
                    learned = self._learned(model, params, error)
                    if learned is not None and adaptations < MAX_ADAPTATIONS:
                        adaptations += 1
                        self._tell_learned(model, learned, error)
                        continue
                    raise self._rejected(
                        error, model, purpose, tuple(billed), params, type(exc).__name__
                    ) from exc
                reading = failed
            except openai.APIError as exc:  # no answer at all: unreachable, timed out
                raise self._outage(exc, purpose, tuple(billed)) from exc
            # A 200 whose body is not JSON (an HTML error page), or nested past what the
            # json module reads.
            except (ValueError, RecursionError) as exc:
                reading = Reading("unusable", reason=f"the body is not JSON ({type(exc).__name__})")
            else:
                reading = read(body, template_opens=self.quirks.template_opens(model))
            usage = self._usage(reading, messages, model)
            if reading.reasoned and self.quirks.saw_thinking(
                model, template_opened=reading.template_opened
            ):
                log.info("LLM model %s reasons before it answers: leaving it room", model)
            if reading.kind == "refused":
                log.warning("LLM %s call refused: %s", purpose, reading.reason)
                raise Refused(
                    f"the model refused ({reading.reason})", reading.reason, (*billed, usage)
                )
            if reading.tool_calls and not tools:
                if not reading.text:
                    log.warning("LLM %s answer unusable: a call of a tool not offered", purpose)
                    raise Unusable("the model called a tool it was not offered", (*billed, usage))
                reading = replace(reading, tool_calls=())
            if reading.kind == "answer" and reading.tool_calls:
                return replace(
                    _completion(reading.text, usage, billed, truncated=reading.truncated),
                    tool_calls=reading.tool_calls,
                )
            if reading.kind == "answer" and not self._cut_short(reading, schema):
                rejected = accept(reading.text) if accept is not None else None
                if rejected is None:
                    return _completion(reading.text, usage, billed, truncated=reading.truncated)
                reading = replace(reading, kind="unusable", reason=rejected)
            billed.append(usage)
            if reading.kind == "answer":  # cut off before the answer was whole
                if room == 1 and len(billed) < MAX_UNUSABLE_CALLS:
                    log.warning(
                        "LLM %s answer cut off at the cap: asking with twice the room", purpose
                    )
                    room = 2
                    continue
                if reading.text:  # still cut off: the caller salvages what there is
                    return _completion(reading.text, usage, billed[:-1], truncated=True)
                # Reasoning filled even twice the room: the same request would do the same.
                log.warning("LLM %s answer unusable: the output cap left no answer", purpose)
                raise Unusable(f"the output cap left no {purpose} answer", tuple(billed))
            log.warning("LLM %s answer unusable: %s", purpose, reading.reason)
            if len(billed) >= MAX_UNUSABLE_CALLS:
                raise Unusable(
                    f"{len(billed)} unusable answers for the {purpose} call", tuple(billed)
                )
            self.sleep(min(2.0, 0.25 * 2 ** (len(billed) - 1)))

    def _post(self, messages: Sequence[ChatMessage], model: str, params: Mapping[str, Any]) -> Any:
        """One request through the SDK's `create` (the parameters by their names, the messages
        typed); the parsed JSON body of its 200."""
        # The raw response: the SDK still raises for errors, but Pam reads the answer's JSON
        # itself, field by field, as the server sent it: the SDK's typed model drops what it
        # does not know (reasoning, content arrays, an error inside a 200).
        #
        # The typed messages ride in `extra_body`, the SDK's documented way to send a body's
        # keys as they are: passed as `messages`, the SDK walks each one against every member
        # of its message union before it sends a byte, and changes nothing in them (the body
        # is the same: tests/bot/test_openai_tools.py). That walk was 28% of a busy worker's
        # CPU (200 learners at a real model's speed, memory and recall in every prompt: about
        # 6 ms a reply), and the GIL it holds is what every reply lane waits for
        # (docs/benchmarks/speed.md, "What each piece buys").
        raw = self.retrying.send(
            lambda: self._sender.chat.completions.with_raw_response.create(
                model=model,
                messages=[],
                extra_body={"messages": [typed_message(m) for m in messages]},
                **params,
            )
        )
        return raw.http_response.json()

    def _usage(self, reading: Reading, messages: Sequence[ChatMessage], model: str) -> Usage:
        """What the call cost: the provider's usage, or counted here where it is missing or
        all zero (input: the prompt; output: everything written, reasoning included)."""
        input_tokens = reading.input_tokens
        if input_tokens is None:
            input_tokens = sum(self.counter.count_message(m["content"]) for m in messages)
        output_tokens = reading.output_tokens
        if output_tokens is None:
            output_tokens = self.counter.count(reading.spent_text)
        return Usage(reading.model or model, input_tokens, output_tokens)

    @staticmethod
    def _cut_short(reading: Reading, schema: JsonSchema | None) -> bool:
        """Whether a cut-off answer lacks what was asked: any text, or the whole JSON (asked
        for with a schema, or begun by the model: a prompt may ask for JSON too)."""
        if not reading.truncated:
            return False
        json_begun = reading.text.startswith(("{", "```"))
        wants_json = schema is not None or json_begun
        return not reading.text or (wants_json and not complete_json_object(reading.text))

    def _learned(self, model: str, params: Mapping[str, Any], error: ServerError) -> str | None:
        """What an error teaches about `model` (a refused parameter, an unsupported
        structured-output mode), or None."""
        if error.code in ("content_filter", "invalid_prompt"):
            return None
        return self.quirks.learn(model, params, error)

    def _tell_learned(self, model: str, learned: str, error: ServerError) -> None:
        """Tell the operator, once per process and lesson, what the server refused and what
        Pam does now (and which setting would pin it)."""
        pin = ""
        if learned.startswith("cannot do"):
            pin = f"; PAM_STRUCTURED_OUTPUT={self.quirks.mode(model)} starts there"
        elif "reasoning_effort" in learned:
            pin = "; PAM_REASONING_EFFORT=off sends none"
        self._once.warning(
            f"learned {model} {learned}",
            "LLM model %s at %s %s (learned once per process%s; the server said (%s): %s)",
            model,
            self._base_url(),
            learned,
            pin,
            error.status,
            error.words,
        )

    def _raise_if_tools_refused(
        self,
        error: ServerError,
        model: str,
        params: Mapping[str, Any],
        billed: list[Usage],
    ) -> None:
        """Raise ToolsRefused when `error` says the server takes no tools for `model` (learned
        for the rest of the process)."""
        if not self.quirks.refuses_tools(model, params, error):
            return
        self._once.warning(
            f"no tools {model}",
            "LLM model %s at %s takes no tools: Pam answers without offering them (learned "
            "once per process; the server said (%s): %s)",
            model,
            self._base_url(),
            error.status,
            error.words,
        )
        raise ToolsRefused(f"{model} takes no tools ({error.status})", tuple(billed))

    def _rejected(
        self,
        error: ServerError,
        model: str,
        purpose: Purpose,
        billed: tuple[Usage, ...],
        sent: Mapping[str, Any],
        name: str,
    ) -> LLMError:
        """The LLMError for an HTTP error the SDK gave up on, never retries, or that taught
        nothing more; `sent`: the parameters of the request; `name`: the SDK's for the error."""
        structured = refuses_structured(error, sent)
        refused = structured or refuses(error, sent, sorted(OPTIONAL)) is not None
        refusal = None
        if structured:
            refusal = (
                f"The LLM server at {self._base_url()} does not take structured output in "
                f"{mode_sent(sent)} mode for {model!r} ({error.status}: "
                f"{error.words}): set PAM_STRUCTURED_OUTPUT=auto (or off)."
            )
        edge = Edge(
            "LLM server",
            self._base_url(),
            model,
            key_settings="OPENAI_API_KEY",
            model_settings="PAM_MODEL and PAM_MEMORY_MODEL (on Ollama, `ollama pull` it first)",
            missing="OPENAI_BASE_URL should be the OpenAI-compatible API's base, usually ending "
            "in /v1.",
        )
        call = Call(f"LLM {purpose}", billed)
        return self.failures.rejected(error, name, call, edge, refused=refused, refusal=refusal)

    def _outage(
        self, exc: openai.APIError, purpose: Purpose, billed: tuple[Usage, ...]
    ) -> LLMError:
        """The LLMError for a request that got no answer at all."""
        return self.failures.no_answer(
            exc,
            Call(f"LLM {purpose}", billed),
            unreachable_advice=f"Pam cannot reach the LLM server at {self._base_url()}: is it "
            "running, and is OPENAI_BASE_URL right?",
            timed_out_advice=self.retrying.timeout_advice(),
            retry_after=self.retrying.timeout,  # not before the server may be done
        )

    def _base_url(self) -> str:
        """The API base URL, as the operator wrote it in OPENAI_BASE_URL."""
        return str(self.client.base_url).rstrip("/")


def _completion(text: str, usage: Usage, billed: list[Usage], *, truncated: bool) -> Completion:
    """The Completion of a call that cost `usage`, after the unusable calls in `billed`."""
    return Completion(
        text,
        usage.model,
        usage.input_tokens,
        usage.output_tokens,
        truncated=truncated,
        billed=tuple(billed),
    )


def _failed_generation(error: ServerError) -> Reading | None:
    """Groq's 400 for JSON mode output that failed its validation, as what it is: an unusable
    answer the model wrote (and is counted for), asked again like any other; None for any
    other error."""
    written = failed_generation(error)
    if written is None:
        return None
    reason = "json_validate_failed (the server found the JSON invalid)"
    return Reading("unusable", reason=reason, spent_text=written)


def typed_message(message: ChatMessage) -> ChatCompletionMessageParam:
    """`message` as the SDK's typed parameter for its role."""
    role, content = message["role"], message["content"]
    if role == "system":
        return {"role": "system", "content": content}
    if role == "user":
        return {"role": "user", "content": content}
    if role == "tool":
        return {"role": "tool", "content": content, "tool_call_id": message["tool_call_id"]}
    said: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": content}
    if "tool_calls" in message:
        said["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in message["tool_calls"]
        ]
    return said


def openai_client(
    api_key: str | None, base_url: str | None, timeout: float, max_retries: int
) -> openai.OpenAI:
    """The one place Pam constructs the OpenAI client."""
    return openai.OpenAI(
        # Local servers (Ollama, LM Studio) ignore the key but the SDK insists on one.
        api_key=api_key or "not-needed",
        base_url=base_url or None,
        # A connection is made quickly or not at all: a long timeout is for the answer.
        timeout=openai.Timeout(timeout, connect=CONNECT_SECONDS)
        if timeout > CONNECT_SECONDS
        else timeout,
        max_retries=max_retries,
    )
