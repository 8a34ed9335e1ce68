"""The HTTP API channel, for custom front-ends (and the service's own end-to-end tests).

Inbound: `POST /api/messages` with `Authorization: Bearer $PAM_API_TOKEN` and JSON
`{"id": "<unique message id>", "user": "<user id>", "text": "...", "name": "<optional>"}`.
Answers 202 when accepted, 200 for a redelivery; disabled (404) while PAM_API_TOKEN is unset.

Outbound: each reply is POSTed as JSON `{"id", "in_reply_to", "user", "text"}` to
PAM_API_CALLBACK_URL, signed the Standard Webhooks way (standardwebhooks.com) with
PAM_API_TOKEN as the key: `webhook-id` (= `id`, an idempotency key stable across retries of the
same reply), `webhook-timestamp` (this attempt, Unix seconds) and `webhook-signature: v1,<base64
HMAC-SHA256 of "{id}.{timestamp}.{body}">`, so a receiver can reject replays. `in_reply_to` is
the `id` the client POSTed. The older `X-Pam-Signature` (HMAC of the body alone) is still sent."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
import unicodedata
from collections.abc import Callable

import requests
from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.channels import PermanentSendError, TransientSendError
from memory.messages import Inbound, Sent
from webhooks.web import accept, json_body, web

log = logging.getLogger(__name__)

CHANNEL = "api"
blueprint = Blueprint("api", __name__, url_prefix="/api")
# The chat address carries the user and the request's id, apart by a character neither may
# hold (no control characters), so the reply can name the request it answers.
REQUEST_SEPARATOR = "\x1f"
MAX_CHAT_CHARS = 100  # the width of the queues' chat_id columns


def chat_address(user: str, request_id: str) -> str:
    """Where the reply to `request_id` from `user` goes, as the queues store it."""
    return f"{user}{REQUEST_SEPARATOR}{request_id}"


def recipient(address: str) -> tuple[str, str | None]:
    """The user and the request id in a `chat_address` (no request id in replies queued
    before the callback carried one)."""
    user, _, request_id = address.partition(REQUEST_SEPARATOR)
    return user, request_id or None


class ApiMessage(BaseModel):
    """The inbound JSON body."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    id: str = Field(min_length=1, max_length=100)
    user: str = Field(min_length=1, max_length=100)
    text: str = Field(min_length=1, max_length=20000)
    name: str | None = Field(default=None, max_length=100)

    @field_validator("id", "user", "name")
    @classmethod
    def printable(cls, value: str | None) -> str | None:
        """Identifiers and names are printable text: no control characters."""
        if value is not None and any(unicodedata.category(ch) == "Cc" for ch in value):
            raise ValueError("must not contain control characters")
        return value

    @model_validator(mode="after")
    def fits_the_chat_address(self) -> ApiMessage:
        """`user` and `id` travel together with the reply, in one column."""
        if len(chat_address(self.user, self.id)) > MAX_CHAT_CHARS:
            raise ValueError(
                f"user and id together must be at most {MAX_CHAT_CHARS - 1} characters"
            )
        return self


def _authorized(token: str) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


@blueprint.post("/messages")
def receive() -> ResponseReturnValue:
    """Authenticate, persist, acknowledge."""
    started = time.monotonic()
    context = web()
    token = context.settings.api.token
    if not token:  # the channel is off: look like any unknown route
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    if not _authorized(token):
        return jsonify(error="Unauthorized", detail="a valid bearer token is required"), 401
    payload = json_body()
    if not isinstance(payload, dict):
        return jsonify(error="Bad Request", detail="the body must be a JSON object"), 400
    try:
        message = ApiMessage.model_validate(payload)
    except ValidationError as exc:
        errors = exc.errors()
        fields = sorted({".".join(map(str, e["loc"])) for e in errors if e["loc"]})
        # A rule over several fields has no field of its own: its message says what is wrong.
        rules = [e["msg"].removeprefix("Value error, ") for e in errors if not e["loc"]]
        detail = f"invalid fields: {', '.join(fields)}" if fields else "; ".join(rules)
        return jsonify(error="Bad Request", detail=detail), 400
    new = accept(
        Inbound(
            channel=CHANNEL,
            platform_id=message.id,
            address=f"{CHANNEL}:{message.user}",
            chat_id=chat_address(message.user, message.id),
            text=message.text,
            display_name=message.name,
        ),
        started,
    )
    return jsonify(status="accepted" if new else "duplicate"), 202 if new else 200


def signature(token: str, body: bytes) -> str:
    """The X-Pam-Signature header value for `body` (kept for receivers that check it)."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def webhook_signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks `webhook-signature` value: v1 and the base64 HMAC-SHA256, keyed
    with `key`, of "{webhook-id}.{webhook-timestamp}.{body}"."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class ApiCallbackSender:
    """Delivers replies of the API channel to the operator's callback URL."""

    max_chars = 20000  # the callback takes whole replies; the same cap as inbound text

    @staticmethod
    def length(text: str) -> int:
        """Characters."""
        return len(text)

    def __init__(
        self,
        url: str,
        token: str,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.clock = clock
        self.session = requests.Session()

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """POST the reply, signed; raise TransientSendError or PermanentSendError."""
        user, request_id = recipient(chat_id)
        reply: dict[str, str] = {"id": idempotency_key}
        if request_id is not None:
            reply["in_reply_to"] = request_id
        body = json.dumps({**reply, "user": user, "text": text}, ensure_ascii=False).encode()
        # Each attempt is signed anew: the timestamp is when it was sent, so a receiver that
        # rejects old timestamps rejects replays, and the id lets it drop a retry it has seen.
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "webhook-id": idempotency_key,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": webhook_signature(
                self.token.encode(), idempotency_key, timestamp, body
            ),
            "X-Pam-Signature": signature(self.token, body),
            "Idempotency-Key": idempotency_key,
        }
        try:
            response = self.session.post(self.url, data=body, headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise TransientSendError(f"callback unreachable: {type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            retry_after = response.headers.get("Retry-After")
            raise TransientSendError(
                f"callback answered {response.status_code}",
                retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
            )
        if response.status_code >= 400:
            raise PermanentSendError(f"callback refused the reply: {response.status_code}")
        return Sent(platform_id=None)

    def close(self) -> None:
        """Close the pooled connections."""
        self.session.close()
