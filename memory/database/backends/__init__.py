"""Each database's own SQL, one module per dialect behind one interface (`Backend`)."""

from __future__ import annotations

from sqlalchemy import Engine

from memory.database.backends.base import Backend
from memory.database.backends.postgres import PostgresBackend
from memory.database.backends.sqlite import SqliteBackend


def backend_for(engine: Engine) -> Backend:
    """The backend for `engine`'s database, running on it."""
    return PostgresBackend(engine) if engine.dialect.name == "postgresql" else SqliteBackend(engine)
