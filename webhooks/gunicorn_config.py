"""The web process's gunicorn settings, in one place. The Procfile, fly.toml and the Dockerfile
all run the same short command:

    gunicorn -c python:webhooks.gunicorn_config 'webhooks.app:create_app()'

gunicorn reads this module once, in its master process, before any worker starts; a flag on
the command line still overrides a setting here (the tests bind to 127.0.0.1 that way). The
hooks also set up prometheus_client's multiprocess mode (webhooks/multiprocess.py), so that
GET /metrics, answered by any one worker, counts every worker's requests."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhooks import multiprocess

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter

# Fly's internal_port and the Dockerfile's EXPOSE, where the platform sets no $PORT.
DEFAULT_PORT = 8080
DEFAULT_WORKERS = 2


def _whole_number(environ: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """The variable `name` as a number from `low` to `high`, else a clear stop."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise SystemExit(f"pam web: {name}={raw!r} is not a whole number from {low} to {high}")
    return int(raw)


def bind_address(environ: Mapping[str, str]) -> str:
    """Every interface, on $PORT (Heroku, Render, Cloud Run, Railway) or else 8080."""
    return f"0.0.0.0:{_whole_number(environ, 'PORT', DEFAULT_PORT, 1, 65535)}"


def worker_count(environ: Mapping[str, str]) -> int:
    """$WEB_CONCURRENCY worker processes (Heroku sets it by dyno size), else 2."""
    return _whole_number(environ, "WEB_CONCURRENCY", DEFAULT_WORKERS, 1, 64)


bind = [bind_address(os.environ)]
workers = worker_count(os.environ)
# Each worker's threads answer webhooks while others wait on the database; a request is read
# whole before a thread serves it, so slow or idle clients hold no thread
# (webhooks/gunicorn_worker.py).
worker_class = "webhooks.gunicorn_worker.BufferingWorker"
threads = 4
timeout = 30
# gunicorn trusts no proxy's X-Forwarded-* itself (its default trusts loopback's): the app
# does, by PAM_PROXY_HOPS (webhooks/web.py), whichever server runs it.
forwarded_allow_ips = ""
accesslog = "-"
# No referer (another site's URL and its query); the target and error lines are redacted.
access_log_format = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'
logger_class = "webhooks.access_log.RedactingLogger"
# gunicorn's control socket (for `gunicornc`, in $HOME) serves no platform, and concurrent
# web processes on one machine would share its one path.
control_socket_disable = True


def when_ready(server: Arbiter) -> None:
    """Say once, from the master, which channels are on and why the others are off (not once
    per worker). Settings gunicorn's workers cannot use are theirs to report: each stops
    with one clear line (webhooks/app.py)."""
    from pydantic import ValidationError

    from webhooks.channels import log_channels
    from webhooks.settings import Settings
    from webhooks.startup import read_dotenv

    read_dotenv()  # as the workers will, so that the line says what they will do
    try:
        settings = Settings()
    except ValidationError:
        return
    # The master has no logging of Pam's own: the line goes where gunicorn's own lines go.
    log_channels(settings, "web", server.log)


def on_starting(server: Any) -> None:
    """In the master, before any worker starts: an empty metrics directory for them."""
    multiprocess.prepare()


def child_exit(server: Any, worker: Any) -> None:
    """In the master, when a worker exits: its live metrics stop counting."""
    multiprocess.worker_exited(worker.pid)


def on_exit(server: Any) -> None:
    """In the master, as it exits: its temporary metrics directory goes."""
    multiprocess.finish()
