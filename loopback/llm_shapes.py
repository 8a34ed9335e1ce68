"""The error bodies OpenAI sends when a model refuses a parameter (the reasoning models refuse
max_tokens and any temperature but 1), with the sources that recorded them. The loopback
OpenAI server answers with them and tests/llm_shapes.py lists them among the other shapes;
`encoded` makes a response body."""

from __future__ import annotations

import json
from typing import Any


def encoded(body: object) -> bytes:
    """A response body as a server sends it."""
    return json.dumps(body, ensure_ascii=False).encode()


# o1/o3/o4-mini/gpt-5*: 400 for max_tokens, as quoted in
# https://github.com/griptape-ai/ComfyUI-Griptape/issues/312 (gpt-5) and
# https://github.com/ITSpecialist111/ai_automation_suggester/issues/38 (o1).
OPENAI_REFUSES_MAX_TOKENS = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


# ... and for any temperature but 1: https://github.com/gabrii/Cursor-Azure-GPT-5/issues/33,
# https://github.com/holoviz/lumen/pull/1087 (the value sent is quoted in the message).
def openai_refuses_temperature(value: object) -> dict[str, Any]:
    return {
        "error": {
            "message": f"Unsupported value: 'temperature' does not support {value} with this "
            "model. Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
