"""A service that starts while its database server is away (restarting, failing over) waits
for it, logging why, instead of exiting as a crash (the fault run's worker restarted while
Postgres restarted, and exited 2); what waiting cannot mend exits at once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from webhooks import startup, wiring
from webhooks.settings import Settings

UNREACHABLE = "postgresql+psycopg://pam@127.0.0.1:9/pam"  # the discard port: refused at once


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "DATABASE_RETRY_SECONDS", 0.05)


def test_a_service_waits_for_its_database_server_and_goes_on_when_it_is_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[int] = []
    built = object()

    def build(settings: Settings, **_: Any) -> object:
        tries.append(1)
        if len(tries) < 3:
            raise OperationalError("connect", {}, Exception("the database system is starting up"))
        return built

    monkeypatch.setattr(wiring, "build", build)
    settings = Settings(database_url=UNREACHABLE)
    with caplog.at_level(logging.WARNING, logger="pam.cli"):
        pam = startup.build_or_exit(settings, migrate=True, wait_seconds=60)
    assert pam is built and len(tries) == 3
    waits = [r.getMessage() for r in caplog.records if "not reachable yet" in r.getMessage()]
    assert len(waits) == 2 and "the database system is starting up" in waits[0]


def test_a_server_that_stays_away_is_said_plainly_once_the_wait_is_over(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(database_url=UNREACHABLE)
    with caplog.at_level(logging.WARNING, logger="pam.cli"), pytest.raises(SystemExit) as exit:
        startup.build_or_exit(settings, migrate=True, wait_seconds=0.3)
    assert exit.value.code == 2
    assert any("not reachable yet" in r.getMessage() for r in caplog.records)
    assert "pam: cannot open the database in DATABASE_URL" in capsys.readouterr().err


def test_one_off_commands_and_sqlite_files_do_not_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("not a database\n" * 100)
    for url, wait in [(UNREACHABLE, 0.0), (f"sqlite:///{not_a_database}", 60.0)]:
        with caplog.at_level(logging.WARNING, logger="pam.cli"), pytest.raises(SystemExit):
            startup.build_or_exit(Settings(database_url=url), migrate=True, wait_seconds=wait)
        assert not any("not reachable yet" in r.getMessage() for r in caplog.records), url
        assert "cannot open the database" in capsys.readouterr().err
