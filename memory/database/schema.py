"""Pam's whole schema: every table module imported, so that `metadata` holds every table —
what Alembic compares the migrations with (memory/database/migrations/env.py) and what the schema
tests walk — and which objects such a comparison leaves out on each database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory.database import (
    models,
    models_checkins,
    models_queue,
    models_recall,
    models_review,
)
from memory.database.models_recall import RECALL_FTS_TABLES

# The modules whose tables make up the schema: importing them registers each table on the one
# MetaData of models.Base.
TABLE_MODULES = (models, models_queue, models_recall, models_review, models_checkins)
metadata = models.Base.metadata

# The indexes only Postgres has (see `compared_on`).
POSTGRES_ONLY_INDEXES = frozenset({"ix_recall_entries_terms"})


def compared_on(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's `include_object` for a database of `dialect`: whether an object is one the
    models describe there (all but SQLite's FTS5 tables, and Postgres' own indexes
    elsewhere)."""

    def compared(item: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        if type_ == "table":
            return name not in RECALL_FTS_TABLES
        if type_ == "index" and dialect != "postgresql":
            return name not in POSTGRES_ONLY_INDEXES
        return True

    return compared
