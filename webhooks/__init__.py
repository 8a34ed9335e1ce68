"""Pam's web app: the channels' webhooks and the health check. It only authenticates,
persists inbound messages in the durable inbox and acknowledges; workers do the rest."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from flask import Flask, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from sqlalchemy import Engine
from sqlalchemy.exc import DatabaseError, DataError, OperationalError, SQLAlchemyError
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from bot import logs
from bot.channels import Inbound
from bot.settings import Settings
from memory import db
from memory.queue import Inbox
from webhooks.telegram_bot import TelegramClient

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
WORKER_BOOT_ERROR = 3


@dataclass
class WebContext:
    """What the request handlers need: settings, the inbox, and a hook to wake a worker that
    shares this process (`pam serve`)."""

    settings: Settings
    engine: Engine
    inbox: Inbox
    on_inbound: Callable[[], None]
    _telegram: TelegramClient | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def telegram(self) -> TelegramClient:
        """The Telegram client of this process, made on first use (only its identity is
        needed here: the bot id, and the username for mentions in groups)."""
        with self._lock:
            if self._telegram is None:
                assert self.settings.telegram_bot_token
                self._telegram = TelegramClient(
                    self.settings.telegram_bot_token, self.settings.telegram_api_url
                )
            return self._telegram

    def close(self) -> None:
        """Release what this process opened (the Telegram client: connections, event loops)."""
        with self._lock:
            if self._telegram is not None:
                self._telegram.close()
                self._telegram = None


def web() -> WebContext:
    """The current app's WebContext."""
    context: WebContext = current_app.extensions["pam"]
    return context


def json_body() -> Any:
    """The request's JSON, or None when it is not JSON — including JSON nested so deeply that
    the parser gives up (a 4xx for the caller, never a 500)."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        return None


def accept(inbound: Inbound, started: float) -> bool:
    """Persist an inbound message in the inbox, wake an in-process worker, and log the event
    (channel, kind, timing; never the text). False for a redelivery."""
    context = web()
    new = context.inbox.accept(inbound)
    if new:
        context.on_inbound()
    log.info(
        "inbound %s channel=%s kind=%s ms=%d",
        "accepted" if new else "duplicate",
        inbound.channel,
        inbound.kind,
        (time.monotonic() - started) * 1000,
    )
    return new


def trust_proxies(app: Flask, hops: int) -> None:
    """Read the scheme and client address from the X-Forwarded-Proto and -For headers of
    `hops` proxies (the nearest ones; values further out are a client's own), the same
    under gunicorn and waitress. With 0 they are ignored. The Host header is kept as the
    client sent it, as Heroku's router and Fly's proxy pass it on: X-Forwarded-Host, which
    neither sets, would be whatever a client wrote."""
    if hops:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=0, x_port=0, x_prefix=0
        )


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
    from bot import cli  # the web process shares the command line's configuration rules

    cli.read_dotenv()
    logs.configure("INFO", sys.stdout)
    try:
        settings = cli.load_settings()  # says what is wrong, then exits
    except SystemExit:
        _stop(None)
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
    from webhooks import admin, api, health, telegram, whatsapp

    if settings is None:  # the production entry point (gunicorn 'webhooks:create_app()')
        settings = _production_settings()
    engine = engine or db.make_engine(
        settings.database_url, pool_size=settings.db_pool_size, max_overflow=settings.db_pool_size
    )
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    trust_proxies(app, settings.proxy_hops)
    app.extensions["pam"] = WebContext(
        settings,
        engine,
        Inbox(engine, settings.inbox_lease_seconds),
        on_inbound or (lambda: None),
    )
    app.register_blueprint(health.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(telegram.blueprint)
    app.register_blueprint(whatsapp.blueprint)
    app.register_blueprint(admin.blueprint)

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
