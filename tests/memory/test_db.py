"""Pooled Postgres connections: pinged before use only after sitting idle, and a connection
the server cut while idle is replaced without the caller seeing an error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, exc, text

from memory.database import db

PID = text("SELECT pg_backend_pid()")


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = db.make_engine(postgres_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


@pytest.fixture
def events(engine: Engine) -> list[str]:
    """The pool's checkouts and pings, in order."""
    seen: list[str] = []

    def on_checkout(dbapi_connection: Any, *_: Any) -> None:
        seen.append("<checkout>")

    event.listen(engine, "checkout", on_checkout)
    original = engine.dialect.do_ping

    def counted_ping(dbapi_connection: Any) -> bool:
        seen.append("<ping>")
        return original(dbapi_connection)

    engine.dialect.do_ping = counted_ping  # type: ignore[method-assign]
    return seen


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(PID).scalar_one())


def idle_for(engine: Engine, seconds: float) -> None:
    """Age the pooled connection's last check-in by `seconds` instead of sleeping."""
    with engine.connect() as connection:
        record = connection.connection._connection_record
        assert record is not None
    record.info["checked_in"] -= seconds


def test_a_connection_in_steady_use_is_not_pinged(engine: Engine, events: list[str]) -> None:
    backend_pid(engine)  # the first checkout of a new connection is pinged
    events.clear()
    for _ in range(5):
        backend_pid(engine)
    assert events.count("<ping>") == 0 and events.count("<checkout>") == 5


def test_an_idle_connection_is_pinged_before_use(engine: Engine, events: list[str]) -> None:
    backend_pid(engine)
    idle_for(engine, db.PING_AFTER_IDLE_SECONDS + 1)
    events.clear()
    backend_pid(engine)
    assert events.count("<ping>") == 1


def test_an_idle_connection_the_server_cut_is_replaced_unnoticed(
    engine: Engine, postgres_url: str
) -> None:
    first = backend_pid(engine)
    killer = db.make_engine(postgres_url)
    try:
        with killer.begin() as connection:
            assert connection.execute(text(f"SELECT pg_terminate_backend({first})")).scalar()
    finally:
        killer.dispose()
    idle_for(engine, db.PING_AFTER_IDLE_SECONDS + 1)

    assert backend_pid(engine) != first  # no error: the ping found it dead, a new one serves


SYNCHRONOUS_COMMIT = text("SHOW synchronous_commit")


def test_a_replayable_engine_commits_without_waiting_for_the_disk(postgres_url: str) -> None:
    """A worker's engine: every connection, after rollbacks and in autocommit too."""
    replayable = db.make_engine(postgres_url, pool_size=1, max_overflow=0, replayable=True)
    try:
        with replayable.connect() as connection:
            assert connection.execute(SYNCHRONOUS_COMMIT).scalar_one() == "off"
            connection.rollback()
        with db.autocommit(replayable).connect() as connection:
            assert connection.execute(SYNCHRONOUS_COMMIT).scalar_one() == "off"
    finally:
        replayable.dispose()


def test_any_other_engine_waits_for_the_disk(engine: Engine) -> None:
    """The web's: its acknowledgement tells the platform the message is safe."""
    with engine.connect() as connection:
        assert connection.execute(SYNCHRONOUS_COMMIT).scalar_one() == "on"


def test_pam_built_for_a_worker_process_commits_without_waiting(postgres_url: str) -> None:
    from webhooks.settings import Settings
    from webhooks.wiring import build

    settings = Settings(database_url=postgres_url, llm={"api_key": "test-key"})
    for replayable, expected in ((True, "off"), (False, "on")):
        pam = build(settings, submit=lambda work: work(), replayable=replayable)
        try:
            with pam.engine.connect() as connection:
                assert connection.execute(SYNCHRONOUS_COMMIT).scalar_one() == expected
        finally:
            pam.engine.dispose()


def test_a_pam_process_keeps_the_connections_it_opened_up_to_twice_its_pool_size(
    postgres_url: str,
) -> None:
    # PAM_DB_POOL_SIZE=2: at most 4 at once, as with 2 and 2 overflow, but a connection that
    # comes back stays open: no Postgres session started for each busy moment.
    engine = db.pooled_engine(postgres_url, 2, pool_timeout=0.2)
    opened: list[int] = []
    event.listen(engine, "connect", lambda *_: opened.append(1))
    try:
        for _ in range(3):  # three busy moments of four statements at once
            held = [engine.connect() for _ in range(4)]
            pids = {c.execute(PID).scalar() for c in held}
            with pytest.raises(exc.TimeoutError, match="size 4 overflow 0"):
                engine.connect()  # a fifth waits for one of the four, never opens
            for connection in held:
                connection.close()
        assert len(pids) == 4 and len(opened) == 4
    finally:
        engine.dispose()
