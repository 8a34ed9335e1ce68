"""Waking workers when a message arrives, instead of waiting for their next poll. On Postgres
the statement that stores a message also sends a NOTIFY (`Inbox.accept`), delivered once it
commits; each worker LISTENs on a connection of its own and wakes an idle inbox lane per
notification. Polling stays as the safety net: a lost notification (a restart, a dropped
connection) only delays a message by one poll."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from sqlalchemy import Engine

log = logging.getLogger(__name__)

CHANNEL = "pam_inbox"
RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)


class InboxListener:
    """A daemon thread that LISTENs for new inbox messages and calls `wake` for each burst.
    Only for Postgres; reconnects with backoff after the database went away."""

    def __init__(self, engine: Engine, wake: Callable[[], None]) -> None:
        self.engine = engine
        self.wake = wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inbox-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        url = self.engine.url.set(drivername="postgresql")
        return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                connection = self._connect()
            except Exception as exc:
                delay = RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)]
                failures += 1
                log.warning(
                    "inbox listener cannot connect (%s); polling meanwhile", type(exc).__name__
                )
                self._stop.wait(delay)
                continue
            failures = 0
            try:
                with connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self.wake()  # anything that arrived while not listening
                    while not self._stop.is_set():
                        # Wake once per burst of notifications, then listen again.
                        for _ in connection.notifies(timeout=1.0, stop_after=1):
                            self.wake()
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning(
                        "inbox listener lost its connection (%s); reconnecting", type(exc).__name__
                    )
                    self._stop.wait(RECONNECT_SECONDS[0])
