"""Logging for every Pam process: one line per event on stdout (services) or stderr (the
terminal). Libraries that log whole requests at INFO — URLs that carry a bot token, headers,
bodies — are held at WARNING, so nothing secret and no message text reaches INFO."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Literal, TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# httpx logs every request URL at INFO, and Telegram's URLs contain the bot token; twilio's
# client dumps request headers; the others are chatty.
QUIET = ("httpx", "httpx2", "httpcore", "openai", "urllib3", "apscheduler", "twilio", "telegram")
# The levels PAM_LOG_LEVEL takes (bot/settings.py).
Level = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# Without PAM_LOG_LEVEL: `pam chat` and the one-off commands say only what goes wrong; the
# services (web, worker, memory jobs) also log each message's way through.
COMMAND_LEVEL: Level = "WARNING"
SERVICE_LEVEL: Level = "INFO"


def configure(level: Level, stream: TextIO) -> None:
    """Send log lines at `level` and above to `stream`."""
    _configure(level, logging.StreamHandler(stream))


def configure_file(level: Level, path: Path) -> None:
    """Append log lines at `level` and above to the file at `path` instead (`pam chat` in a
    terminal, whose screen belongs to the conversation). The file is created with the first
    line."""
    _configure(level, logging.FileHandler(path, encoding="utf-8", delay=True))


def _configure(level: Level, handler: logging.Handler) -> None:
    logging.basicConfig(level=level, format=FORMAT, handlers=[handler], force=True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


class OnceLog:
    """Logs each cause once per process: a misconfiguration that every message meets (a
    rejected key, a missing endpoint, at ERROR) or a lesson learned from a server (a refused
    parameter, at WARNING) is said the first time, not each time."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def error(self, cause: str, message: str, *args: object) -> None:
        """Log `message` at ERROR unless `cause` was logged before."""
        if self._first(cause):
            self.logger.error(message, *args)

    def warning(self, cause: str, message: str, *args: object) -> None:
        """Log `message` at WARNING unless `cause` was logged before."""
        if self._first(cause):
            self.logger.warning(message, *args)

    def _first(self, cause: str) -> bool:
        with self._lock:
            if cause in self._said:
                return False
            self._said.add(cause)
            return True
