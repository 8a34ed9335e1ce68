"""Alembic environment: runs against the engine Pam hands it (see memory/database/db.py)."""

from __future__ import annotations

from alembic import context

from memory.database.schema import compared_on, metadata

config = context.config
target_metadata = metadata


def run_migrations_online() -> None:
    engine = config.attributes["engine"]
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            include_object=compared_on(connection.dialect.name),
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("Pam's migrations run online only: use `pam db upgrade`.")
run_migrations_online()
