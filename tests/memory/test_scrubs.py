"""/forget's scrub (memory/store/scrubs.py): on SQLite the erased rows' bytes leave the database's
files only with a checkpoint that truncates the write-ahead log. While another connection
holds an older snapshot it cannot complete: /forget then says so, the scrub stays recorded
with its attempts, and a later run completes it once the reader has let go. On Postgres
nothing is recorded (docs/how/remembers.md says what VACUUM does)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from memory.database import db
from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store
from memory.store.scrubs import BUSY, Outcome
from tests.conftest import unique_user

NAME = "Lucía Zarzamora-Quetzal"
PHRASE = "mi loro Pumpernickel canta tangos"


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    db.upgrade(engine)
    yield engine
    engine.dispose()


def files_of(engine: Engine) -> bytes:
    path = db.sqlite_file(str(engine.url))
    assert path is not None
    beside = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    return b"".join(p.read_bytes() for p in (path, *beside) if p.exists())


def a_learner(store: Store, address: str, name: str = NAME, phrase: str = PHRASE) -> int:
    learner = store.learners.learner(address, name)
    store.conversation.add_message(learner.id, LEARNER, f"Hola, {phrase}", 9)
    store.conversation.add_message(learner.id, PAM, "¡Qué loro tan artista!", 6)
    return learner.id


def test_forget_clears_the_files_at_once_when_nobody_reads(store: Store) -> None:
    address = unique_user("whatsapp")
    learner = a_learner(store, address)
    assert store.learners.forget(learner) is True
    assert store.scrubs.pending() == []  # nothing left to do, on either database
    if store.learners.engine.dialect.name == "sqlite":
        data = files_of(store.learners.engine)
        assert [n for n in (address, NAME, PHRASE) if n.encode() in data] == []


def test_a_reader_holding_a_snapshot_leaves_the_scrub_pending_until_it_lets_go(
    sqlite_engine: Engine,
) -> None:
    store = Store(sqlite_engine)
    store.learners.scrub_within = 0.1
    address = "whatsapp:+34612000777"
    learner = a_learner(store, address)
    a_learner(store, "telegram:4242", "Bruno", "mi perro duerme")  # a bystander
    path = db.sqlite_file(str(sqlite_engine.url))
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM learners").fetchone()[0] == 2

        assert store.learners.forget(learner) is False  # the rows are gone, the bytes not
        assert store.learners.find_learner(address) is None
        [pending] = store.scrubs.pending()
        assert (pending.inbox_id, pending.attempts, pending.last_error) == (None, 1, BUSY)
        assert store.scrubs.run() is Outcome.BUSY
        assert store.scrubs.pending()[0].attempts == 2
    finally:
        reader.close()

    assert address.encode() in files_of(sqlite_engine)  # it really was still there
    assert store.scrubs.run() is Outcome.DONE
    assert store.scrubs.pending() == []
    data = files_of(sqlite_engine)
    assert [n for n in (address, NAME, PHRASE) if n.encode() in data] == []
    assert b"telegram:4242" in data  # the bystander stays


def test_a_run_with_nothing_recorded_does_nothing(store: Store) -> None:
    assert store.scrubs.run() is Outcome.NONE
