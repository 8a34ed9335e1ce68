"""GET /healthz: 200 when the database answers, 503 when it does not."""

from __future__ import annotations

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from webhooks.web import web

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Report whether this process can reach the database."""
    try:
        with web().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return jsonify(status="unavailable", database="unreachable"), 503
    return jsonify(status="ok", database="ok"), 200
