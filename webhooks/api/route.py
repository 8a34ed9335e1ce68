"""`POST /api/messages`: check the bearer token, validate the body, accept the message."""

from __future__ import annotations

import hmac
import time

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError

from memory.queue.inbox import Admission
from webhooks.api.payload import ApiMessage, inbound_from_message, invalid
from webhooks.web import accept, json_body, web

blueprint = Blueprint("api", __name__, url_prefix="/api")


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
        return jsonify(error="Bad Request", detail=invalid(exc)), 400
    admission = accept(inbound_from_message(message), started)
    if admission is Admission.TURNED_AWAY:
        detail = "this user has too many messages waiting to be answered; send it again later"
        return jsonify(error="Too Many Requests", detail=detail), 429, {"Retry-After": "60"}
    new = admission is Admission.ACCEPTED
    return jsonify(status=admission.value), 202 if new else 200
