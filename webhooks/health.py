"""GET /healthz: 200 when the database answers and the disk takes writes, else 503 with the
reason. The disk is the one the process writes to: the SQLite file's folder (when the database
is one) and the temporary folder (gunicorn's and the metrics' files)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from flask import Blueprint, current_app, jsonify
from flask.typing import ResponseReturnValue
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from memory.database import db
from webhooks.settings import Settings
from webhooks.web import web

log = logging.getLogger(__name__)

blueprint = Blueprint("health", __name__)
EXTENSION = "pam.disk"
# Less free space than this is a full disk: SQLite's next checkpoint or a burst of messages
# would fail to be stored.
MIN_FREE_BYTES = 16 * 1024 * 1024
# What the probe writes and syncs: a write the file system must find room for.
PROBE_BYTES = 64 * 1024
FULL = (errno.ENOSPC, errno.EDQUOT)


def _free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def _probe_file(folder: Path) -> IO[bytes]:
    return tempfile.TemporaryFile(dir=folder)


@dataclass
class Disk:
    """The folders this process writes to, how their free space is read (`free_bytes`) and
    how a probe file is made in one (`open_probe`): tests point them elsewhere."""

    folders: Sequence[Path]
    free_bytes: Callable[[Path], int] = _free_bytes
    open_probe: Callable[[Path], IO[bytes]] = field(default=_probe_file)

    def problem(self) -> str | None:
        """Why writes would fail ("full"), or None."""
        for folder in self.folders:
            try:
                free = self.free_bytes(folder)
                if free < MIN_FREE_BYTES:
                    log.error("disk full: %d bytes free in %s", free, folder)
                    return "full"
                with self.open_probe(folder) as probe:
                    probe.write(b"\0" * PROBE_BYTES)
                    probe.flush()
                    os.fsync(probe.fileno())
            except OSError as exc:
                if exc.errno in FULL:
                    log.error("disk full: writing in %s fails (%s)", folder, exc.strerror)
                    return "full"
                log.warning("disk not checked in %s: %s", folder, exc.strerror or exc)
        return None


def disk_of(settings: Settings) -> Disk:
    """The folders the web process writes to, per its settings."""
    database = db.sqlite_file(settings.database_url)
    folders = [database.resolve().parent] if database is not None else []
    return Disk([*folders, Path(tempfile.gettempdir())])


@blueprint.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Report whether this process can reach the database and write to its disk."""
    try:
        with web().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return jsonify(status="unavailable", database="unreachable"), 503
    disk: Disk = current_app.extensions[EXTENSION]
    full = disk.problem()
    if full is not None:
        return jsonify(status="unavailable", database="ok", disk=full), 503
    return jsonify(status="ok", database="ok"), 200
