"""Database engines and migrations: how Pam connects to SQLite and to Postgres (what their
statements do differently is in memory/database/backends/)."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from memory.clock import Clock, utcnow

MIGRATIONS = Path(__file__).with_name("migrations")
# A pooled Postgres connection idle longer than this is pinged before use (it may have been
# cut: a restart, a failover, an idle timeout); one in steady use is not.
PING_AFTER_IDLE_SECONDS = 2.0
# How long a SQLite connection waits for another's write lock before "database is locked".
SQLITE_BUSY_SECONDS = 30.0
# psycopg converts a statement's placeholders once and keeps the result (an LRU of 128), except
# for statements longer than 4,096 characters or with more than 50 parameters, which it parses
# again on every execute. Pam's statements are fixed text, and the reply's write on Postgres is
# 4,803 characters with 59 parameters: these limits keep it cached (0.12 ms of CPU a reply).
PSYCOPG_CACHED_CHARS = 16_384
PSYCOPG_CACHED_PARAMS = 256


class DatabaseURLError(ValueError):
    """A DATABASE_URL Pam cannot use; the message says how to fix it."""


class SchemaNotCurrent(RuntimeError):
    """The database has no tables yet, or older ones than this Pam needs: the message says
    so and to run `pam db upgrade`."""


def normalize_url(url: str) -> str:
    """Accept Heroku/Fly's `postgres://` and plain `postgresql://`, using the psycopg 3 driver."""
    url = url.strip()
    if not url:
        raise DatabaseURLError("DATABASE_URL is empty; unset it to use the local SQLite file")
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise DatabaseURLError(
            f"DATABASE_URL is not a database URL ({exc}); "
            "expected e.g. postgresql://user:pass@host/db or sqlite:///pam.db"
        ) from None
    if parsed.get_backend_name() not in {"sqlite", "postgresql"}:
        raise DatabaseURLError(
            f"DATABASE_URL uses {parsed.get_backend_name()!r}; Pam supports sqlite and postgresql"
        )
    return url


def _sqlite_pragmas(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the reply path read while a background job writes; foreign keys make
    # /forget's cascade real; secure_delete overwrites erased content in the file.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.close()


def make_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int = 5,
    pool_timeout: float = 30.0,
    replayable: bool = False,
) -> Engine:
    """Create an engine for `url` with Pam's connection settings for its backend.

    `replayable`: every write through this engine can be replayed from something already
    durable, as a worker's can from the inbox (a claim, a stored turn, a finish, a send's
    record). On Postgres its commits then return without waiting for the write-ahead log to
    reach the disk (`synchronous_commit = off`, like SQLite's `synchronous = NORMAL`): a
    commit is durable against any crash of Pam's processes, and a crash of the database
    server itself loses at most the last fraction of a second of them; the inbox item they
    came from is then simply answered again. Never for the web, whose acknowledgement tells
    the platform a message is safe."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_SECONDS},
            hide_parameters=True,  # errors must not carry learners' words into the logs
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        pool_recycle=1800,
        hide_parameters=True,
    )
    _ping_when_idle(engine)
    _cache_long_statements()
    if replayable:
        event.listen(engine, "connect", _commit_without_waiting_for_disk)
    return engine


def pooled_engine(
    url: str, pool_size: int, *, replayable: bool = False, pool_timeout: float = 30.0
) -> Engine:
    """The engine of a Pam process with PAM_DB_POOL_SIZE = `pool_size`: at most twice that
    many connections, each kept open once opened. (A pool of `pool_size` with as many overflow
    has the same bound, but closes each overflow connection as it comes back: a worker
    answering 33 messages a second at a pool of 2 started 9 Postgres sessions a second, each
    a server process forked and its caches and prepared statements built anew.)"""
    return make_engine(
        url,
        pool_size=2 * pool_size,
        max_overflow=0,
        pool_timeout=pool_timeout,
        replayable=replayable,
    )


def _cache_long_statements() -> None:
    """Raise psycopg's limits on the statements whose conversion it caches (see
    PSYCOPG_CACHED_CHARS). Its limits guard against ORMs' many-row INSERTs, each length a
    statement of its own; the cache stays 128 entries, so at most a few MB more."""
    from psycopg import _queries

    _queries.MAX_CACHED_STATEMENT_LENGTH = max(
        _queries.MAX_CACHED_STATEMENT_LENGTH, PSYCOPG_CACHED_CHARS
    )
    _queries.MAX_CACHED_STATEMENT_PARAMS = max(
        _queries.MAX_CACHED_STATEMENT_PARAMS, PSYCOPG_CACHED_PARAMS
    )


def _commit_without_waiting_for_disk(dbapi_connection: Any, _record: Any) -> None:
    """A session setting, once per new connection: see make_engine's `replayable`."""
    dbapi_connection.execute("SET synchronous_commit TO off")
    dbapi_connection.commit()


def autocommit(engine: Engine) -> Engine:
    """`engine` for work of one statement, and for reads that need no snapshot across
    statements: on Postgres each statement commits by itself, which saves the BEGIN and the
    COMMIT (or ROLLBACK) round trips, two of a read's three. SQLite's are in-process and cost
    next to nothing, so there it is `engine` itself."""
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")


class Tables:
    """What each part of the message store reads and writes through, all from one engine, and
    the clock its rows are stamped with."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        self.engine = engine
        self.clock = clock
        self.single = autocommit(engine)  # one statement, or reads that need no snapshot
        self.sessions: sessionmaker[Session] = sessionmaker(engine, expire_on_commit=False)


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pool_pre_ping, for connections that sat idle. pool_pre_ping pings on every
    checkout: a round trip per transaction, about a third of a turn's. A connection that
    was in use moments ago is all but certainly alive, and if it is not, the failure
    invalidates the whole pool and the work is retried (the worker's lanes and leases, the
    platforms' webhook retries after a 503)."""

    def checked_in(_connection: Any, entry: ConnectionPoolEntry) -> None:
        entry.info["checked_in"] = time.monotonic()

    def checkout(connection: Any, entry: ConnectionPoolEntry, _: PoolProxiedConnection) -> None:
        if time.monotonic() - entry.info.get("checked_in", 0.0) < PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(connection)
        except Exception as exc:  # the pool drops this connection and checks out another
            raise DisconnectionError(f"stale connection: {type(exc).__name__}") from exc

    event.listen(engine, "checkin", checked_in)
    event.listen(engine, "checkout", checkout)


def alembic_config(engine: Engine) -> Config:
    """An Alembic configuration bound to `engine`, with no alembic.ini needed."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> list[str]:
    """Apply migrations up to `revision` (default: the newest); returns those applied, oldest
    first, each as its id and title ("0007 voice"), so that a caller can say what it did."""
    config = alembic_config(engine)
    before = schema_revision(engine)
    command.upgrade(config, revision)
    after = schema_revision(engine)
    if after is None or after == before:
        return []
    scripts = ScriptDirectory.from_config(config)
    # From `after` down to, not including, `before` (None: from the first migration).
    applied = scripts.iterate_revisions(after, before)
    return [migration_name(script.revision, script.doc) for script in reversed(list(applied))]


def migration_name(revision: str, doc: str | None) -> str:
    """A migration as an operator reads it: its id and its docstring's headline, up to the
    first colon, comma or parenthesis ("0007 voice")."""
    headline = re.split(r"[:,(\n]", (doc or "").strip(), maxsplit=1)[0].strip()
    return f"{revision} {headline}".strip()


def current_migration(engine: Engine) -> str | None:
    """The migration the database is at, as `migration_name` says it (None: no tables)."""
    current = schema_revision(engine)
    if current is None:
        return None
    script = ScriptDirectory.from_config(alembic_config(engine)).get_revision(current)
    return migration_name(current, script.doc if script is not None else None)


def downgrade(engine: Engine, revision: str) -> None:
    """Roll migrations back to `revision`."""
    command.downgrade(alembic_config(engine), revision)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite `url` (None for Postgres and for in-memory SQLite)."""
    parsed = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def schema_revision(engine: Engine) -> str | None:
    """The migration the database is at (None: no tables at all, or none of Pam's)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def require_current_schema(url: str) -> str | None:
    """Raise SchemaNotCurrent unless the database at `url` is migrated to this Pam's newest
    revision. Commands that do not migrate (`pam worker`, `pam memory-jobs`) call it first:
    on missing tables they would fail every statement, over and over. A SQLite file that is
    not there is reported without creating it (connecting would). Returns a warning when the
    database is at a revision this Pam does not know (migrated by a newer release: this one
    may still work, as during a rollback), else None."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise SchemaNotCurrent(
            f"there is no database at {path}: run `pam db upgrade` to create it (or point "
            "DATABASE_URL at the one you use)"
        )
    engine = make_engine(url)
    try:
        current = schema_revision(engine)
    finally:
        engine.dispose()
    scripts = ScriptDirectory.from_config(alembic_config(engine))
    head = scripts.get_current_head()
    if current == head:
        return None
    if current is None:
        raise SchemaNotCurrent(
            "the database has no tables yet: run `pam db upgrade` first (the release phase "
            "does this on Heroku and Fly)"
        )
    known = {script.revision for script in scripts.walk_revisions()}
    if current not in known:
        return (
            f"the database is at migration {current}, which this Pam does not know (a newer "
            f"release migrated it; this one expects {head})"
        )
    raise SchemaNotCurrent(
        f"the database is at migration {current} and this Pam needs {head}: run "
        "`pam db upgrade` first"
    )
