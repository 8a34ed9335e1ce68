"""The HTTP API channel, for custom front-ends (and the service's own end-to-end tests).

Inbound: `POST /api/messages` with `Authorization: Bearer $PAM_API_TOKEN` and JSON
`{"id": "<unique message id>", "user": "<user id>", "text": "...", "name": "<optional>"}`.
Answers 202 when accepted, 200 for a redelivery; disabled (404) while PAM_API_TOKEN is unset.

Outbound: each reply is POSTed as JSON `{"id", "user", "text"}` to PAM_API_CALLBACK_URL,
signed with `X-Pam-Signature: sha256=<HMAC-SHA256 of the body with PAM_API_TOKEN>`; `id` is
an idempotency key, stable across retries of the same reply."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import unicodedata

import requests
from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.channels import Inbound, PermanentSendError, Sent, TransientSendError
from webhooks import accept, json_body, web

log = logging.getLogger(__name__)

CHANNEL = "api"
blueprint = Blueprint("api", __name__, url_prefix="/api")


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
    token = context.settings.api_token
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
        fields = sorted({".".join(map(str, e["loc"])) for e in exc.errors()})
        return jsonify(error="Bad Request", detail=f"invalid fields: {', '.join(fields)}"), 400
    new = accept(
        Inbound(
            channel=CHANNEL,
            platform_id=message.id,
            address=f"{CHANNEL}:{message.user}",
            chat_id=message.user,
            text=message.text,
            display_name=message.name,
        ),
        started,
    )
    return jsonify(status="accepted" if new else "duplicate"), 202 if new else 200


def signature(token: str, body: bytes) -> str:
    """The X-Pam-Signature header value for `body`."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


class ApiCallbackSender:
    """Delivers replies of the API channel to the operator's callback URL."""

    max_chars = 20000  # the callback takes whole replies; the same cap as inbound text

    @staticmethod
    def length(text: str) -> int:
        """Characters."""
        return len(text)

    def __init__(self, url: str, token: str, timeout: float = 10.0) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.session = requests.Session()

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        body = json.dumps(
            {"id": idempotency_key, "user": chat_id, "text": text}, ensure_ascii=False
        ).encode()
        headers = {
            "Content-Type": "application/json",
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
