"""The production web process (real gunicorn, the Procfile's web command) on a database that was
never migrated, or with a setting it cannot use: one clear line saying what to do, and
gunicorn stops instead of booting worker after worker."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from loopback.harness import ROOT, free_port
from loopback.harness import gunicorn as web_command

pytestmark = pytest.mark.slow

TIMEOUT = 60


def gunicorn(database_url: str, cwd: Path, **knobs: str) -> subprocess.CompletedProcess[str]:
    """Run the Procfile's web command on `database_url` (and `knobs`) until it stops by
    itself."""
    env = dict(os.environ, DATABASE_URL=database_url, PYTHONPATH=str(ROOT), **knobs)
    # One worker: with several failing at once, gunicorn itself may print a traceback of its
    # HaltServer as it stops (and exit 1); it stops all the same.
    command = web_command(free_port(), workers=1)
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def test_a_missing_sqlite_file_stops_the_web_process_without_creating_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pam.db"

    process = gunicorn(f"sqlite:///{path}", tmp_path)

    assert process.returncode == 3, process.stderr  # gunicorn: worker failed to boot
    assert "run `pam db upgrade`" in process.stderr
    assert "Traceback" not in process.stderr
    assert not path.exists()


def test_a_database_without_tables_stops_the_web_process(tmp_path: Path) -> None:
    path = tmp_path / "pam.db"
    sqlite3.connect(path).close()  # an empty file, as a failed release phase leaves it

    process = gunicorn(f"sqlite:///{path}", tmp_path)

    assert process.returncode == 3
    assert "no tables yet: run `pam db upgrade`" in process.stderr
    assert "Traceback" not in process.stderr


def test_an_unusable_setting_stops_the_web_process_saying_it_once(tmp_path: Path) -> None:
    path = tmp_path / "pam.db"

    process = gunicorn(f"sqlite:///{path}", tmp_path, PAM_QUEUE_RETENTION_HOURS="12")

    assert process.returncode == 3, process.stderr  # not worker after worker
    assert process.stderr.count("pam: invalid configuration: PAM_QUEUE_RETENTION_HOURS") == 1
    assert "Traceback" not in process.stderr


def test_a_secret_too_short_stops_the_web_process_naming_it_not_saying_it(
    tmp_path: Path,
) -> None:
    """A one-character admin token was taken: a bearer token anyone guesses."""
    path = tmp_path / "pam.db"

    process = gunicorn(f"sqlite:///{path}", tmp_path, PAM_ADMIN_TOKEN="Qz7")

    assert process.returncode == 3, process.stderr
    said = process.stderr.count("pam: invalid configuration: PAM_ADMIN_TOKEN: ")
    assert said == 1, process.stderr
    assert "at least 16 characters" in process.stderr
    assert "Qz7" not in process.stderr + process.stdout
    assert "Traceback" not in process.stderr


def test_a_file_that_is_no_database_stops_the_web_process(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)

    process = gunicorn(f"sqlite:///{path}", tmp_path)

    assert process.returncode == 3, process.stderr
    assert "cannot use the database in DATABASE_URL: file is not a database" in process.stderr
    assert "Traceback" not in process.stderr
    assert path.read_text() == "not a database\n" * 100
