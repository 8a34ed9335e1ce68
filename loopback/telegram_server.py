"""A small fake Telegram Bot API on 127.0.0.1: the real python-telegram-bot `Bot` talks to it
(TELEGRAM_API_URL). It records every call and answers like Telegram, with scriptable
failures: 429 with retry_after, 403 (blocked), 400 for formatting, 409 for polling. Uploads
(sendPhoto) come as multipart/form-data, as the real client sends them."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl

from loopback.local_server import Answer, LocalServer

BOT_ID = 123456
TOKEN = f"{BOT_ID}:TEST-token_abcdefghijklmnopqrstuvwxyz"
USERNAME = "PamTestBot"


@dataclass
class Call:
    """One Bot API call: the method and its parameters (JSON-decoded where they were)."""

    method: str
    params: dict[str, Any]


@dataclass
class Failure:
    """A scripted error answer for the next call of `method`."""

    method: str
    status: int
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


def _value(text: str) -> Any:
    """A parameter's value, JSON-decoded where it is JSON (as the Bot API reads it)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def form_data(content_type: str, raw: bytes) -> dict[str, Any]:
    """The fields of a multipart/form-data body (an upload: sendPhoto): a file as its bytes,
    any other field as `_value` reads it."""
    message = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    params: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        params[name] = payload if part.get_filename() else _value(payload.decode())
    return params


class TelegramServer(LocalServer):
    """Serve the Bot API for TOKEN until closed; use as a context manager."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.failures: deque[Failure] = deque()
        self.updates: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.message_ids = 1000
        super().__init__()

    @property
    def base_url(self) -> str:
        """The value for TELEGRAM_API_URL (the part before the token)."""
        return f"{self.origin}/bot"

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if "json" in content_type:
            params = dict(json.loads(raw or b"{}"))
        elif content_type.startswith("multipart/form-data"):
            params = form_data(content_type, raw)
        else:
            params = {key: _value(value) for key, value in parse_qsl(raw.decode())}
        status, body = self.handle(path, params)
        return status, {}, json.dumps(body).encode()

    def fail_next(self, *failures: Failure) -> None:
        with self.lock:
            self.failures.extend(failures)

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def sent_texts(self, chat_id: str | int | None = None) -> list[str]:
        """The texts of every successful sendMessage, in order."""
        return [
            c.params["text"]
            for c in self.of("sendMessage")
            if chat_id is None or str(c.params.get("chat_id")) == str(chat_id)
        ]

    def handle(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prefix = f"/bot{TOKEN}/"
        if not path.startswith(prefix):
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        method = path[len(prefix) :]
        with self.lock:
            failure = next((f for f in self.failures if f.method == method), None)
            if failure is not None:
                self.failures.remove(failure)
            else:
                self.calls.append(Call(method, params))
        if failure is not None:
            body: dict[str, Any] = {
                "ok": False,
                "error_code": failure.status,
                "description": failure.description,
            }
            if failure.parameters:
                body["parameters"] = failure.parameters
            return failure.status, body
        return 200, {"ok": True, "result": self.result(method, params)}

    def result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return {"id": BOT_ID, "is_bot": True, "first_name": "Pam", "username": USERNAME}
        if method in ("sendMessage", "sendPhoto"):
            with self.lock:
                self.message_ids += 1
                message_id = self.message_ids
            chat_id = int(params["chat_id"])
            message = {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
                "from": {"id": BOT_ID, "is_bot": True, "first_name": "Pam"},
            }
            if method == "sendMessage":
                return message | {"text": params["text"]}
            size = len(params.get("photo") or b"")
            photo = {"file_id": f"photo-{message_id}", "file_unique_id": f"u{message_id}"}
            return message | {
                "photo": [photo | {"width": 1000, "height": 1200, "file_size": size}],
                "caption": params.get("caption", ""),
            }
        if method == "getUpdates":
            offset = int(params.get("offset") or 0)
            with self.lock:
                ready = [u for u in self.updates if u["update_id"] >= offset]
            if not ready:
                time.sleep(min(0.2, float(params.get("timeout") or 0)))
            return ready
        return True  # sendChatAction, setWebhook, deleteWebhook, setMyCommands, …
