"""A small fake Twilio REST API on 127.0.0.1: the real twilio `Client` (TWILIO_API_URL) sends
WhatsApp messages to it (text, or media by URL: MediaUrl). It records every message and can
answer with scripted errors. `sign` signs a webhook's form as Twilio does."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from twilio.request_validator import RequestValidator

from loopback.local_server import Answer, LocalServer

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "test-auth-token-0123456789abcdef"
NUMBER = "whatsapp:+14155238886"


def sign(
    url: str, form: Mapping[str, str], token: str = AUTH_TOKEN, algorithm: str | None = None
) -> str:
    """X-Twilio-Signature as Twilio computes it for `form` posted to `url` (a werkzeug
    MultiDict's repeated keys count each value, as Twilio counts them)."""
    return str(RequestValidator(token).compute_signature(url, form, algorithm=algorithm))


@dataclass
class Failure:
    """A scripted error answer for the next message: HTTP status and Twilio error code."""

    status: int
    code: int
    message: str = "scripted failure"


class TwilioServer(LocalServer):
    """Serve Messages.json for ACCOUNT_SID until closed; use as a context manager."""

    def __init__(self) -> None:
        self.messages: list[dict[str, str]] = []
        self.failures: deque[Failure] = deque()
        self.lock = threading.Lock()
        super().__init__()

    @property
    def base_url(self) -> str:
        """The value for TWILIO_API_URL."""
        return self.origin

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        status, body = self.handle(path, dict(parse_qsl(raw.decode())))
        return status, {}, json.dumps(body).encode()

    def fail_next(self, *failures: Failure) -> None:
        with self.lock:
            self.failures.extend(failures)

    def media(self, to: str | None = None) -> list[str]:
        """The MediaUrl of every accepted message that had one (to `to`, if given), in order."""
        with self.lock:
            return [
                m["MediaUrl"]
                for m in self.messages
                if "MediaUrl" in m and (to is None or m["To"] == to)
            ]

    def bodies(self, to: str | None = None) -> list[str]:
        """The bodies of every accepted message (to `to`, if given), in order."""
        with self.lock:
            return [m["Body"] for m in self.messages if to is None or m["To"] == to]

    def handle(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if path != f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json":
            return 404, {"code": 20404, "message": "not found", "status": 404}
        with self.lock:
            failure = self.failures.popleft() if self.failures else None
            if failure is None:
                self.messages.append(form)
                sid = f"SM{len(self.messages):032d}"
        if failure is not None:
            return failure.status, {
                "code": failure.code,
                "message": failure.message,
                "more_info": f"https://www.twilio.com/docs/errors/{failure.code}",
                "status": failure.status,
            }
        return 201, {
            "sid": sid,
            "account_sid": ACCOUNT_SID,
            "from": form.get("From"),
            "to": form.get("To"),
            "body": form.get("Body"),
            "status": "queued",
            "num_segments": "1",
            "num_media": "1" if "MediaUrl" in form else "0",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "date_created": "Sun, 29 Nov 2026 12:00:00 +0000",
            "uri": f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json",
        }
