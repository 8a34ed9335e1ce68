"""What an OpenAI-compatible server's error says, whatever its shape and status. One reader of
every body such servers send — OpenAI's error object, vLLM's unwrapped one, Ollama's string,
FastAPI's `detail` (a string, an object, or a list of validation errors), llama-cpp-python's
validation errors wrapped into a 500, plain text — and one classifier of what an error means
for Pam: a request shape the model refuses (a parameter, a response format, tools: stepped
down once), a setting an operator must fix (the key, the model, the voice, the URL), an outage
worth trying again, or a request the server would refuse again. The chat (bot.llm.openai_chat) and
the audio API (bot.llm.openai_audio) read their errors here, and bot.llm.failures turns what they
mean into Pam's LLMError kinds for both alike."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import openai

# How much of a server's words are kept: enough for an operator to recognise the cause, never
# a whole page of them in a log line.
MESSAGE_CHARS = 300
# The statuses whose body may name a refused part of the request. A 5xx among them: servers
# built on FastAPI (llama-cpp-python) answer a request they cannot validate with a 500. 429,
# 408, 409 and the gateways' 502-504 never are: they say "later", whatever else they say.
REFUSAL_STATUSES = frozenset({400, 404, 405, 415, 422, 500, 501})
TRANSIENT_STATUSES = frozenset({408, 409, 429})
GATEWAY_STATUSES = frozenset({502, 503, 504})

# FastAPI validation errors as str(RequestValidationError) writes them, the way
# llama_cpp/server/errors.py puts them into its 500's message: a list of dict reprs, each with
# `'loc': ('body', 'response_format', 'type')` and `'msg': "Input should be ..."`.
_REPR_LOC = re.compile(r"""'loc':\s*[(\[]([^)\]]*)[)\]]""")
_REPR_MSG = re.compile(r"""'msg':\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")
_QUOTED = re.compile(r"""^\s*['"]?(.*?)['"]?\s*$""")
# Where a FastAPI location starts: the part of the request, then the field.
_LOC_ROOTS = frozenset({"body", "query", "path", "header", "cookie", "form"})
_HTML = re.compile(r"^\s*<")

# A wrong model name, in the words of OpenAI ("The model `x` does not exist", code
# model_not_found), Ollama ('model "x" not found'), vLLM ("The model `x` does not exist."),
# faster-whisper-server ("unknown model: whisper-1"), fastkokoro ("Unsupported model 'tts-1'")
# and Kokoro-FastAPI ("Unsupported model: tts-2", error "invalid_model").
_NO_SUCH_MODEL = re.compile(
    r"\b(?:unknown|unsupported|invalid) model\b|model_not_found|invalid_model"
    r"|\bmodel\b.*\b(?:not found|does not exist|not exist|is not available|not available)\b",
    re.IGNORECASE,
)
# A voice the speech server lacks: fastkokoro ("Voice 'coral' is not available"),
# Kokoro-FastAPI ("Voice 'coral' not found. Available voices: ...").
_NO_SUCH_VOICE = re.compile(
    r"\bvoice\b.*\b(?:not found|does not exist|not exist|not available|unknown|unsupported"
    r"|invalid)\b|\b(?:unknown|unsupported|invalid) voice\b",
    re.IGNORECASE,
)

Cause = Literal["key", "quota", "forbidden", "model", "voice", "endpoint"]
Kind = Literal["flagged", "refused", "misconfigured", "outage", "rejected"]
# The codes of a prompt the provider's own safety check stopped: OpenAI's reasoning models
# ("invalid_prompt", a 400) and Azure's content filter ("content_filter").
FLAGGED_CODES = frozenset({"invalid_prompt", "content_filter"})


@dataclass(frozen=True)
class ServerError:
    """One error answer, read: its status, the server's words (one line, capped; "" when it
    said nothing readable), the OpenAI-style `code`, `param` and `type` where it sent them,
    and `fields`: the request's top-level fields a validation error points at. `body` is the
    body as the SDK parsed it, for what one provider adds (Groq's failed_generation,
    OpenRouter's metadata, Azure's innererror)."""

    status: int
    message: str = ""
    code: str | None = None
    param: str | None = None
    type: str | None = None
    fields: tuple[str, ...] = ()
    body: object = None

    @property
    def words(self) -> str:
        """The error in a few words, for logs and advice: its code and message."""
        said = " ".join(part for part in (self.code, self.message) if part)
        return said[:160] or "(no message)"

    def names(self, field: str, words: re.Pattern[str] | None = None) -> bool:
        """Whether the error points at request field `field`: its `param`, a validation
        error's location, or (with `words`) the server's words."""
        if field in (self.param, *self.fields):
            return True
        return words is not None and bool(words.search(self.message))


@dataclass(frozen=True)
class Verdict:
    """What an error means: `kind` and, for a misconfiguration, its `cause`."""

    kind: Kind
    cause: Cause | None = None


@dataclass(frozen=True)
class Edge:
    """What advice about one edge names: the server ("LLM server", "speech server") at URL
    `base`, the `model` asked for, the settings of its key, model and voice, and what a 404
    there means (`missing`: the endpoint is not where the base URL says)."""

    server: str
    base: str
    model: str
    key_settings: str
    model_settings: str
    missing: str
    voice_settings: str = ""


def advice(verdict: Verdict, error: ServerError, edge: Edge) -> str:
    """What an operator should do about a rejection at `edge`, naming the URL, the model and
    the setting to change (never the key)."""
    base, status, said = edge.base, error.status, error.words
    where = f"The {edge.server} at {base}"
    if verdict.cause == "key":
        return f"{where} rejected the API key (401): check {edge.key_settings}."
    if verdict.cause == "quota":
        return f"The account at {base} has no credit or quota left ({status}): top it up."
    if verdict.cause == "forbidden":
        return (
            f"{where} refused access to model {edge.model!r} (403): check {edge.key_settings}, "
            "the key's permissions and that the model is available to the account."
        )
    if verdict.cause == "voice" and edge.voice_settings:
        return f"{where} has no such voice ({status}: {said}): check {edge.voice_settings}."
    if verdict.cause in ("model", "voice"):
        return (
            f"{where} has no model {edge.model!r} ({status}: {said}): check {edge.model_settings}."
        )
    if verdict.cause == "endpoint":
        return f"{base} answered 404: {edge.missing}"
    return f"{where} rejected the request for {edge.model!r} ({status}): {said}"


def read_error(status: int, body: object) -> ServerError:
    """`body` (as the openai SDK parsed it: a dict, a string, None; or raw bytes) read into a
    ServerError, whichever server wrote it."""
    parsed = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    found: dict[str, Any] = {"message": "", "fields": []}
    _walk(parsed, found, depth=0)
    message = found["message"][:20_000]  # a page of traceback is not read to its end
    if not found["fields"] and "'loc'" in message:
        message = _from_repr(message, found)
    message = " ".join(message.split())[:MESSAGE_CHARS]
    return ServerError(
        status=status,
        message=message,
        code=found.get("code"),
        param=found.get("param"),
        type=found.get("type"),
        fields=tuple(dict.fromkeys(found["fields"])),
        body=body,
    )


def server_error(exc: openai.APIStatusError) -> ServerError:
    """The ServerError of an HTTP error the SDK raised."""
    return read_error(exc.status_code, exc.body)


def classify(error: ServerError, refused: bool = False) -> Verdict:
    """What `error` means. `refused`: the caller found that it refuses a part of the request
    it sent (see `refuses`). A prompt the provider's safety check stopped is "flagged" (a
    refusal to answer, not a setting); a wrong key, model or voice is the operator's to fix
    whatever the status; a refusal is one whatever the status (4xx or 5xx); any other 5xx, a
    429 (but for an empty quota), a 408 or a 409 is an outage; a 404 is a wrong URL; the rest
    is a request the server would refuse again ("rejected": each caller knows whose fault
    that is)."""
    status, text = error.status, f"{error.code or ''} {error.type or ''} {error.message}"
    if error.code in FLAGGED_CODES or flagged_reasons(error) is not None:
        return Verdict("flagged")
    if status == 401:
        return Verdict("misconfigured", "key")
    if status == 402 or "insufficient_quota" in text:
        return Verdict("misconfigured", "quota")
    # A gateway's 502-504 and the transient statuses say "later", whatever else they say
    # ("the model is not available right now"): only the others name a wrong setting.
    if status not in TRANSIENT_STATUSES and status not in GATEWAY_STATUSES:
        if error.names("model") or _NO_SUCH_MODEL.search(text):
            return Verdict("misconfigured", "model")
        if error.names("voice") or _NO_SUCH_VOICE.search(text):
            return Verdict("misconfigured", "voice")
    if refused:
        return Verdict("refused")
    if status == 403:
        return Verdict("misconfigured", "forbidden")
    if status in TRANSIENT_STATUSES or status >= 500:
        return Verdict("outage")
    if status == 404:
        return Verdict("misconfigured", "endpoint")
    return Verdict("rejected")


def refuses(
    error: ServerError,
    sent: Mapping[str, Any],
    fields: Collection[str],
    words: Mapping[str, re.Pattern[str]] | None = None,
) -> str | None:
    """The field of `fields` that was sent and that `error` says the server refuses (by its
    `param`, a validation error's location, or the words in `words` for that field), or None.
    Only a status that can carry a refusal counts (REFUSAL_STATUSES), and a 5xx only with
    such words: a bare 500 is an outage, not a lesson."""
    if error.status not in REFUSAL_STATUSES:
        return None
    for field in fields:
        if field in sent and error.names(field, (words or {}).get(field)):
            return field
    return None


def failed_generation(error: ServerError) -> str | None:
    """What the model wrote, in Groq's 400 for JSON mode output that failed its validation
    (code json_validate_failed, the text in `failed_generation`); None for any other error."""
    if error.code != "json_validate_failed":
        return None
    written = error.body.get("failed_generation") if isinstance(error.body, dict) else None
    return written if isinstance(written, str) else ""


def flagged_reasons(error: ServerError) -> list[str] | None:
    """The reasons of OpenRouter's 403 for input its moderation flagged (`metadata.reasons`),
    None for any other error."""
    body = error.body
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if error.status != 403 or not isinstance(metadata, dict) or "flagged_input" not in metadata:
        return None
    reasons = metadata.get("reasons")
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def _walk(node: object, found: dict[str, Any], depth: int) -> None:
    """Collect message, code, param, type and validation locations from one body, however
    the server nested them."""
    if depth > 4:
        return
    if isinstance(node, str):
        if not found["message"] and not _HTML.match(node):
            found["message"] = node
        return
    if isinstance(node, list):
        _validation_errors(node, found)
        return
    if not isinstance(node, dict):
        return
    for key in ("code", "param", "type"):
        value = node.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and key not in found:
            found[key] = str(value)
    message = node.get("message") or node.get("msg")
    if isinstance(message, str) and not found["message"]:
        found["message"] = message
    error = node.get("error")
    if isinstance(error, str) and "code" not in found and found["message"]:
        found["code"] = error  # Kokoro-FastAPI: {"error": "invalid_model", "message": ...}
    elif error is not None:
        _walk(error, found, depth + 1)
    if "detail" in node:
        _walk(node["detail"], found, depth + 1)


def _validation_errors(items: list[Any], found: dict[str, Any]) -> None:
    """FastAPI's `{"detail": [{"loc": [...], "msg": ..., "type": ...}]}`: the messages, each
    with where it points, and the fields."""
    said = []
    for item in items[:8]:
        if not isinstance(item, dict):
            continue
        where = item.get("loc")
        parts = where if isinstance(where, list | tuple) else []
        loc = [str(part) for part in parts if isinstance(part, str | int)]
        field = _field(loc)
        if field:
            found["fields"].append(field)
        msg = item.get("msg")
        if isinstance(msg, str):
            said.append(f"{msg} ({'.'.join(loc[1:] if field else loc)})" if loc else msg)
        kind = item.get("type")
        if isinstance(kind, str) and "type" not in found:
            found["type"] = kind
    if said and not found["message"]:
        found["message"] = "; ".join(said)


def _from_repr(message: str, found: dict[str, Any]) -> str:
    """The validation errors in a message that is str() of FastAPI's RequestValidationError,
    read like `detail` lists: "Input should be 'text' or 'json_object' (response_format.type)"."""
    locs = [
        [_QUOTED.sub(r"\1", part) for part in match.group(1).split(",") if part.strip()]
        for match in _REPR_LOC.finditer(message)
    ]
    msgs = [match.group(1) or match.group(2) or "" for match in _REPR_MSG.finditer(message)]
    if not locs:
        return message
    items = [{"loc": loc, "msg": msg} for loc, msg in zip(locs, msgs, strict=False)]
    if len(msgs) < len(locs):
        items += [{"loc": loc} for loc in locs[len(msgs) :]]
    rewritten: dict[str, Any] = {"message": "", "fields": found["fields"]}
    _validation_errors(items, rewritten)
    return rewritten["message"] or message


def _field(loc: list[str]) -> str | None:
    """The top-level request field a FastAPI location names: ('body', 'response_format',
    'type') → "response_format"; None for the body as a whole."""
    parts = loc[1:] if loc and loc[0] in _LOC_ROOTS else loc
    return parts[0] if parts and not parts[0].isdigit() else None
