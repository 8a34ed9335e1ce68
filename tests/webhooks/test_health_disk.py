"""GET /healthz with a full disk answers 503 and says so (issue 27: it said 200 while every
write failed). Two ways of full, both through the app's seam (`health.Disk`), since filling a
real disk needs root: the free space read as almost nothing, and a probe write that the
kernel itself refuses with ENOSPC (/dev/full: every write to it fails so). A folder that is
merely unreadable is no full disk."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from flask import Flask
from flask.testing import FlaskClient

from webhooks import health
from webhooks.health import MIN_FREE_BYTES, Disk


def test_healthz_checks_the_sqlite_folder_and_the_temporary_one(app: Flask) -> None:
    disk: Disk = app.extensions[health.EXTENSION]
    assert disk.problem() is None
    assert len(disk.folders) in (1, 2)
    assert all(folder.is_dir() for folder in disk.folders)


def test_healthz_is_503_when_the_disk_has_no_room(
    app: Flask, client: FlaskClient, tmp_path: Path
) -> None:
    app.extensions[health.EXTENSION] = Disk([tmp_path], free_bytes=lambda _: MIN_FREE_BYTES - 1)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.get_json() == {"status": "unavailable", "database": "ok", "disk": "full"}


def test_healthz_is_503_when_a_write_fails_with_enospc(
    app: Flask, client: FlaskClient, tmp_path: Path
) -> None:
    def dev_full(folder: Path) -> IO[bytes]:
        return Path("/dev/full").open("wb", buffering=0)  # the kernel answers ENOSPC

    app.extensions[health.EXTENSION] = Disk([tmp_path], open_probe=dev_full)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.get_json() == {"status": "unavailable", "database": "ok", "disk": "full"}


def test_a_folder_that_cannot_be_checked_is_no_full_disk(
    app: Flask, client: FlaskClient, tmp_path: Path
) -> None:
    app.extensions[health.EXTENSION] = Disk([tmp_path / "gone"])
    assert client.get("/healthz").status_code == 200
