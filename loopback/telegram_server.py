"""A small fake Telegram Bot API on 127.0.0.1: the real python-telegram-bot `Bot` talks to it
(TELEGRAM_API_URL). It records every call and answers like Telegram, with scriptable
failures: 429 with retry_after, 403 (blocked), 400 for formatting, 409 for polling. An inline
keyboard under a message is recorded with it (`keyboards`), and a learner's tap on one of its
buttons is made as Telegram sends it (`tap`: a callback_query update, for polling or for a
test to post to the webhook). Uploads
(sendPhoto, sendVoice) come as multipart/form-data, as the real client sends them. Files a test
registers (`add_file`) are answered by getFile and downloaded from /file/bot<TOKEN>/<path>, as
Telegram serves them."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl, unquote

from loopback.local_server import Answer, LocalServer, Trickle

BOT_ID = 123456
TOKEN = f"{BOT_ID}:TEST-token_abcdefghijklmnopqrstuvwxyz"
USERNAME = "PamTestBot"
# The hosted Bot API lets a bot download files up to this size; getFile refuses bigger ones.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


@dataclass
class Call:
    """One Bot API call: the method and its parameters (JSON-decoded where they were)."""

    method: str
    params: dict[str, Any]


@dataclass
class StoredFile:
    """A file Telegram keeps: its path on the file server, the size getFile tells (the real
    size unless a test makes it lie), and its bytes (`trickle`: sent that slowly instead)."""

    path: str
    size: int
    data: bytes
    trickle: Trickle | None = None


@dataclass
class Failure:
    """A scripted error answer for the next call of `method` ("download": the next file
    download)."""

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
        self.files: dict[str, StoredFile] = {}  # by file_id
        self.downloads: list[str] = []  # the path of every file download asked for
        self.lock = threading.Lock()
        self.message_ids = 1000
        # What getWebhookInfo reports: the URL setWebhook registered, and what a test says
        # Telegram met delivering to it (the last error, the updates waiting).
        self.webhook_url = ""
        self.webhook_error: str | None = None
        self.webhook_pending = 0
        super().__init__()

    def add_file(
        self,
        file_id: str,
        data: bytes,
        path: str = "voice/file_7.oga",
        size: int | None = None,
        trickle: Trickle | None = None,
    ) -> None:
        """Keep `data` as the file `file_id`, served at `path`; getFile tells `size` (default:
        the real one; over MAX_DOWNLOAD_BYTES, getFile refuses it as Telegram does). With a
        `trickle`, the download is that slow answer."""
        with self.lock:
            stored = StoredFile(path, len(data) if size is None else size, data, trickle)
            self.files[file_id] = stored

    @property
    def base_url(self) -> str:
        """The value for TELEGRAM_API_URL (the part before the token)."""
        return f"{self.origin}/bot"

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if path.startswith("/file/"):
            return self.download(path)
        if "json" in content_type:
            params = dict(json.loads(raw or b"{}"))
        elif content_type.startswith("multipart/form-data"):
            params = form_data(content_type, raw)
        else:
            params = {key: _value(value) for key, value in parse_qsl(raw.decode())}
        status, body = self.handle(path, params)
        return status, {}, json.dumps(body).encode()

    def download(self, path: str) -> Answer:
        """A file's bytes, as Telegram's file server sends them; 404 for any other path."""
        prefix, path = f"/file/bot{TOKEN}/", unquote(path)  # PTB quotes the token's ":"
        with self.lock:
            self.downloads.append(path)
            failure = next((f for f in self.failures if f.method == "download"), None)
            if failure is not None:
                self.failures.remove(failure)
            found = next((f for f in self.files.values() if prefix + f.path == path), None)
        if failure is not None:
            body = {"ok": False, "error_code": failure.status, "description": failure.description}
            return failure.status, {}, json.dumps(body).encode()
        if found is None:
            body = {"ok": False, "error_code": 404, "description": "Not Found"}
            return 404, {}, json.dumps(body).encode()
        if found.trickle is not None:
            return 200, {}, found.trickle
        return 200, {"Content-Type": "application/octet-stream"}, found.data

    def webhook_info(self) -> dict[str, Any]:
        """getWebhookInfo's WebhookInfo, with the fields the Bot API documents."""
        with self.lock:
            info: dict[str, Any] = {
                "url": self.webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": self.webhook_pending,
            }
            if self.webhook_url:
                info["max_connections"] = 40
            if self.webhook_error:
                info["last_error_date"] = int(time.time()) - 60
                info["last_error_message"] = self.webhook_error
        return info

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

    def keyboards(self, chat_id: str | int | None = None) -> list[list[list[dict[str, Any]]]]:
        """The inline keyboard of every successful sendMessage that had one, in order: rows of
        buttons, each {"text": label, "callback_data": command}."""
        return [
            c.params["reply_markup"]["inline_keyboard"]
            for c in self.of("sendMessage")
            if isinstance(c.params.get("reply_markup"), dict)
            and (chat_id is None or str(c.params.get("chat_id")) == str(chat_id))
        ]

    def tap(
        self, user: dict[str, Any], chat: dict[str, Any], message_id: int, data: str
    ) -> dict[str, Any]:
        """The update Telegram sends when `user` taps a button with callback `data` under
        Pam's message `message_id` in `chat` (Bot API: Update, CallbackQuery): queued for
        getUpdates, and returned for a test to post to the webhook."""
        with self.lock:
            self.message_ids += 1
            update_id = 500_000 + self.message_ids
            query_id = str(4_382_000_000_000_000_000 + self.message_ids)
        update = {
            "update_id": update_id,
            "callback_query": {
                "id": query_id,
                "from": user,
                "message": {
                    "message_id": message_id,
                    "from": {"id": BOT_ID, "is_bot": True, "first_name": "Pam"},
                    "chat": chat,
                    "date": int(time.time()),
                    "text": "…",
                },
                "chat_instance": "-7236549873125412345",
                "data": data,
            },
        }
        with self.lock:
            self.updates.append(update)
        return update

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
        if method == "getFile":
            return self.get_file(str(params.get("file_id")))
        return 200, {"ok": True, "result": self.result(method, params)}

    def get_file(self, file_id: str) -> tuple[int, dict[str, Any]]:
        """getFile's answer: the file's path and size, or Telegram's 400s."""
        with self.lock:
            found = self.files.get(file_id)
        if found is None or found.size > MAX_DOWNLOAD_BYTES:
            problem = "invalid file_id" if found is None else "file is too big"
            return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {problem}"}
        return 200, {
            "ok": True,
            "result": {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id[-12:]}",
                "file_size": found.size,
                "file_path": found.path,
            },
        }

    def result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return {"id": BOT_ID, "is_bot": True, "first_name": "Pam", "username": USERNAME}
        if method in ("sendMessage", "sendPhoto", "sendVoice"):
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
                markup = params.get("reply_markup")
                return (
                    message
                    | {"text": params["text"]}
                    | ({"reply_markup": markup} if markup else {})
                )
            if method == "sendVoice":
                voice = {"file_id": f"voice-{message_id}", "file_unique_id": f"u{message_id}"}
                size = len(params.get("voice") or b"")
                return message | {
                    "voice": voice | {"duration": 2, "mime_type": "audio/ogg", "file_size": size}
                }
            size = len(params.get("photo") or b"")
            photo = {"file_id": f"photo-{message_id}", "file_unique_id": f"u{message_id}"}
            return message | {
                "photo": [photo | {"width": 1000, "height": 1200, "file_size": size}],
                "caption": params.get("caption", ""),
            }
        if method == "setWebhook":
            with self.lock:
                self.webhook_url = str(params.get("url") or "")
            return True
        if method == "deleteWebhook":
            with self.lock:
                self.webhook_url = ""
            return True
        if method == "getWebhookInfo":
            return self.webhook_info()
        if method == "getUpdates":
            offset = int(params.get("offset") or 0)
            with self.lock:
                ready = [u for u in self.updates if u["update_id"] >= offset]
            if not ready:
                time.sleep(min(0.2, float(params.get("timeout") or 0)))
            return ready
        return True  # sendChatAction, answerCallbackQuery, setMyCommands, …
