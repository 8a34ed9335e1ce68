"""Reading a chat-completions answer: the text after any reasoning, why the model stopped,
what the provider says it cost, and whether it is an answer at all. Pure functions over the
parsed JSON body, so every shape a real server sends is tested without a server."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from memory.llm import ToolCall
from memory.model_output import unfenced, well_formed

# Reasoning written into the content by servers without a reasoning parser: DeepSeek-R1 and
# Qwen3 (<think>), some fine-tunes (<thinking>), Magistral's [THINK] tokens rendered as text.
_BLOCK = re.compile(
    r"<(think|thinking)>.*?</\1\s*>|\[THINK\].*?\[/THINK\]", re.DOTALL | re.IGNORECASE
)
_CLOSE = re.compile(r"</(?:think|thinking)\s*>|\[/THINK\]", re.IGNORECASE)
_OPEN = re.compile(r"<(?:think|thinking)>|\[THINK\]", re.IGNORECASE)
# Where servers with a parser put the reasoning instead: DeepSeek, vLLM < 0.11, llama.cpp
# (`reasoning_content`); Ollama, Groq "parsed", vLLM >= 0.11 (`reasoning`); OpenRouter
# (`reasoning`, `reasoning_details`). Never read as the answer; counted when usage is missing.
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details")

Kind = Literal["answer", "refused", "unusable"]


@dataclass(frozen=True)
class Reading:
    """What one 200 answer amounts to. `text`: the answer with reasoning removed (empty for
    non-answers). `spent_text`: everything the model wrote, reasoning included, to count
    output tokens when the provider reports none. `reason`: why it is refused or unusable,
    in the provider's words (for the log; never message content). `input_tokens` and
    `output_tokens` are the provider's usage, None where missing or not to be trusted.
    `reasoned`: the answer showed reasoning (a block, a field or reasoning tokens).
    `template_opened`: its reasoning ends in a closing tag that no opening tag begins (the
    chat template opened it in the prompt, as DeepSeek-R1's does). `tool_calls`: the
    well-formed tool calls the message carries (an answer even without text)."""

    kind: Kind
    text: str = ""
    spent_text: str = ""
    truncated: bool = False
    reason: str = ""
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoned: bool = False
    template_opened: bool = False
    tool_calls: tuple[ToolCall, ...] = ()


def strip_reasoning(text: str) -> str:
    """The answer in `text` with reasoning removed: whole <think>…</think> blocks, everything
    up to a closing tag whose opening tag the server's chat template put in the prompt, and
    an opening tag cut off by the output cap with all that follows it."""
    text = _BLOCK.sub("", text)
    closings = list(_CLOSE.finditer(text))
    if closings:
        text = text[closings[-1].end() :]
    opening = _OPEN.search(text)
    if opening:
        text = text[: opening.start()]
    return text.strip()


def has_reasoning_markup(text: str) -> bool:
    """Whether `text` carries reasoning tags of any kind."""
    return bool(_OPEN.search(text) or _CLOSE.search(text))


def opened_by_template(text: str) -> bool:
    """Whether the reasoning in `text` was opened by the chat template: a closing tag comes
    before any opening one."""
    closing, opening = _CLOSE.search(text), _OPEN.search(text)
    return closing is not None and (opening is None or closing.start() < opening.start())


def content_text(content: object) -> tuple[str, str] | None:
    """The answer text and all text written (thinking parts included) of a message's
    `content`: a string, or a content array of typed parts (Mistral, some proxies) whose
    `text` parts are the answer and whose `thinking` parts are reasoning. None if `content`
    is neither."""
    if isinstance(content, str):
        content = well_formed(content)
        return content, content
    if not isinstance(content, list):
        return None
    answer = "".join(
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in ("text", "output_text")
        and isinstance(part.get("text"), str)
    )
    return well_formed(answer), well_formed(_all_text(content))


def _all_text(value: object) -> str:
    """Every string under `value`'s text-bearing keys: what a model wrote, for counting."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_all_text(item) for item in value)
    if isinstance(value, dict):
        return "".join(
            _all_text(value[key]) for key in ("text", "thinking", "summary") if key in value
        )
    return ""


def complete_json_object(text: str) -> bool:
    """Whether `text` holds a whole JSON object (in a Markdown fence or not): False for
    the front half of one that the output cap cut off."""
    text = unfenced(text)
    start = text.find("{")
    if start < 0:
        return False
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return False
    return isinstance(value, dict)


def read_answer(body: object, *, template_opens: bool = False) -> Reading:
    """Classify a 200 body: an answer (maybe cut off at the cap), a refusal or content
    filter (not worth asking again), or unusable (an in-body error, no choices, no text).
    `template_opens`: the model's chat template opens its reasoning in the prompt, so an
    answer cut off before any closing tag is reasoning only (no tag says where it began)."""
    if not isinstance(body, dict):
        return Reading("unusable", reason="the body is not a JSON object")
    model = body.get("model")
    input_tokens, output_tokens, reasoning_tokens = _usage(body.get("usage"))
    billed = Reading(
        "unusable",
        model=model if isinstance(model, str) and model else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # OpenRouter answers 200 with {"error": {...}} when the model failed mid-way.
        error = body.get("error")
        if error is not None:
            return replace(billed, reason=f"an error in the body: {error_words(error)}")
        return replace(billed, reason="no choices in the answer")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    filtered = _filtered(choice.get("content_filter_results"))
    if choice.get("finish_reason") == "content_filter" or filtered:
        reason = "content_filter" + (f" ({', '.join(filtered)})" if filtered else "")
        return replace(billed, kind="refused", reason=reason)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        # The refusal's own words may echo the learner's: only that it refused is logged.
        return replace(billed, kind="refused", reason="refusal", spent_text=refusal)
    texts = content_text(message.get("content"))
    if texts is None:
        if message.get("content") is not None:
            return replace(billed, reason="the content is not text")
        texts = ("", "")
    answer, written = texts
    fields = "".join(_all_text(message.get(name)) for name in REASONING_FIELDS)
    truncated = choice.get("finish_reason") == "length"
    unclosed = template_opens and truncated and not _CLOSE.search(answer)
    calls = tool_calls(message.get("tool_calls"))
    reading = replace(
        billed,
        kind="answer",
        text="" if unclosed else strip_reasoning(answer),
        spent_text=written + fields + "".join(c.name + c.arguments for c in calls),
        tool_calls=calls,
        truncated=truncated,
        template_opened=opened_by_template(answer),
        reasoned=bool(fields.strip())
        or written != answer
        or has_reasoning_markup(answer)
        or unclosed
        or reasoning_tokens > 0,
    )
    if not reading.text and not reading.truncated and not calls:
        # finish_reason "tool_calls" with no (well-formed) call lands here too.
        return replace(reading, kind="unusable", reason="no text in the answer")
    return reading


def tool_calls(value: object) -> tuple[ToolCall, ...]:
    """The well-formed calls of a message's `tool_calls`, as OpenAI, Ollama, vLLM and
    llama.cpp send them ({"id", "type": "function", "function": {"name", "arguments"}});
    arguments as a JSON string, or an object (some servers send one), kept as JSON text.
    Entries without a function name are dropped; a missing id gets one of its own."""
    if not isinstance(value, list):
        return ()
    calls: list[ToolCall] = []
    for index, entry in enumerate(value):
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            arguments = ""
        call_id = entry.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{index}"
        calls.append(ToolCall(call_id, function["name"], arguments))
    return tuple(calls)


def _usage(usage: object) -> tuple[int | None, int | None, int]:
    """Input, output and reasoning tokens as the provider reports them; None where missing or
    not a count, and both None when both are zero (a server that fills in zeros counts
    nothing). Zero input is never a count (no prompt is empty); zero output can be (an empty
    answer)."""
    if not isinstance(usage, dict):
        return None, None, 0
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    if not prompt and not completion:
        return None, None, reasoning or 0
    return prompt or None, completion, reasoning or 0


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _filtered(results: object) -> list[str]:
    """The categories Azure's content filter flagged in `content_filter_results`."""
    if not isinstance(results, dict):
        return []
    return sorted(
        name
        for name, result in results.items()
        if isinstance(result, dict) and result.get("filtered") is True
    )


def error_words(error: Any) -> str:
    """A provider's error body in a few words: its code and message, shortened."""
    if isinstance(error, dict):
        words = " ".join(str(error[key]) for key in ("code", "message") if error.get(key))
    else:
        words = str(error)
    return words[:160] or "(no message)"


def filtered_categories(error_body: object) -> list[str]:
    """The categories an Azure 400 `content_filter` error names in its `innererror`."""
    if not isinstance(error_body, dict):
        return []
    inner = error_body.get("innererror")
    return _filtered(inner.get("content_filter_result")) if isinstance(inner, dict) else []
