"""How many bytes each of Pam's tables takes, indexes included, as each backend reports it once
its free space is given back: Postgres' `pg_total_relation_size` (table, indexes and TOAST)
after `VACUUM (FULL, ANALYZE)`, SQLite's `dbstat` virtual table (pages of the table and of each
index on it) after `VACUUM`. SQLite's full-text index of recall (`recall_fts` and the tables
FTS5 keeps it in) counts as one, `recall_fts`."""

from __future__ import annotations

from sqlalchemy import Engine, text

from memory.database.models_recall import RECALL_FTS, RECALL_FTS_TABLES
from memory.database.schema import metadata

TABLES = tuple(table.name for table in metadata.sorted_tables)


class NoDbstat(RuntimeError):
    """This SQLite was built without the dbstat virtual table (SQLITE_ENABLE_DBSTAT_VTAB)."""


def table_sizes(engine: Engine) -> dict[str, int]:
    """Bytes per table, indexes (and on Postgres TOAST) included, after a vacuum."""
    if engine.dialect.name == "postgresql":
        return _postgres_sizes(engine)
    return _sqlite_sizes(engine)


def _postgres_sizes(engine: Engine) -> dict[str, int]:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table in TABLES:
            connection.execute(text(f'VACUUM (FULL, ANALYZE) "{table}"'))
        return {
            table: int(
                connection.scalar(
                    text("SELECT pg_total_relation_size(quote_ident(:table)::regclass)"),
                    {"table": table},
                )
                or 0
            )
            for table in TABLES
        }


def _sqlite_sizes(engine: Engine) -> dict[str, int]:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        connection.execute(text("VACUUM"))
        try:
            pages = connection.execute(
                text(
                    "SELECT coalesce(m.tbl_name, d.name) AS owner, sum(d.pgsize) AS bytes "
                    "FROM dbstat AS d LEFT JOIN sqlite_master AS m ON m.name = d.name "
                    "GROUP BY owner"
                )
            ).all()
        except Exception as exc:  # "no such table: dbstat"
            raise NoDbstat(
                "this Python's SQLite has no dbstat virtual table (built without "
                "SQLITE_ENABLE_DBSTAT_VTAB): per-table sizes can't be read, run with "
                "--backends postgres"
            ) from exc
    sizes = dict.fromkeys(TABLES, 0)
    for owner, size in pages:
        name = RECALL_FTS if owner in RECALL_FTS_TABLES else owner
        if name in sizes or name == RECALL_FTS:
            sizes[name] = sizes.get(name, 0) + int(size)
    return sizes
