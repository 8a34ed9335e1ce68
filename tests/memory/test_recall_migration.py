"""Migration 0005 from the previous schema (0004) holding conversations: what the summaries
had already folded is indexed (messages up to each watermark, and their corrections), what
they had not is not, and the index then works and forgets like one built by folds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text

from memory.database import db
from memory.database.models_recall import RecallEntry
from memory.recall.search import CORRECTION
from memory.store.message_store import Store
from tests.conftest import BACKENDS, postgres_schema

SAID = datetime(2026, 10, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def at_0004_sqlite(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    db.upgrade(engine, "0004")
    yield engine
    engine.dispose()


@pytest.fixture
def at_0004_postgres(postgres_url: str) -> Iterator[Engine]:
    with postgres_schema(postgres_url) as url:
        engine = db.make_engine(url)
        try:
            db.upgrade(engine, "0004")
            yield engine
        finally:
            engine.dispose()


@pytest.fixture(params=BACKENDS)
def at_0004(request: pytest.FixtureRequest) -> Engine:
    engine = request.getfixturevalue(f"at_0004_{request.param}")
    assert isinstance(engine, Engine)
    return engine


def old_learner(engine: Engine, name: str, language: str | None, said: list[str]) -> list[int]:
    """A learner of the old schema with `said` stored (learner and Pam by turns, an hour
    apart from SAID): the message ids."""
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learners (external_id, target_language, created_at) "
                "VALUES (:name, :language, :at)"
            ),
            {"name": name, "language": language, "at": SAID},
        )
        learner = connection.execute(
            text("SELECT id FROM learners WHERE external_id = :name"), {"name": name}
        ).scalar_one()
        ids = []
        for n, content in enumerate(said):
            connection.execute(
                text(
                    "INSERT INTO messages (learner_id, role, content, tokens, created_at) "
                    "VALUES (:learner, :role, :content, 5, :at)"
                ),
                {
                    "learner": learner,
                    "role": "learner" if n % 2 == 0 else "pam",
                    "content": content,
                    "at": SAID + timedelta(hours=n),
                },
            )
            ids.append(
                connection.execute(
                    text("SELECT max(id) FROM messages WHERE learner_id = :l"), {"l": learner}
                ).scalar_one()
            )
        for table in ("summaries", "profiles"):
            columns = (
                "text, tokens, watermark, folds, version"
                if table == "summaries"
                else ("data, watermark, messages_processed, version")
            )
            values = "'', 0, 0, 0, 0" if table == "summaries" else "'{}', 0, 0, 0"
            connection.execute(
                text(f"INSERT INTO {table} (learner_id, {columns}) VALUES (:l, {values})"),
                {"l": learner},
            )
    return [learner, *ids]


def folded_upto(engine: Engine, learner: int, watermark: int) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE summaries SET watermark = :w, folds = 1, version = 1 WHERE learner_id = :l"
            ),
            {"w": watermark, "l": learner},
        )


def correction(engine: Engine, learner: int, message: int | None, original: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO corrections (learner_id, message_id, original, corrected, "
                "explanation, category, created_at) "
                "VALUES (:l, :m, :o, 'Tengo un perro', 'tener, no ser', 'grammar', :at)"
            ),
            {"l": learner, "m": message, "o": original, "at": SAID},
        )


def test_upgrade_from_0004_indexes_what_was_folded(at_0004: Engine) -> None:
    suffix = id(at_0004)
    ana, *said = old_learner(
        at_0004,
        f"terminal:ana-{suffix}",
        "Spanish",
        [
            "Soy perro Bruno",  # folded, with a correction
            "¡Qué nombre tan bonito!",  # folded, Pam's
            "Vivo en Sevilla con Bruno",  # not folded yet: the prompt still carries it
            "¡Sevilla es preciosa!",
        ],
    )
    folded_upto(at_0004, ana, said[1])
    correction(at_0004, ana, said[0], "Soy perro")
    correction(at_0004, ana, said[2], "Vivo en Sevilla con Bruno")  # its message is unfolded
    correction(at_0004, ana, None, "Bruno sin mensaje")  # no message: never folded
    (ben, *theirs) = old_learner(at_0004, f"terminal:ben-{suffix}", None, ["Bruno es mi gato"])
    never, *_ = old_learner(at_0004, f"terminal:new-{suffix}", "German", ["Bruno wer?"])
    folded_upto(at_0004, ben, theirs[0])

    db.upgrade(at_0004)

    store = Store(at_0004)
    found = store.recall.search(ana, "perro Bruno", limit=10)
    assert sorted((s.kind, s.role, s.text) for s in found) == [
        (CORRECTION, "learner", "Soy perro → Tengo un perro (tener, no ser)"),
        ("message", "learner", "Soy perro Bruno"),
    ]
    assert {s.said_at for s in found} == {SAID}  # when the message was said
    assert [s.text for s in store.recall.search(ana, "nombre bonito")] == [
        "¡Qué nombre tan bonito!"
    ]
    assert store.recall.search(ana, "Sevilla") == []
    assert [s.text for s in store.recall.search(ben, "Bruno")] == ["Bruno es mi gato"]
    assert store.recall.search(never, "Bruno") == []

    # And from here the index grows with folds and shrinks with /forget as a new one does.
    state = store.memory.summary(ana)
    assert store.memory.save_summary(
        ana, state.version, "s", 1, said[3], previous_watermark=state.watermark
    )
    assert "Vivo en Sevilla con Bruno" in [s.text for s in store.recall.search(ana, "Sevilla")]
    store.learners.forget(ana)
    with at_0004.connect() as connection:
        left = connection.execute(
            select(func.count()).select_from(RecallEntry).where(RecallEntry.learner_id == ana)
        ).scalar_one()
    assert left == 0
    assert store.recall.search(ana, "Bruno") == []
    assert [s.text for s in store.recall.search(ben, "Bruno")] == ["Bruno es mi gato"]


def test_downgrade_to_0004_removes_the_index(at_0004: Engine) -> None:
    db.upgrade(at_0004)
    db.downgrade(at_0004, "0004")
    with at_0004.connect() as connection:
        names = set(
            connection.execute(
                text(
                    "SELECT name FROM sqlite_master"
                    if at_0004.dialect.name == "sqlite"
                    else "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            ).scalars()
        )
    assert not {n for n in names if n.startswith("recall")}
    db.upgrade(at_0004)  # and back up again
