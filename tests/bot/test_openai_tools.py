"""Tool calling through the real openai SDK against the loopback server: the recall tool
offered, the tool-call answers real servers send read into Completion.tool_calls, a server
that takes no tools learned once per process (ToolsRefused, then no more requests with
tools), and a model calling a tool it was not offered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bot.llm.answers import read_answer
from bot.llm.openai_chat import OpenAIChatModel, openai_client, typed_message
from bot.turn.recall import RECALL_TOOL
from loopback.llm_shapes import encoded
from loopback.openai_server import (
    VLLM_REFUSES_TOOLS,
    Fault,
    OpenAIServer,
    recall_call,
    refuse_tools_like_vllm,
)
from memory.llm import ChatMessage, Completion, Misconfigured, ToolCall, ToolsRefused, Unusable
from memory.tokens import TokenCounter
from tests.error_shapes import OLLAMA_NO_TOOLS

MODEL = "qwen2.5-7b-instruct"
PROMPT: list[ChatMessage] = [
    {"role": "system", "content": "# Task: reply\nYou are Pam."},
    {"role": "user", "content": "¿Te acuerdas de cómo se llama mi perro?"},
]
ARGUMENTS = '{"query": "perro nombre"}'

# Tool-call answers as real servers send them (non-streaming chat completions).
# OpenAI (API reference, "The chat completion object", function calling guide): content
# null, refusal null, finish_reason "tool_calls".
OPENAI = {
    "id": "chatcmpl-abc123",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_12345xyz",
                        "type": "function",
                        "function": {"name": "recall", "arguments": ARGUMENTS},
                    }
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
}
# Ollama's /v1/chat/completions (its OpenAI compatibility layer, openai/openai.go): content
# "", an `index` on each call, and "tool_calls" as finish_reason.
OLLAMA = {
    "id": "chatcmpl-838",
    "object": "chat.completion",
    "created": 1744438886,
    "model": "qwen2.5:7b",
    "system_fingerprint": "fp_ollama",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_hk81qg8b",
                        "index": 0,
                        "type": "function",
                        "function": {"name": "recall", "arguments": ARGUMENTS},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 150, "completion_tokens": 22, "total_tokens": 172},
}
# vLLM with --enable-auto-tool-choice (docs, "Tool Calling"): ids "chatcmpl-tool-…",
# content null, and a `reasoning_content` null field beside them.
VLLM = {
    "id": "chatcmpl-5e0b2d1e",
    "object": "chat.completion",
    "created": 1741570283,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-b99d32848b324eaea4bac5a5830d00b8",
                        "type": "function",
                        "function": {"name": "recall", "arguments": ARGUMENTS},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
            "stop_reason": None,
        }
    ],
    "usage": {"prompt_tokens": 212, "total_tokens": 242, "completion_tokens": 30},
}
# llama.cpp's llama-server with --jinja (docs/function-calling.md): a random id, content
# null, "tool_calls" as finish_reason.
LLAMA_CPP = {
    "id": "chatcmpl-Tc2dQ5QXRCjRA2hC5vMt4Xg9",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-3.5-turbo",
    "system_fingerprint": "b4800-1a2b3c4d",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "recall", "arguments": ARGUMENTS},
                        "id": "qp8VQ9WS7bIqUkHSsdpwTDKiHj3Ky6nb",
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"completion_tokens": 21, "prompt_tokens": 178, "total_tokens": 199},
}
SHAPES = {"openai": OPENAI, "ollama": OLLAMA, "vllm": VLLM, "llama.cpp": LLAMA_CPP}

# What servers that take no tools answer a request offering them.
# Ollama's, for a model whose template has no tools: tests/error_shapes.py.
# llama.cpp started without --jinja (tools/server/utils.hpp): a 500 server_error.
LLAMA_CPP_NO_JINJA = {
    "error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def model(server: OpenAIServer) -> Iterator[OpenAIChatModel]:
    client = openai_client("test-key", server.base_url, 5.0, 0)
    yield OpenAIChatModel(client, TokenCounter("gpt-4o-mini"), sleep=lambda _: None)
    client.close()


def ask(model: OpenAIChatModel, *, tools: bool = True) -> Completion:
    return model.complete(
        PROMPT,
        model=MODEL,
        max_tokens=120,
        purpose="reply",
        tools=[RECALL_TOOL] if tools else None,
    )


@pytest.mark.parametrize("source", sorted(SHAPES))
def test_each_servers_tool_call_shape_is_read(source: str) -> None:
    reading = read_answer(SHAPES[source])
    assert reading.kind == "answer" and reading.text == ""
    (call,) = reading.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("recall", {"query": "perro nombre"})
    assert call.id == SHAPES[source]["choices"][0]["message"]["tool_calls"][0]["id"]  # type: ignore[index]


@pytest.mark.parametrize("source", sorted(SHAPES))
def test_each_servers_tool_call_comes_back_through_the_sdk(
    server: OpenAIServer, model: OpenAIChatModel, source: str
) -> None:
    server.answer_next(SHAPES[source])
    completion = ask(model)
    assert [c.name for c in completion.tool_calls] == ["recall"]
    usage = SHAPES[source]["usage"]
    assert (completion.input_tokens, completion.output_tokens) == (
        usage["prompt_tokens"],  # type: ignore[index]
        usage["completion_tokens"],  # type: ignore[index]
    )


def test_the_request_offers_the_tool_and_lets_the_model_choose(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    ask(model)
    (body,) = server.requests
    assert body["tools"] == [RECALL_TOOL] and body["tool_choice"] == "auto"
    ask(model, tools=False)
    assert "tools" not in server.requests[1] and "tool_choice" not in server.requests[1]


def test_arguments_sent_as_an_object_are_kept_as_json_text() -> None:
    body: dict[str, Any] = json.loads(json.dumps(OLLAMA))
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"query": "perro"}
    (call,) = read_answer(body).tool_calls
    assert json.loads(call.arguments) == {"query": "perro"}


@pytest.mark.parametrize(
    "calls",
    [
        [{"type": "function"}],  # no function
        [{"id": "c", "function": {"arguments": "{}"}}],  # no name
        "recall",  # not a list
        [42],
    ],
)
def test_malformed_calls_are_dropped(calls: object) -> None:
    body: dict[str, Any] = json.loads(json.dumps(OPENAI))
    body["choices"][0]["message"]["tool_calls"] = calls
    reading = read_answer(body)
    assert reading.tool_calls == ()
    assert reading.kind == "unusable"  # and with no content, there is no answer at all


def test_the_tools_answer_goes_back_as_the_api_takes_it(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    """The second request of a tool round: the assistant's call and the tool's answer reach
    the server as the chat-completions API documents them, through the SDK's typed
    messages."""
    call = ToolCall("call_recall_1", "recall", ARGUMENTS)
    said: list[ChatMessage] = [
        *PROMPT,
        {"role": "assistant", "content": "", "tool_calls": [call.message_part()]},
        {"role": "tool", "content": "2026-11-02: mi perro se llama Toby", "tool_call_id": call.id},
    ]
    model.complete(said, model=MODEL, max_tokens=120, purpose="reply", tools=[RECALL_TOOL])
    (body,) = server.requests
    assert body["messages"] == said
    assert body["messages"][2]["tool_calls"] == [
        {
            "id": "call_recall_1",
            "type": "function",
            "function": {"name": "recall", "arguments": ARGUMENTS},
        }
    ]


def test_the_body_is_byte_for_byte_the_one_the_sdks_typed_call_sends(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    """Pam hands the SDK its typed messages in `extra_body`, which skips the SDK's walk of
    them (bot/llm/openai_chat.py): the server must get exactly what `create(messages=...)`
    would send, for every kind of message and the parameters beside them."""
    call = ToolCall("call_recall_1", "recall", ARGUMENTS)
    said: list[ChatMessage] = [
        *PROMPT,
        {"role": "assistant", "content": "Sí: ¿Toby?"},
        {"role": "user", "content": "¡Sí! Y ayer él comió mi zapato 👟."},
        {"role": "assistant", "content": "", "tool_calls": [call.message_part()]},
        {"role": "tool", "content": "2026-11-02: mi perro se llama Toby", "tool_call_id": call.id},
    ]
    model.complete(
        said, model=MODEL, max_tokens=120, purpose="reply", tools=[RECALL_TOOL], schema="reply"
    )
    (sent,) = server.raw_requests
    body = json.loads(sent)
    client = openai_client("test-key", server.base_url, 5.0, 0)
    try:
        client.chat.completions.create(  # the documented call, with the same arguments
            **{key: value for key, value in body.items() if key != "messages"},
            messages=[typed_message(m) for m in said],
        )
    finally:
        client.close()
    assert server.raw_requests[1] == sent
    assert body["messages"] == said


def test_a_call_without_an_id_gets_one() -> None:
    body: dict[str, Any] = json.loads(json.dumps(OPENAI))
    del body["choices"][0]["message"]["tool_calls"][0]["id"]
    assert read_answer(body).tool_calls == (ToolCall("call_0", "recall", ARGUMENTS),)


def test_finish_reason_tool_calls_with_no_calls_is_unusable_and_asked_again(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    body: dict[str, Any] = json.loads(json.dumps(OPENAI))
    del body["choices"][0]["message"]["tool_calls"]
    server.answer_next(body)
    completion = ask(model)  # the second request gets the server's default reply
    assert completion.text and completion.tool_calls == ()
    assert len(completion.billed) == 1 and len(server.requests) == 2


def test_tool_calls_with_content_keep_both(server: OpenAIServer, model: OpenAIChatModel) -> None:
    message = recall_call("perro")
    message["content"] = "Déjame pensar…"
    server.answer_next(
        {**OPENAI, "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )
    completion = ask(model)
    assert completion.text == "Déjame pensar…" and len(completion.tool_calls) == 1


def test_a_tool_call_nobody_offered_is_unusable_at_once(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.answer_next(OPENAI)
    with pytest.raises(Unusable) as failed:
        ask(model, tools=False)
    assert len(failed.value.billed) == 1 and len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, VLLM_REFUSES_TOOLS),
        (400, OLLAMA_NO_TOOLS),
        (500, LLAMA_CPP_NO_JINJA),
        (404, {"error": {"message": "No endpoints found that support tool use.", "code": 404}}),
    ],
)
def test_a_server_that_takes_no_tools_is_learned_once_per_process(
    server: OpenAIServer, model: OpenAIChatModel, status: int, body: dict[str, Any]
) -> None:
    server.fail_next(Fault(status=status, body=encoded(body)))
    with pytest.raises(ToolsRefused) as refused:
        ask(model)
    assert refused.value.billed == ()
    # Learned: the next request with tools is refused here, without a request.
    with pytest.raises(ToolsRefused):
        ask(model)
    assert len(server.requests) == 1
    # Without tools, the model answers as ever.
    assert ask(model, tools=False).text
    assert "tools" not in server.requests[-1]


def test_a_vllm_without_tool_calling_refuses_every_request_with_tools() -> None:
    with OpenAIServer(reject=refuse_tools_like_vllm) as server:
        client = openai_client("test-key", server.base_url, 5.0, 0)
        model = OpenAIChatModel(client, TokenCounter("gpt-4o-mini"))
        with pytest.raises(ToolsRefused):
            ask(model)
        assert ask(model, tools=False).text
        client.close()


def test_other_400s_with_tools_are_not_taken_for_a_refusal_of_tools(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.fail_next(
        Fault(status=400, body=encoded({"error": {"message": "max_tokens is too large"}}))
    )
    with pytest.raises(Misconfigured):
        ask(model)
    assert model.quirks.takes_tools(MODEL)
