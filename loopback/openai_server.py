"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests: the real openai SDK (and a real
`pam chat` subprocess) talk to it. It records every request and answers each task with
deterministic content, or with queued failures (status codes, delays, broken bodies). It also
serves the audio API (transcriptions and speech), recorded apart from the chat requests."""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loopback.audio_samples import sample
from loopback.llm_shapes import OPENAI_REFUSES_MAX_TOKENS, encoded, openai_refuses_temperature
from loopback.local_server import Answer, LocalServer

TASK = re.compile(r"^# Task: (\w+)", re.MULTILINE)


# The longest a held answer waits for its release (a test that forgot to release it).
HOLD_LIMIT_SECONDS = 900.0


@dataclass
class Fault:
    """One scripted misbehaviour: an HTTP status (with optional headers and body), a delay,
    or an answer held until the test sets `hold` (a call stuck for as long as the test needs,
    whatever the machine's speed)."""

    status: int = 500
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    hold: threading.Event | None = None


@dataclass(frozen=True)
class AudioRequest:
    """One audio API request: its path, its form fields (a transcription's model, language,
    response_format) or JSON body (speech's model, voice, input, response_format), and a
    transcription's uploaded file."""

    path: str
    fields: dict[str, Any]
    file: bytes | None = None
    filename: str | None = None
    file_type: str | None = None


# What the fake hears in every voice note until a test says otherwise (`hear`).
HEARD = "Ayer fui al mercado con mi hermana y compramos fruta."


def verbose_transcription(text: str, seconds: float = 3.0) -> dict[str, Any]:
    """A verbose_json transcription of speech saying `text`: OpenAI's shape (the API
    reference's verbose_json object; openai-python types/audio/transcription_verbose.py), one
    segment with the scores faster-whisper gives a clear voice."""
    segment = {
        "id": 0,
        "seek": 0,
        "start": 0.0,
        "end": seconds,
        "text": f" {text}",
        "tokens": [50364, 10059, 50514],
        "temperature": 0.0,
        "avg_logprob": -0.24,
        "compression_ratio": 1.1,
        "no_speech_prob": 0.02,
    }
    return {
        "task": "transcribe",
        "language": "spanish",
        "duration": seconds,
        "text": text,
        "segments": [segment] if text else [],
    }


def task_of(body: dict[str, Any]) -> str:
    """Which Pam task a chat-completions request is for: reply, summary, profile, checkin…"""
    system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
    match = TASK.search(system)
    return match.group(1) if match else "unknown"


REPLY_ENDINGS = (
    "¡qué interesante! ¿Y luego qué hiciste?",
    "¡no me digas! Cuéntame más, ¿cómo fue?",
)


def default_answer(task: str, body: dict[str, Any], count: int) -> str:
    """Deterministic content per task."""
    if task == "reply":
        # Never Pam's previous reply again, as a real model would not (Pam takes a repeat for
        # no reply): the other ending after this one.
        said = next(  # Pam's previous reply: not a tool call's empty assistant message
            (
                m["content"]
                for m in reversed(body.get("messages", []))
                if m.get("role") == "assistant"
                and isinstance(m.get("content"), str)
                and m["content"]
            ),
            "",
        )
        ending = REPLY_ENDINGS[1] if REPLY_ENDINGS[0] in said else REPLY_ENDINGS[0]
        # Like a real model, it corrects only what the learner's latest message holds (Pam
        # keeps no correction of words the message lacks); a request without one (a test's
        # own) gets the correction, as before.
        wrote = next(
            (
                m.get("content")
                for m in reversed(body.get("messages", []))
                if m.get("role") == "user"
            ),
            None,
        )
        mistaken = not isinstance(wrote, str) or "yo es" in wrote.lower()
        corrections = [
            {
                "original": "yo es",
                "corrected": "yo soy",
                "explanation": "'ser' in first person is 'soy'",
                "category": "conjugation",
            }
        ]
        return json.dumps(
            {
                "reply": f"Respuesta {count}: {ending}",
                "corrections": corrections if mistaken else [],
            },
            ensure_ascii=False,
        )
    if task == "summary":
        return f"Summary #{count}: the learner talks about work, weekends and cooking."
    if task == "profile":
        return json.dumps({"who": "Lena, a nurse from Berlin", "interests": ["cooking"]})
    if task == "checkin":  # never the same twice: Pam takes a repeat of its last message for none
        message = f"¡Hola! Hace días que no hablamos ({count}). ¿Qué tal tu semana?"
        return json.dumps({"message": message, "topic": "their week"}, ensure_ascii=False)
    return "?"


# What vLLM answers a request with tools when it was started without tool calling.
VLLM_REFUSES_TOOLS = {
    "object": "error",
    "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
    "to be set",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


def refuse_tools_like_vllm(body: dict[str, Any]) -> Answer | None:
    """vLLM's 400 for a request offering tools, when started without
    --enable-auto-tool-choice; None for a request without tools."""
    if "tools" in body:
        return 400, {}, encoded(VLLM_REFUSES_TOOLS)
    return None


def recall_call(query: str, call_id: str = "call_recall_1") -> dict[str, Any]:
    """An assistant message calling the recall tool, as OpenAI sends one (content null)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "recall", "arguments": json.dumps({"query": query})},
            }
        ],
    }


def refuse_like_openai_reasoning(body: dict[str, Any]) -> Answer | None:
    """OpenAI's 400 for a reasoning model's request (o1, o3, o4-mini, gpt-5*): `max_tokens` is
    refused first, then any temperature but 1; None for a request it accepts."""
    if "max_tokens" in body:
        return 400, {}, encoded(OPENAI_REFUSES_MAX_TOKENS)
    if body.get("temperature", 1) != 1:
        return 400, {}, encoded(openai_refuses_temperature(body["temperature"]))
    return None


class OpenAIServer(LocalServer):
    """Serve /v1/chat/completions on 127.0.0.1 until `close()`; use as a context manager."""

    def __init__(
        self,
        # The content of the answer, or a whole assistant message (one with tool calls).
        answer: Callable[[str, dict[str, Any], int], str | dict[str, Any]] = default_answer,
        *,
        usage: bool = True,
        reject: Callable[[dict[str, Any]], Answer | None] | None = None,
    ) -> None:
        self.answer = answer
        # Answers a request the server refuses (a 400 for a parameter), None to serve it.
        self.reject = reject
        # Some compatible servers (older Ollama, LM Studio) leave `usage` out of the response.
        self.usage = usage
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []  # the chat requests' bodies, byte for byte
        self.faults: deque[Fault] = deque()
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        # The audio API's requests, kept out of `requests` and `counts` (the chat's).
        self.audio_requests: list[AudioRequest] = []
        self.heard = HEARD
        # What speech comes back as (the OGG/Opus sample until a test says otherwise), and how
        # long the speaker takes: up to `speech_seconds`, or until a test sets `speech_done`.
        self.speech: tuple[bytes, str] = (sample("voice.ogg"), "audio/ogg")
        self.speech_seconds = 0.0
        self.speech_done = threading.Event()
        super().__init__()

    @property
    def base_url(self) -> str:
        """The value for OPENAI_BASE_URL."""
        return f"{self.origin}/v1"

    def fail_next(self, *faults: Fault) -> None:
        """Misbehave on the next requests, one fault each, in order."""
        with self.lock:
            self.faults.extend(faults)

    def answer_next(self, *bodies: object) -> None:
        """Answer the next requests with these 200 bodies (recorded shapes), in order."""
        self.fail_next(*(Fault(status=200, body=encoded(body)) for body in bodies))

    def hear(self, text: str) -> None:
        """Transcribe every voice note from now on as `text`."""
        self.heard = text

    def speak_as(self, audio: bytes, content_type: str) -> None:
        """Answer every speech request from now on with `audio` (a WAV-only server, say)."""
        self.speech = (audio, content_type)

    def speak_slowly(self, seconds: float) -> None:
        """Take up to `seconds` over each speech request from now on, as a CPU speech server
        does; a test that has seen what it waits for ends the wait early with `speech_done`."""
        self.speech_done.clear()
        self.speech_seconds = seconds

    def speech_requests(self) -> list[AudioRequest]:
        """The speech requests received so far (one may still be being answered)."""
        with self.lock:
            return [r for r in self.audio_requests if r.path.endswith("/audio/speech")]

    def of(self, task: str) -> list[dict[str, Any]]:
        """The recorded request bodies for `task`."""
        with self.lock:
            return [r for r in self.requests if task_of(r) == task]

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if path.endswith(("/audio/transcriptions", "/audio/speech")):
            return self.audio(path, content_type, raw)
        with self.lock:
            self.raw_requests.append(raw)
        return self.complete(path, json.loads(raw or b"{}"))

    def audio(self, path: str, content_type: str, raw: bytes) -> Answer:
        """Answer one audio request: a transcription is `{"text": <what it hears>}` (OpenAI's
        json shape), speech is the OGG/Opus voice sample (or what `speak_as` set), after
        `speak_slowly`'s wait."""
        if path.endswith("/audio/speech"):
            request = AudioRequest(path, json.loads(raw or b"{}"))
        else:
            request = _form(path, content_type, raw)
        with self.lock:
            self.audio_requests.append(request)
            fault = self.faults.popleft() if self.faults else None
        scripted = _scripted(fault)
        if scripted is not None:
            return scripted
        if request.path.endswith("/audio/speech"):
            if self.speech_seconds:
                self.speech_done.wait(self.speech_seconds)
            audio, content_type = self.speech
            return 200, {"Content-Type": content_type}, audio
        if request.fields.get("response_format") == "verbose_json":
            return 200, {}, encoded(verbose_transcription(self.heard))
        return 200, {}, encoded({"text": self.heard})

    def complete(self, path: str, body: dict[str, Any]) -> Answer:
        """Answer one chat-completions request."""
        with self.lock:
            self.requests.append(body)
            fault = self.faults.popleft() if self.faults else None
            task = task_of(body)
            self.counts[task] = self.counts.get(task, 0) + 1
            count = self.counts[task]
        scripted = _scripted(fault)
        if scripted is not None:
            return scripted
        if not path.endswith("/chat/completions"):
            return 404, {}, b'{"error": {"message": "not found"}}'
        rejected = self.reject(body) if self.reject is not None else None
        if rejected is not None:
            return rejected
        content = self.answer(task, body, count)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = "stop"
        if isinstance(content, dict):
            message, content = content, content.get("content") or ""
            finish = "tool_calls" if message.get("tool_calls") else "stop"
        prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
        response: dict[str, Any] = {
            "id": f"chatcmpl-{count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": len(content) // 4,
                "total_tokens": prompt_chars // 4 + len(content) // 4,
            },
        }
        if not self.usage:
            del response["usage"]
        return 200, {}, json.dumps(response).encode()


def _scripted(fault: Fault | None) -> Answer | None:
    """The answer of a scripted fault (after its delay), None to answer as usual."""
    if fault is None:
        return None
    if fault.delay:
        time.sleep(fault.delay)
    if fault.hold is not None:
        fault.hold.wait(HOLD_LIMIT_SECONDS)
    if fault.status != 200 or fault.body is not None:
        error = {"error": {"message": "scripted fault", "type": "server_error"}}
        return fault.status, fault.headers, fault.body or json.dumps(error).encode()
    return None


def _form(path: str, content_type: str, raw: bytes) -> AudioRequest:
    """A multipart/form-data transcription request's fields and file."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, Any] = {}
    file, filename, file_type = None, None, None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if name == "file":
            file, filename, file_type = data, part.get_filename(), part.get_content_type()
        elif isinstance(name, str):
            fields[name] = data.decode()
    return AudioRequest(path, fields, file, filename, file_type)
