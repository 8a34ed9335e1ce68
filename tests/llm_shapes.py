"""Answer shapes of real OpenAI-compatible servers, as their documentation, source or public
bug reports show them, with the source beside each. The structure (field names, nesting,
where reasoning, refusals, filters and errors go) is the server's; the texts are Pam-like
so that tests can check what survives. Bodies are dicts; loopback.llm_shapes.encoded makes a
response body of one, and holds the refusals the loopback OpenAI server sends too."""

from __future__ import annotations

from typing import Any

REPLY = '{"reply": "¡Qué bien! ¿Y qué cocinaste?", "corrections": []}'
REASONING = 'The learner wrote \'yo es\'. Draft: {"reply": "chat message"} — no, first fix it.'


# -- OpenAI ---------------------------------------------------------------------------------
# The chat completion object: https://platform.openai.com/docs/api-reference/chat/object
def openai(content: str | None = REPLY, **message: Any) -> dict[str, Any]:
    """OpenAI's chat.completion; `message` adds or replaces message fields."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": [],
                    **message,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1117,
            "completion_tokens": 46,
            "total_tokens": 1163,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    }


def finished(body: dict[str, Any], reason: str) -> dict[str, Any]:
    """`body` with its first choice's finish_reason set to `reason`."""
    body["choices"][0]["finish_reason"] = reason
    return body


def with_usage(body: dict[str, Any], prompt: object, completion: object) -> dict[str, Any]:
    """`body` with its usage counts replaced."""
    body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}
    return body


# A reasoning model's answer: completion_tokens includes the reasoning tokens, which
# completion_tokens_details names. https://platform.openai.com/docs/guides/reasoning
def openai_reasoning(content: str = REPLY) -> dict[str, Any]:
    body = openai(content)
    body["model"] = "o3-mini-2025-01-31"
    body["usage"]["completion_tokens"] = 1236
    body["usage"]["completion_tokens_details"]["reasoning_tokens"] = 1024
    return body


# A refusal: content null, the refusal text beside it.
# https://platform.openai.com/docs/guides/structured-outputs#refusals
OPENAI_REFUSAL = openai(None, refusal="I'm sorry, I cannot assist with that request.")

# A prompt the reasoning models' safety check flagged: a 400, code invalid_prompt, as quoted in
# https://github.com/alan-turing-institute/t0-1/issues/69 (and openai/codex#7250).
OPENAI_FLAGGED_PROMPT = {
    "error": {
        "message": "Invalid prompt: your prompt was flagged as potentially violating our usage "
        "policy. Please try again with a different prompt: "
        "https://platform.openai.com/docs/guides/reasoning#advice-on-prompting",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_prompt",
    }
}


# A model without structured outputs (chatgpt-4o-latest, older models); the message as quoted
# in https://github.com/web-infra-dev/midscene/issues/259, in OpenAI's error object.
OPENAI_NO_JSON_SCHEMA = {
    "error": {
        "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
        "with this model. Learn more about supported models at the Structured Outputs guide: "
        "https://platform.openai.com/docs/guides/structured-outputs",
        "type": "invalid_request_error",
        "param": "response_format",
        "code": None,
    }
}

# An unknown model: https://github.com/openai/openai-agents-python/issues/458
OPENAI_NO_SUCH_MODEL = {
    "error": {
        "message": "The model `gpt-5-turbo` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}

# A wrong key, and an account out of quota (429, not worth retrying):
# https://platform.openai.com/docs/guides/error-codes
OPENAI_BAD_KEY = {
    "error": {
        "message": "Incorrect API key provided: sk-proj-********************wxyz. You can find "
        "your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
OPENAI_NO_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


# -- Azure OpenAI ---------------------------------------------------------------------------
# https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter : a completion
# the filter stopped (finish_reason content_filter, the categories in content_filter_results),
# and a prompt it stopped (400, code content_filter, the categories in innererror).
def _categories(**filtered: str) -> dict[str, Any]:
    names = ("hate", "self_harm", "sexual", "violence")
    return {
        name: {"filtered": name in filtered, "severity": filtered.get(name, "safe")}
        for name in names
    }


AZURE_FILTERED_ANSWER = {
    "id": "chatcmpl-AZ3e5fTrJ0lC2oQ8WXQ7Iq4T0dKkQ",
    "object": "chat.completion",
    "created": 1727799043,
    "model": "gpt-4o-2024-08-06",
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _categories()}],
    "choices": [
        {
            "index": 0,
            "finish_reason": "content_filter",
            "message": {"role": "assistant"},
            "content_filter_results": _categories(violence="medium"),
        }
    ],
    "usage": {"prompt_tokens": 812, "completion_tokens": 17, "total_tokens": 829},
}
AZURE_FILTERED_PROMPT = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
        "content management policy. Please modify your prompt and retry. To learn more about "
        "our content filtering policies please read our documentation: "
        "https://go.microsoft.com/fwlink/?linkid=2198766",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": _categories(self_harm="medium"),
        },
    }
}


# -- Ollama ---------------------------------------------------------------------------------
# openai/openai.go in ollama/ollama (fb30760): ToChatCompletion puts the model's thinking in
# `reasoning` when the model thinks and the request asked for it; without that (older
# versions, `think` unset on models whose template does not separate it) the <think> block
# stays in `content`. NewError gives 404 the type not_found_error; server/routes.go words a
# missing model as below.
def ollama(content: str, reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    return {
        "id": "chatcmpl-312",
        "object": "chat.completion",
        "created": 1740400000,
        "model": "deepseek-r1:8b",
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1021, "completion_tokens": 318, "total_tokens": 1339},
    }


OLLAMA_NO_SUCH_MODEL = {
    "error": {
        "message": 'model "llama3.1" not found, try pulling it first',
        "type": "not_found_error",
        "param": None,
        "code": None,
    }
}


# -- vLLM -----------------------------------------------------------------------------------
# https://docs.vllm.ai/en/v0.11.2/features/reasoning_outputs/ : with a reasoning parser the
# thinking is in `reasoning` (called `reasoning_content` before 0.11, e.g.
# https://docs.vllm.ai/en/v0.8.3/features/reasoning_outputs.html).
def vllm(content: str, reasoning: str, field: str = "reasoning") -> dict[str, Any]:
    return {
        "id": "chatcmpl-6d0c3f0b9e1a4f4e8f53c2a1d2b7c9e0",
        "object": "chat.completion",
        "created": 1740400000,
        "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    field: reasoning,
                    "content": content,
                    "tool_calls": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 1021, "total_tokens": 1400, "completion_tokens": 379},
        "prompt_logprobs": None,
    }


# vLLM's error is not wrapped in "error"; an unknown model, as recorded in public test output
# against `vllm serve` (the message format of vllm/entrypoints/openai/serving_engine.py).
VLLM_NO_SUCH_MODEL = {
    "object": "error",
    "message": "The model `llama3.1` does not exist.",
    "type": "NotFoundError",
    "param": None,
    "code": 404,
}


# -- llama.cpp server -----------------------------------------------------------------------
# tools/server/README.md in ggml-org/llama.cpp: the OAI-compatible answer, with `timings`.
# With --reasoning-format deepseek (the default) the thinking is in `reasoning_content`;
# with `none`, or streamed, it stays in the content (https://github.com/ggml-org/llama.cpp/issues/13867).
# DeepSeek-R1's chat template ends the prompt with "<think>\n", so the content starts with the
# reasoning and only "</think>" appears (https://docs.sglang.io/docs/advanced_features/separate_reasoning:
# "DeepSeek-R1: No <think> start tag, jumps directly to thinking content").
def llama_cpp(content: str, reasoning: str | None = None, finish: str = "stop") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "choices": [{"finish_reason": finish, "index": 0, "message": message}],
        "created": 1740400000,
        "model": "gpt-3.5-turbo",
        "system_fingerprint": "b5523-aa6dff0",
        "object": "chat.completion",
        "usage": {"completion_tokens": 412, "prompt_tokens": 1021, "total_tokens": 1433},
        "id": "chatcmpl-XW1RvLhQdT2WwGqvR6pX1b0KkqG0WmTb",
        "timings": {"prompt_n": 1021, "predicted_n": 412, "predicted_per_second": 38.2},
    }


# -- LM Studio ------------------------------------------------------------------------------
# It takes json_schema but refuses json_object, with a bare string as the error:
# https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/189,
# https://github.com/willmiao/ComfyUI-Lora-Manager/issues/1033 (LM Studio 0.4.19).
LM_STUDIO_NO_JSON_OBJECT = {"error": "'response_format.type' must be 'json_schema' or 'text'"}


# -- OpenRouter -----------------------------------------------------------------------------
# https://openrouter.ai/docs/api/reference/errors-and-debugging : once the model has started,
# an error comes as a 200 with {"error": {"code", "message", "metadata"}} in the body; a
# moderation flag is a 403 whose metadata names the reasons and the flagged input.
OPENROUTER_ERROR_200 = {
    "error": {
        "code": 502,
        "message": "Your chosen model is down or we received an invalid response from it",
        "metadata": {"provider_name": "DeepInfra"},
    }
}
# 402, in the words of the same page's list of error codes.
OPENROUTER_NO_CREDITS = {
    "error": {
        "code": 402,
        "message": "Your account or API key has insufficient credits. Add more credits and "
        "retry the request.",
    }
}
OPENROUTER_FLAGGED = {
    "error": {
        "code": 403,
        "message": "openai/gpt-4o requires moderation on OpenAI. "
        'Your input was flagged for "harassment".',
        "metadata": {
            "reasons": ["harassment"],
            "flagged_input": "...",
            "provider_name": "OpenAI",
            "model_slug": "openai/gpt-4o",
        },
    }
}


# Reasoning tokens: https://openrouter.ai/docs/use-cases/reasoning-tokens (`reasoning`, and
# the structured `reasoning_details`).
def openrouter_reasoning(content: str = REPLY) -> dict[str, Any]:
    body = openai(content)
    body["id"] = "gen-1740400000-xyz"
    body["model"] = "openai/o3-mini"
    body["provider"] = "OpenAI"
    message = body["choices"][0]["message"]
    message["reasoning"] = REASONING
    message["reasoning_details"] = [
        {"type": "reasoning.text", "text": REASONING, "format": "unknown", "index": 0}
    ]
    return body


# -- Groq -----------------------------------------------------------------------------------
# https://console.groq.com/docs/reasoning : reasoning_format "raw" leaves <think> in the
# content (the default for some models), "parsed" moves it to `reasoning`
# (groq-python's ChatCompletionMessage.reasoning, https://github.com/groq/groq-python/pull/185).
def groq(content: str, reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    return {
        "id": "chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22",
        "object": "chat.completion",
        "created": 1740400000,
        "model": "qwen/qwen3-32b",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1021, "completion_tokens": 402, "total_tokens": 1423},
        "system_fingerprint": "fp_a91d9c2cfb",
        "x_groq": {"id": "req_01jk8hzrb3fd8rtzy0w9z5z0m2"},
    }


# Models without json_schema: the message as quoted in public code against Groq's API
# (see https://console.groq.com/docs/structured-outputs#supported-models).
GROQ_NO_JSON_SCHEMA = {
    "error": {
        "message": "This model does not support response format `json_schema`. See supported "
        "models at https://console.groq.com/docs/structured-outputs#supported-models",
        "type": "invalid_request_error",
    }
}


# JSON mode whose output failed Groq's own validation: a 400 carrying what the model wrote, as
# quoted in https://github.com/thepersonalaicompany/amurex-backend/issues/38 and
# https://github.com/build-with-groq/g1/pull/23 (a maintainer: "the model producing invalid
# JSON", validated before the answer is returned).
GROQ_JSON_VALIDATE_FAILED = {
    "error": {
        "message": "Failed to generate JSON. Please adjust your prompt. See 'failed_generation' "
        "for more details.",
        "type": "invalid_request_error",
        "code": "json_validate_failed",
        "failed_generation": '```json\n{\n   "reply": "¡Qué bien! ¿Y qué cocinaste',
    }
}


# -- DeepSeek -------------------------------------------------------------------------------
# https://api-docs.deepseek.com/guides/reasoning_model : deepseek-reasoner's chain of thought
# in `reasoning_content`, beside the answer; reasoning tokens in the usage details.
def deepseek(content: str = REPLY) -> dict[str, Any]:
    return {
        "id": "930c60df-bf64-41c9-a88e-3ec75f81e00e",
        "object": "chat.completion",
        "created": 1740400000,
        "model": "deepseek-reasoner",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "reasoning_content": REASONING,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1021,
            "completion_tokens": 611,
            "total_tokens": 1632,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 560},
            "prompt_cache_hit_tokens": 0,
            "prompt_cache_miss_tokens": 1021,
        },
        "system_fingerprint": "fp_5417b77867_prod0225",
    }


# -- Mistral --------------------------------------------------------------------------------
# Magistral answers with a content array: a `thinking` part (itself a list of text chunks),
# then the `text` part. https://docs.mistral.ai/capabilities/reasoning/ ; the shape as parsed
# in https://github.com/spring-projects/spring-ai/pull/5020.
def mistral(content: str = REPLY) -> dict[str, Any]:
    return {
        "id": "6d4b1e3fbd4a4f3f8f4b7d2c1a0e9f8d",
        "object": "chat.completion",
        "created": 1740400000,
        "model": "magistral-medium-2509",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": REASONING}]},
                        {"type": "text", "text": content},
                    ],
                    "tool_calls": None,
                    "prefix": False,
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1021, "completion_tokens": 377, "total_tokens": 1398},
    }


# -- llama-cpp-python's server --------------------------------------------------------------
# The chat completion llama_cpp/llama_chat_format.py builds (_convert_text_completion_to_chat):
# id "chat" + the completion's "cmpl-<uuid>", the model as the server names it (the GGUF path
# or --model_alias), `logprobs` null, `usage` always present, finish_reason "length" where the
# output cap stopped it. No reasoning fields, no system_fingerprint.
QWEN_CODER = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def llama_cpp_python(
    content: str, finish: str = "stop", prompt_tokens: int = 1180, completion_tokens: int = 96
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-5f0c2c1e-8f7a-4d7e-9b1e-2b7f3c9d0a41",
        "object": "chat.completion",
        "created": 1764640000,
        "model": QWEN_CODER,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def answers() -> dict[str, dict[str, Any]]:
    """Every server's answer with REPLY as the answer, after whatever reasoning it shows and
    wherever it puts it: fresh bodies, by a name for test ids."""
    return {
        "openai": openai(),
        "openai-o3-mini": openai_reasoning(),
        "ollama-raw": ollama(f"<think>\n{REASONING}\n</think>\n\n{REPLY}"),
        "ollama-reasoning-field": ollama(REPLY, reasoning=REASONING),
        "vllm-reasoning": vllm(REPLY, REASONING),
        "vllm-0.8-reasoning_content": vllm(REPLY, REASONING, "reasoning_content"),
        "llama.cpp-deepseek-format": llama_cpp(REPLY, reasoning=REASONING),
        "llama.cpp-template-opened-think": llama_cpp(f"{REASONING}\n</think>\n\n{REPLY}"),
        "groq-raw": groq(f"<think>{REASONING}</think>\n{REPLY}"),
        "groq-parsed": groq(REPLY, reasoning=REASONING),
        "openrouter-reasoning": openrouter_reasoning(),
        "deepseek-reasoner": deepseek(),
        "mistral-content-array": mistral(),
    }
