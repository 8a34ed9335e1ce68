"""gunicorn's configuration for Pam's web app:
`gunicorn -c python:webhooks.gunicorn_config 'webhooks.app:create_app()'`.

The hooks set up prometheus_client's multiprocess mode (webhooks/multiprocess.py), so that
GET /metrics, answered by any one worker, counts every worker's requests."""

from __future__ import annotations

from typing import Any

from webhooks import multiprocess


def on_starting(server: Any) -> None:
    """In the master, before any worker starts: an empty metrics directory for them."""
    multiprocess.prepare()


def child_exit(server: Any, worker: Any) -> None:
    """In the master, when a worker exits: its live metrics stop counting."""
    multiprocess.worker_exited(worker.pid)


def on_exit(server: Any) -> None:
    """In the master, as it exits: its temporary metrics directory goes."""
    multiprocess.finish()
