"""prometheus_client's multiprocess mode for the web app under gunicorn: every worker process
writes its counters to files in one directory, and a scrape (answered by any one of them) adds
up all the files, so it sees every worker's counts.

The directory must be named in PROMETHEUS_MULTIPROC_DIR before prometheus_client is imported,
and start empty each time gunicorn's master starts: the master does it (`prepare`, from
gunicorn's `on_starting` hook, before any worker imports the app), and says when a worker
exits (`worker_exited`, from `child_exit`). This module imports prometheus_client only inside
`worker_exited`, which runs once the directory is set."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
_made: Path | None = None  # the temporary directory this master made, removed at its exit


def prepare() -> Path:
    """An empty directory for this master's workers, named in the environment they inherit:
    the operator's PROMETHEUS_MULTIPROC_DIR emptied, else a fresh temporary one."""
    given = os.environ.get(VARIABLE)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for leftover in folder.glob("*.db"):  # a previous master's counts
            leftover.unlink(missing_ok=True)
    else:
        global _made
        folder = _made = Path(tempfile.mkdtemp(prefix="pam-prometheus-"))
    os.environ[VARIABLE] = str(folder)
    return folder


def worker_exited(pid: int) -> None:
    """Tell prometheus_client a worker is gone (its live gauges stop counting; its counters
    stay in the sums)."""
    if not os.environ.get(VARIABLE):
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)


def finish() -> None:
    """Delete the temporary directory `prepare` made, if it made one (the master exits)."""
    if _made is not None:
        shutil.rmtree(_made, ignore_errors=True)
