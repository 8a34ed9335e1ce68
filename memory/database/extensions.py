"""Postgres extensions the migrations add where the database allows them (`unaccent` in
migration 0005, `btree_gin` in 0019): each is optional, and Pam works without it."""

from __future__ import annotations

import logging

import sqlalchemy as sa

log = logging.getLogger("alembic.runtime.migration")


def create_extension(bind: sa.Connection, name: str) -> bool:
    """Whether the extension `name` is in this database, creating it if it can be: into the
    public schema (it outlives any other schema), else into the current one, each try in a
    savepoint so that a refusal leaves the migration's transaction usable. Where it cannot be
    had, says what each try answered."""
    failed = []
    for statement in (
        f"CREATE EXTENSION IF NOT EXISTS {name} SCHEMA public",
        f"CREATE EXTENSION IF NOT EXISTS {name}",
    ):
        try:
            with bind.begin_nested():
                bind.exec_driver_sql(statement)
            break
        except sa.exc.DBAPIError as exc:
            failed.append(f"{statement} failed ({type(exc.orig).__name__})")
    # Asked, not assumed: another migration of the same database may have created it first.
    found = bind.execute(
        sa.text("SELECT 1 FROM pg_extension WHERE extname = :name"), {"name": name}
    ).first()
    if found is not None:
        return True
    log.warning("%s", "; ".join(failed))
    return False
