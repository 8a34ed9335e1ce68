"""`db.require_current_schema`: what the commands that do not migrate check first, on SQLite
and Postgres."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from loopback.harness import postgres_schema
from memory.database import db
from tests.conftest import PG_URL


def test_a_migrated_database_is_current(database_url: str) -> None:
    assert db.require_current_schema(database_url) is None


def test_a_missing_sqlite_file_is_reported_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "pam.db"
    with pytest.raises(
        db.SchemaNotCurrent, match=r"no database at .*pam\.db: run `pam db upgrade`"
    ):
        db.require_current_schema(f"sqlite:///{path}")
    assert not path.exists()


def test_an_empty_sqlite_file_has_no_tables_yet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pam.db'}"
    (tmp_path / "pam.db").touch()  # as `sqlite3 pam.db .quit` leaves it
    with pytest.raises(db.SchemaNotCurrent, match="no tables yet: run `pam db upgrade`"):
        db.require_current_schema(url)


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_an_empty_postgres_schema_has_no_tables_yet() -> None:
    assert PG_URL
    with postgres_schema(PG_URL) as url, pytest.raises(db.SchemaNotCurrent, match="no tables"):
        db.require_current_schema(url)


def test_an_older_schema_names_both_revisions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pam.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine, "0001")
    head = ScriptDirectory.from_config(db.alembic_config(engine)).get_current_head()
    engine.dispose()
    with pytest.raises(db.SchemaNotCurrent, match=f"at migration 0001 and this Pam needs {head}"):
        db.require_current_schema(url)


def test_a_revision_from_a_newer_release_is_only_a_warning(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pam.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    engine.dispose()

    warning = db.require_current_schema(url)

    assert warning is not None
    assert "9999_from_the_future" in warning and "newer release" in warning
