"""Pam's web app: the channels' webhooks, the health check and the /progress charts' signed
links. It only authenticates, persists inbound messages in the durable inbox and
acknowledges; workers do the rest."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import NoReturn

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from sqlalchemy import Engine
from sqlalchemy.exc import DatabaseError, DataError, OperationalError, SQLAlchemyError
from werkzeug.exceptions import HTTPException

from bot import logs
from memory.database import db
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.charts import Charts
from webhooks import admin, charts, health, metrics
from webhooks.api import route as api
from webhooks.settings import Settings
from webhooks.startup import load_settings, read_dotenv
from webhooks.telegram import route as telegram
from webhooks.web import WebContext, trust_proxies
from webhooks.whatsapp import route as whatsapp

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
WORKER_BOOT_ERROR = 3


def _stop(message: str | None) -> NoReturn:
    """Say what is wrong (unless said already) and stop the web process with gunicorn's code
    for "worker failed to boot": its master then stops, instead of booting worker after
    worker into the same mistake."""
    if message:
        print(message, file=sys.stderr)
    raise SystemExit(WORKER_BOOT_ERROR) from None


def _production_settings() -> Settings:
    """The web process's settings, read as every `pam` command reads them (`.env` filling in
    what the environment leaves unset), with a clear exit — not a traceback from each
    gunicorn worker — when they or the database's schema are unusable. A database that is
    merely unreachable at start is no reason to stay down: the app answers 503 until it is
    back, and the platforms retry."""
    read_dotenv()
    try:
        settings = load_settings()  # says what is wrong, then exits
    except SystemExit:
        _stop(None)
    logs.configure(settings.log_level or logs.SERVICE_LEVEL, sys.stdout)
    try:
        warning = db.require_current_schema(settings.database_url)
    except (db.DatabaseURLError, db.SchemaNotCurrent) as exc:
        _stop(f"pam web: {exc}")
    except SQLAlchemyError as exc:
        if isinstance(exc, DatabaseError) and not isinstance(exc, OperationalError):
            # e.g. a SQLite path that names a file of another kind: it stays that way
            _stop(f"pam web: cannot use the database in DATABASE_URL: {exc.orig}")
        log.warning(  # unreachable or refused for now: it may come back
            "database unreachable at start (%s); answering 503 until it is back",
            type(exc).__name__,
        )
    else:
        if warning:
            log.warning("%s", warning)
    return settings


def create_app(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    on_inbound: Callable[[], None] | None = None,
) -> Flask:
    """The Flask application. With no arguments, configuration comes from the environment."""
    if settings is None:  # the production entry point (gunicorn 'webhooks.app:create_app()')
        settings = _production_settings()
    engine = engine or db.pooled_engine(settings.database_url, settings.service.db_pool_size)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    trust_proxies(app, settings.web.proxy_hops)
    app.extensions["pam"] = WebContext(
        settings,
        engine,
        Inbox(engine, settings.service.inbox_lease_seconds),
        Outbox(engine, settings.service.delivery_lease_seconds),
        on_inbound or (lambda: None),
    )
    app.extensions[charts.EXTENSION] = charts.SignedLinks(
        Charts(engine), settings.charts, settings.web.public_url
    )
    app.extensions[health.EXTENSION] = health.disk_of(settings)
    app.register_blueprint(health.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(telegram.blueprint)
    app.register_blueprint(whatsapp.blueprint)
    app.register_blueprint(admin.blueprint)
    app.register_blueprint(charts.blueprint)
    app.register_blueprint(metrics.blueprint)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> ResponseReturnValue:
        return jsonify(error=error.name, detail=error.description), error.code or 500

    @app.errorhandler(DataError)
    def unstorable(error: DataError) -> ResponseReturnValue:
        # The same input fails the same way every time: a retry cannot help, so no 503.
        log.warning("inbound refused: the database cannot store it (%s)", type(error.orig).__name__)
        return jsonify(error="Unprocessable Content", detail="the message cannot be stored"), 422

    @app.errorhandler(SQLAlchemyError)
    def database_error(error: SQLAlchemyError) -> ResponseReturnValue:
        # The platform retries a 503: the message is not lost, it arrives again later.
        log.error("database unavailable: %s", type(error).__name__)
        body = jsonify(error="Service Unavailable", detail="the database is unavailable")
        return body, 503, {"Retry-After": "5"}

    return app
