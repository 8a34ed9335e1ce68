"""Recall's GIN index by learner on Postgres: rebuilt to serve one learner's search without
reading every learner's entries:

- keyed by the learner as well as by word, where the `btree_gin` extension can be created
  (elsewhere on the words alone, as before): a search reads the learner's own entries of its
  words, not every learner's;
- without GIN's pending list (`fastupdate = off`): with it, new entries wait in an unsorted
  list of up to 4 MB, which every search reads whole until a VACUUM merges it.

With a year of chat a learner (7,200 messages) and 50 learners, the search's p95 was 29.7 ms
and is now 6.0 ms; a fold's insert of its entries costs some 0.035 ms more an entry, in the
memory job (docs/benchmarks/recall.md, "A year of chat a learner").

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from memory.database.extensions import create_extension

log = logging.getLogger("alembic.runtime.migration")

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

INDEX = "ix_recall_entries_terms"
BUILDING = f"{INDEX}_0019"
# How long the swap may wait for the table (behind a fold's or /forget's open transaction)
# before the release fails, rather than hold up every search that queues behind it.
SWAP_WAIT = "10s"


def rebuild(bind: sa.Connection, columns: list[str], storage: dict[str, str]) -> None:
    """The index on `columns` in place of the one there: built beside it first, under a name
    of its own (a build locks the table's writes, not its reads: searches go on), then swapped
    in, which locks the table only for the moment before the release's commit. `storage`:
    the index's storage parameters."""
    op.create_index(
        BUILDING, "recall_entries", columns, postgresql_using="gin", postgresql_with=storage
    )
    bind.exec_driver_sql(f"SET LOCAL lock_timeout = '{SWAP_WAIT}'")
    bind.exec_driver_sql(f"DROP INDEX IF EXISTS {INDEX}")
    bind.exec_driver_sql(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
    bind.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    columns = ["learner_id", "terms"]
    # A trusted extension from Postgres 13: any role that may create in the database may add it.
    if not create_extension(bind, "btree_gin"):
        log.warning(
            "recall: no btree_gin extension; each search reads every learner's entries "
            "of its words (slower as the database grows; docs/how/remembers.md says how to "
            "add it later)"
        )
        columns = ["terms"]
    rebuild(bind, columns, {"fastupdate": "off"})


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        rebuild(bind, ["terms"], {})
