"""What to send each model: the output cap under the name it accepts, a temperature where it
takes one, a reasoning effort for reasoning models, the structured-output mode. Known by
name where that is possible, learned once per process from the provider's 400 otherwise."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.llm.errors import REFUSAL_STATUSES, ServerError, refuses
from memory.llm import Effort, JsonSchema, Purpose, StructuredOutput, Tool

# Best first: a schema the server enforces, then the same schema inside JSON mode, then "some
# JSON object", then the prompt's word. The second is for llama.cpp's servers, which may refuse
# json_schema (llama-cpp-python does) but turn a json_object's `schema` into a grammar: its
# ChatCompletionRequestResponseFormat (llama_cpp/llama_types.py) is `type:
# Literal["text", "json_object"]` and `schema: NotRequired[JsonType]`, and
# _grammar_for_response_format (llama_cpp/llama_chat_format.py) builds the grammar from
# `response_format["schema"]` when json_object carries one; llama.cpp's llama-server takes
# `{"type": "json_object", "schema": {...}}` as "schema-constrained JSON"
# (tools/server/README.md). A server that ignores the extra key answers as in JSON mode.
MODES: tuple[str, ...] = ("json_schema", "json_object_schema", "json_object", "off")

# OpenAI's reasoning models, also behind a provider's prefix (OpenRouter's `openai/o3-mini`):
# they refuse `max_tokens` (they take `max_completion_tokens`) and any temperature but 1.
_REASONING_MODEL = re.compile(r"(?:^|/)(?:o[1-9]\d*|gpt-5)(?=$|[-.:_@])", re.IGNORECASE)

# Output tokens a reasoning model may spend thinking before it writes the answer, on top of
# the answer's own cap: the cap counts both, and a reply cut off inside the reasoning is no
# reply at all. Unsent (refused) effort means the provider's default, "medium".
REASONING_ROOM = {"none": 0, "minimal": 512, "low": 2048, "medium": 4096, "high": 8192}
REASONING_ROOM["xhigh"] = 16384
REASONING_ROOM["off"] = REASONING_ROOM["medium"]
# The same for a model seen thinking aloud (DeepSeek-R1, Qwen3 on Ollama or llama.cpp).
THINKING_ROOM = 2048

TEMPERATURE: dict[Purpose, float] = {
    "reply": 0.7,
    "summary": 0.2,
    "profile": 0.2,
    "translate": 0.2,
    "explain": 0.3,
    "checkin": 0.7,  # a friend's message, as a reply is
}

# The parameters Pam can do without, or send under their other name, when a model refuses.
OTHER_NAME = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
OPTIONAL = {"temperature", "reasoning_effort", *OTHER_NAME}
_UNSUPPORTED_PARAMETER = re.compile(r"unsupported (?:parameter|value):\s*['\"`](\w+)", re.I)
# FastAPI servers word an unknown parameter as pydantic's extra_forbidden ("Extra inputs are
# not permitted"), where their models forbid extra fields.
_NOT_SUPPORTED = re.compile(
    r"not supported|unsupported|does not support|not allowed|not permitted|extra_forbidden", re.I
)
STRUCTURED_WORDS = re.compile(r"response_format|json_schema|json_object|structured output", re.I)
# What a server that takes no tools says, asked with them: vLLM without
# --enable-auto-tool-choice ('"auto" tool choice requires --enable-auto-tool-choice and
# --tool-call-parser to be set', 400), Ollama for a model without tool support ("... does not
# support tools", 400), llama.cpp without --jinja ("tools param requires --jinja flag", 500),
# OpenRouter ("No endpoints found that support tool use", 404).
TOOL_WORDS = re.compile(r"\btools?\b|tool[ _-]?choice|tool[ _-]use|function[ _-]?call", re.I)
TOOL_PARAMS = ("tools", "tool_choice")


def refuses_structured(error: ServerError, sent: Mapping[str, Any]) -> bool:
    """Whether `error` says the server cannot do the structured-output mode `sent` asked for."""
    return (
        refuses(error, sent, ("response_format",), {"response_format": STRUCTURED_WORDS})
        is not None
    )


def response_format(mode: str, schema: JsonSchema) -> dict[str, Any] | None:
    """The `response_format` that asks for `schema` (OpenAI's wrapper: name, schema, strict)
    in structured-output `mode`; None in mode off."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": schema}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema["schema"]}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def mode_sent(sent: Mapping[str, Any]) -> str:
    """The structured-output mode (of MODES) a request with parameters `sent` was asked in:
    both JSON modes send type json_object, the one with a schema carries it beside the type."""
    asked = sent.get("response_format")
    if not isinstance(asked, Mapping):
        return "off"
    kind = str(asked.get("type"))
    return "json_object_schema" if kind == "json_object" and "schema" in asked else kind


def is_reasoning_model(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models by its name: o1, o3, o4-mini, gpt-5
    and their variants, with or without a provider prefix."""
    return bool(_REASONING_MODEL.search(model))


@dataclass
class _Learned:
    """What one model turned out to refuse or do, in this process."""

    refused: set[str] = field(default_factory=set)
    mode: int = 0
    thinks: bool = False
    template_opens: bool = False
    no_tools: bool = False


class ModelQuirks:
    """The request parameters for each model, and what its 400s taught (thread-safe: the
    worker's lanes share one instance). `structured_output` "auto" starts at json_schema and
    steps down when the provider says it cannot; any other value pins that mode.
    `efforts`: the reasoning effort per purpose ("off" sends none)."""

    def __init__(
        self, structured_output: StructuredOutput, efforts: Mapping[Purpose, Effort]
    ) -> None:
        self.structured_output = structured_output
        self.efforts = dict(efforts)
        self._learned: dict[str, _Learned] = {}
        self._lock = threading.Lock()

    def _of(self, model: str) -> _Learned:
        return self._learned.setdefault(model, _Learned())

    def mode(self, model: str) -> str:
        """The structured-output mode `model` is asked in now."""
        if self.structured_output != "auto":
            return self.structured_output
        with self._lock:
            return MODES[self._of(model).mode]

    def params(
        self,
        model: str,
        purpose: Purpose,
        max_tokens: int,
        schema: JsonSchema | None,
        *,
        room: int = 1,
        tools: Sequence[Tool] | None = None,
    ) -> dict[str, Any]:
        """The request's parameters besides model and messages, each one the SDK's `create`
        takes by name (a server's own additions ride inside them: the SDK sends keys its types
        do not name as they are, such as llama.cpp's `schema` in a json_object
        `response_format`). `room` multiplies the output
        cap (a cut-off answer is asked again with twice the room); `tools` are offered with
        the model left to choose ("auto")."""
        with self._lock:
            known = self._of(model)
            refused, thinks = set(known.refused), known.thinks
        by_name = is_reasoning_model(model)
        reasoning = by_name or "max_tokens" in refused
        params: dict[str, Any] = {}
        effort = self.efforts.get(purpose, "off")
        if reasoning and effort != "off" and "reasoning_effort" not in refused:
            params["reasoning_effort"] = effort
        cap = max_tokens
        if reasoning:
            cap += REASONING_ROOM[params.get("reasoning_effort", "off")]
        elif thinks:
            cap += THINKING_ROOM
        cap_name = "max_completion_tokens" if reasoning else "max_tokens"
        if cap_name in refused:
            cap_name = OTHER_NAME[cap_name]
        if cap_name not in refused:
            params[cap_name] = cap * room
        if not by_name and "temperature" not in refused:
            params["temperature"] = TEMPERATURE[purpose]
        if schema is not None and (asked := response_format(self.mode(model), schema)):
            params["response_format"] = asked
        if tools:
            params["tools"] = list(tools)
            params["tool_choice"] = "auto"
        return params

    def takes_tools(self, model: str) -> bool:
        """Whether `model` may still be offered tools: False once its server refused them."""
        with self._lock:
            return not self._of(model).no_tools

    def refuses_tools(self, model: str, sent: Mapping[str, Any], error: ServerError) -> bool:
        """Whether `error`, for a request with parameters `sent`, says the server takes no
        tools for `model` (in a 4xx or a 5xx); if so, later requests are not offered any
        (learned once per model and process)."""
        if "tools" not in sent or refuses(error, sent, TOOL_PARAMS, {"tools": TOOL_WORDS}) is None:
            return False
        with self._lock:
            self._of(model).no_tools = True
        return True

    def saw_thinking(self, model: str, *, template_opened: bool = False) -> bool:
        """Note that `model` thinks aloud, so later calls leave it room, and whether its chat
        template opens the reasoning (see `template_opens`); True the first time."""
        with self._lock:
            known = self._of(model)
            first = not known.thinks or (template_opened and not known.template_opens)
            known.thinks = True
            known.template_opens = known.template_opens or template_opened
            return first

    def template_opens(self, model: str) -> bool:
        """Whether `model`'s reasoning was seen opened by its chat template (DeepSeek-R1's
        ends the prompt with "<think>"): then an answer cut off before the closing tag holds
        reasoning only."""
        with self._lock:
            return self._of(model).template_opens

    def learn(self, model: str, sent: Mapping[str, Any], error: ServerError) -> str | None:
        """What `error`, for a request with parameters `sent`, teaches: the parameter `model`
        refuses, or that it cannot do the structured-output mode asked, whatever the status
        that carried it (FastAPI servers refuse with a 500). Returns what changed (for the
        log), or None if the error is about something else. Once learned, later requests no
        longer send it, so a refusal costs one error per model and process."""
        refused = self._refused_parameter(sent, error)
        if refused is not None:
            with self._lock:
                self._of(model).refused.add(refused)
            other = OTHER_NAME.get(refused)
            return f"refuses {refused}" + (f"; sending {other}" if other else "; leaving it out")
        if refuses_structured(error, sent):
            return self._step_down(model, mode_sent(sent))
        return None

    def _refused_parameter(self, sent: Mapping[str, Any], error: ServerError) -> str | None:
        """The optional parameter `error` refuses, from its `param`, a validation error's
        location or else its message."""
        message = error.message
        if error.status not in REFUSAL_STATUSES:
            return None
        if not _NOT_SUPPORTED.search(f"{error.type or ''} {message}"):
            return None  # e.g. "max_tokens is too large": a value to fix, not a parameter
        named = _UNSUPPORTED_PARAMETER.search(message)
        for name in (error.param, *error.fields, named.group(1) if named else None):
            if name in OPTIONAL and name in sent:
                return name
        for name in sorted(OPTIONAL & set(sent)):
            if re.search(rf"['\"`]{name}['\"`]", message):
                return name
        return None

    def _step_down(self, model: str, sent_mode: str) -> str | None:
        """Ask `model` in the mode below `sent_mode` (auto only); None if pinned or nothing
        is left below."""
        if self.structured_output != "auto":
            return None
        with self._lock:
            known = self._of(model)
            # Another lane may have stepped down since this request left: that is enough.
            if MODES[known.mode] == sent_mode and known.mode < len(MODES) - 1:
                known.mode += 1
            mode = MODES[known.mode]
        return None if mode == sent_mode else f"cannot do {sent_mode}; asking in {mode} mode"
