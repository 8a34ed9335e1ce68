"""Logging for every Pam process: one line per event on stdout (services) or stderr (the
terminal). Libraries that log whole requests at INFO — URLs that carry a bot token, headers,
bodies — are held at WARNING, so nothing secret and no message text reaches INFO."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# httpx logs every request URL at INFO, and Telegram's URLs contain the bot token; twilio's
# client dumps request headers; the others are chatty.
QUIET = ("httpx", "httpx2", "httpcore", "openai", "urllib3", "apscheduler", "twilio", "telegram")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(default: str) -> str:
    """PAM_LOG_LEVEL, or `default` when it is unset or not a level."""
    level = (os.environ.get("PAM_LOG_LEVEL") or default).strip().upper()
    if level not in LEVELS:
        print(
            f"pam: ignoring PAM_LOG_LEVEL={level!r}; use DEBUG, INFO, WARNING or ERROR",
            file=sys.stderr,
        )
        return default
    return level


def configure(default_level: str, stream: TextIO) -> None:
    """Send log lines to `stream` at PAM_LOG_LEVEL (else `default_level`)."""
    _configure(default_level, logging.StreamHandler(stream))


def configure_file(default_level: str, path: Path) -> None:
    """Append log lines to the file at `path` instead (`pam chat` in a terminal, whose
    screen belongs to the conversation). The file is created with the first line."""
    _configure(default_level, logging.FileHandler(path, encoding="utf-8", delay=True))


def _configure(default_level: str, handler: logging.Handler) -> None:
    logging.basicConfig(
        level=log_level(default_level), format=FORMAT, handlers=[handler], force=True
    )
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
