"""What the end-to-end tests share: the database a service's processes run on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback.harness import postgres_schema, sqlite_url
from tests.conftest import PG_URL


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    """Postgres when the tests have one (a schema of this test's own), else a SQLite file."""
    if PG_URL:
        with postgres_schema(PG_URL) as url:
            yield url
    else:
        yield sqlite_url(tmp_path)
