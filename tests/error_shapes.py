"""Error bodies of the servers operators run, with the source beside each: what
llama-cpp-python, FastAPI, vLLM, Ollama and the speech servers built on FastAPI answer when they
refuse a request. Structure and wording are the servers'; the values (a model's name, a voice)
are the ones Pam sends by default. loopback.llm_shapes.encoded makes a response body of one;
tests/llm_shapes.py holds the chat errors recorded earlier (OpenAI's, Groq's, LM Studio's)."""

from __future__ import annotations

from typing import Any

# -- llama-cpp-python's server ----------------------------------------------------------------
# llama_cpp/server/errors.py: RouteErrorHandler catches every exception of a route, and any it
# does not recognise becomes a 500 {"error": {"message": str(error), "type":
# "internal_server_error", "param": None, "code": None}}. FastAPI's RequestValidationError
# (fastapi/exceptions.py) keeps the pydantic errors as its args, so str() of it is their list's
# repr. llama_cpp/llama_types.py's ChatCompletionRequestResponseFormat takes only
# Literal["text", "json_object"]: json_schema fails as pydantic's literal_error.
LLAMA_CPP_PYTHON_NO_JSON_SCHEMA = {
    "error": {
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}]",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
# The same handler's 500 for a failure of the model itself (llama_cpp/_internals.py raises
# RuntimeError(f"llama_decode returned {return_code}")): an outage, naming nothing sent.
LLAMA_CPP_PYTHON_DECODE_FAILED = {
    "error": {
        "message": "llama_decode returned -3",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
# ...and a model path that does not exist: its model_not_found formatter, a 400.
LLAMA_CPP_PYTHON_NO_SUCH_MODEL = {
    "error": {
        "message": "The model `gpt-4o-mini` does not exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}


# -- FastAPI ----------------------------------------------------------------------------------
# fastapi/exception_handlers.py, request_validation_exception_handler: a 422
# {"detail": jsonable_encoder(exc.errors())}, each error pydantic's {type, loc, msg, input,
# ctx}. extra_forbidden is pydantic's word for a field a model with extra="forbid" has not got.
def fastapi_validation(*errors: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's 422 body for `errors`."""
    return {"detail": list(errors)}


FASTAPI_EXTRA_MAX_COMPLETION_TOKENS = fastapi_validation(
    {
        "type": "extra_forbidden",
        "loc": ["body", "max_completion_tokens"],
        "msg": "Extra inputs are not permitted",
        "input": 820,
    }
)
# A server whose response_format model forbids extra fields, asked for JSON mode with a schema.
FASTAPI_EXTRA_RESPONSE_FORMAT_SCHEMA = fastapi_validation(
    {
        "type": "extra_forbidden",
        "loc": ["body", "response_format", "schema"],
        "msg": "Extra inputs are not permitted",
        "input": {"type": "object"},
    }
)
FASTAPI_NO_OPUS = fastapi_validation(
    {
        "type": "literal_error",
        "loc": ["body", "response_format"],
        "msg": "Input should be 'mp3' or 'wav'",
        "input": "opus",
        "ctx": {"expected": "'mp3' or 'wav'"},
    }
)


# -- vLLM -------------------------------------------------------------------------------------
# vllm/entrypoints/openai/protocol.py's ErrorResponse, not wrapped in "error": object, message,
# type, param, code. serving_transcription.py (later speech_to_text.py) refuses verbose_json for
# a model without segment timestamps, and before 0.9 any format but text or json.
VLLM_NO_VERBOSE_JSON = {
    "object": "error",
    "message": "Currently do not support verbose_json for openai/whisper-large-v3-turbo",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
VLLM_ONLY_TEXT_OR_JSON = {
    "object": "error",
    "message": "Currently only support response_format `text` or `json`",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


# -- Ollama -----------------------------------------------------------------------------------
# openai/openai.go's NewError wraps the server's words as {"error": {"message", "type"}}; a
# model without tool support is refused in server/routes.go as "<model> does not support tools".
OLLAMA_NO_TOOLS = {
    "error": {
        "message": "registry.ollama.ai/library/gemma2:2b does not support tools",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}


# -- speech and transcription servers ---------------------------------------------------------
# faster-whisper-server 0.0.3 (PyPI; faster_whisper_server/api.py, _select_transcriber): the
# ValueError of models.py ("unknown model: <name>") as a 400 whose detail nests an error object.
FASTER_WHISPER_SERVER_UNKNOWN_MODEL = {
    "detail": {"error": {"message": "unknown model: whisper-1", "type": "invalid_request_error"}}
}
# The same words as a plain-text body, as issue 26's run met them.
UNKNOWN_MODEL_TEXT = b"unknown model: whisper-1"
# fastkokoro 0.7.0 (src/fastkokoro/server.py, generate_speech_response): HTTPException(400)
# with a string detail, for a model it does not serve and for a voice it lacks (voices.py,
# validate_voice_language).
FASTKOKORO_NO_SUCH_VOICE = {"detail": "Voice 'coral' is not available"}
FASTKOKORO_UNSUPPORTED_MODEL = {"detail": "Unsupported model 'kokoro-82m'. Use 'kokoro'."}
# Kokoro-FastAPI (remsky/Kokoro-FastAPI, api/src/routers/openai_compatible.py, create_speech):
# a 400 whose detail is an object with error, message and type; a 500 of the same shape for
# a failure while speaking.
KOKORO_FASTAPI_NO_SUCH_VOICE = {
    "detail": {
        "error": "validation_error",
        "message": "Voice 'coral' not found. Available voices: af_alloy, af_heart, ef_dora",
        "type": "invalid_request_error",
    }
}
KOKORO_FASTAPI_UNSUPPORTED_MODEL = {
    "detail": {
        "error": "invalid_model",
        "message": "Unsupported model: gpt-4o-mini-tts",
        "type": "invalid_request_error",
    }
}
KOKORO_FASTAPI_PROCESSING_ERROR = {
    "detail": {
        "error": "processing_error",
        "message": "Failed to generate audio",
        "type": "server_error",
    }
}
# OpenAI's gpt-4o transcription models take json or text only; the words as quoted in public
# tests of clients that met them (the API reference: "For gpt-4o-transcribe and
# gpt-4o-mini-transcribe, the only supported format is json").
OPENAI_NO_VERBOSE_JSON = {
    "error": {
        "message": "response_format 'verbose_json' is not compatible with gpt-4o-transcribe",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
