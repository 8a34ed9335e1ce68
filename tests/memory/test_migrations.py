"""Alembic migrations: from a blank database to head, matching the models, and back down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, make_url, text

from memory.database import db
from memory.database.models_recall import RECALL_FTS_TABLES
from memory.database.records import LEARNER, CorrectionRecord
from memory.database.schema import compared_on, metadata
from memory.store.message_store import Store
from tests.conftest import BACKENDS, PG_URL, postgres_schema

TABLES = {table.name for table in metadata.sorted_tables}


def head_revision(engine: Engine) -> str:
    head = ScriptDirectory.from_config(db.alembic_config(engine)).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def schema_differences(engine: Engine) -> list[Any]:
    """What autogenerate would change to make the database match the models (nothing, we hope)."""
    with engine.connect() as connection:
        # As env.py does: SQLite's FTS5 tables are no model's, the GIN index only Postgres'.
        compared = compared_on(connection.dialect.name)
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_object": compared}
        )
        return list(compare_metadata(context, metadata))


def pam_tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version", *RECALL_FTS_TABLES}


def assert_usable(engine: Engine) -> None:
    """The migrated schema works for the store, cascades included."""
    store = Store(engine)
    learner = store.learners.learner(f"migration-check-{uuid.uuid4().hex[:8]}")
    message = store.conversation.add_message(learner.id, LEARNER, "hola", 2)
    store.ledger.add_corrections(learner.id, message.id, [CorrectionRecord("a", "b")])
    store.ledger.record_usage(learner.id, "m", "reply", 1, 1)
    store.learners.forget(learner.id)
    counts = store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0)


@pytest.fixture
def blank_sqlite(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'blank.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def blank_postgres(postgres_url: str) -> Iterator[Engine]:
    """A blank schema of its own in the test Postgres, so downgrades touch no other test."""
    with postgres_schema(postgres_url) as url:
        engine = db.make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest) -> Engine:
    """A blank database on each backend under test."""
    engine = request.getfixturevalue(f"blank_{request.param}")
    assert isinstance(engine, Engine)
    return engine


def test_upgrade_from_blank_reaches_head_and_matches_the_models(blank: Engine) -> None:
    assert pam_tables(blank) == set()
    assert current_revision(blank) is None

    db.upgrade(blank)

    assert current_revision(blank) == head_revision(blank)
    assert pam_tables(blank) == TABLES
    assert schema_differences(blank) == []
    assert_usable(blank)


def test_upgrade_twice_is_a_no_op(blank: Engine) -> None:
    db.upgrade(blank)
    db.upgrade(blank)
    assert current_revision(blank) == head_revision(blank)
    assert schema_differences(blank) == []


def test_downgrade_to_base_and_upgrade_again(blank: Engine) -> None:
    db.upgrade(blank)
    db.downgrade(blank, "base")
    assert current_revision(blank) is None
    assert pam_tables(blank) == set()

    db.upgrade(blank)

    assert current_revision(blank) == head_revision(blank)
    assert schema_differences(blank) == []
    assert_usable(blank)


def test_foreign_keys_cascade_on_delete(blank: Engine) -> None:
    db.upgrade(blank)
    inspector = inspect(blank)
    about_learners = {
        table.name for table in metadata.sorted_tables if "learner_id" in table.columns
    }
    assert about_learners
    for table in about_learners:
        keys = inspector.get_foreign_keys(table)
        assert keys, f"{table} has no foreign key"
        for key in keys:
            assert key["options"].get("ondelete") == "CASCADE", (table, key)


def test_sqlite_ids_use_autoincrement(blank_sqlite: Engine) -> None:
    """Without AUTOINCREMENT SQLite hands a deleted row's id out again; Pam relies on it not."""
    db.upgrade(blank_sqlite)
    with blank_sqlite.connect() as connection:
        rows = connection.execute(text("SELECT name, sql FROM sqlite_master WHERE type='table'"))
        ddl = {name: sql for name, sql in rows}
    for table in ("learners", "messages", "corrections", "llm_usage"):
        assert "AUTOINCREMENT" in ddl[table], table


def test_the_shared_test_postgres_is_at_head(postgres_url: str) -> None:
    engine = db.make_engine(postgres_url)
    try:
        assert current_revision(engine) == head_revision(engine)
        assert schema_differences(engine) == []
        terms = recall_index(engine)
        assert terms["column_names"] == ["learner_id", "terms"]
        assert terms["dialect_options"]["postgresql_with"] == {"fastupdate": "off"}
    finally:
        engine.dispose()


def test_upgrade_from_the_previous_revision_keeps_the_data(blank: Engine) -> None:
    """0001 → head on a database holding a conversation: rows survive, new columns start
    empty, ids keep growing, and the idempotent-turn indexes work."""
    db.upgrade(blank, "0001")
    with blank.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learners (external_id, created_at) "
                "VALUES ('terminal:old', CURRENT_TIMESTAMP)"
            )
        )
        learner_id = connection.execute(
            text("SELECT id FROM learners WHERE external_id = 'terminal:old'")
        ).scalar_one()
        for role, content in [("learner", "hola"), ("pam", "¡hola! ¿qué tal?")]:
            connection.execute(
                text(
                    "INSERT INTO messages (learner_id, role, content, tokens, created_at) "
                    "VALUES (:learner, :role, :content, 5, CURRENT_TIMESTAMP)"
                ),
                {"learner": learner_id, "role": role, "content": content},
            )
        connection.execute(
            text(
                "INSERT INTO summaries (learner_id, text, tokens, watermark, folds, version) "
                "VALUES (:learner, 'old summary', 2, 0, 0, 0)"
            ),
            {"learner": learner_id},
        )
        connection.execute(
            text(
                "INSERT INTO profiles (learner_id, data, watermark, messages_processed, version) "
                'VALUES (:learner, \'{"who": "Lena"}\', 0, 0, 0)'
            ),
            {"learner": learner_id},
        )

    db.upgrade(blank)

    assert current_revision(blank) == head_revision(blank)
    assert schema_differences(blank) == []
    store = Store(blank)
    context = store.conversation.context(learner_id)
    assert [m.content for m in context.messages] == ["hola", "¡hola! ¿qué tal?"]
    assert context.summary.text == "old summary"
    assert context.profile.data == {"who": "Lena"}
    new = store.conversation.add_message(learner_id, LEARNER, "otra vez", 3, inbox_id=1)
    assert new.id > context.messages[-1].id
    assert store.conversation.add_message(learner_id, LEARNER, "otra vez", 3, inbox_id=1) == new


def test_0012_marks_the_voice_notes_kept_untranscribed_before(blank: Engine) -> None:
    """A note Pam could not transcribe was recognised by the words it was kept as; after 0012
    its column says so, and a transcript or a typed message that only mentions one does not."""
    db.upgrade(blank, "0011")
    kept = [
        ("learner", "🎙 (a voice note of 0:42, not transcribed: too long)"),
        ("learner", "🎙 (a voice note of unknown length, not transcribed: silence)\n\nMi perro"),
        ("learner", "Hoy te mando 🎙 (a voice note of 0:10) mañana"),
        ("pam", "🎙 (a voice note of 0:42, not transcribed: too long)"),
        ("learner", "Ayer fui al mercado"),
    ]
    with blank.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learners (external_id, created_at) "
                "VALUES ('terminal:voice', CURRENT_TIMESTAMP)"
            )
        )
        learner_id = connection.execute(
            text("SELECT id FROM learners WHERE external_id = 'terminal:voice'")
        ).scalar_one()
        for role, content in kept:
            connection.execute(
                text(
                    "INSERT INTO messages (learner_id, role, content, tokens, created_at) "
                    "VALUES (:learner, :role, :content, 5, CURRENT_TIMESTAMP)"
                ),
                {"learner": learner_id, "role": role, "content": content},
            )

    db.upgrade(blank)

    messages = Store(blank).conversation.messages(learner_id)
    assert [m.untranscribed for m in messages] == [True, True, False, False, False]


def test_0016_counts_each_usage_row_as_one_call_and_goes_back_down(blank: Engine) -> None:
    """Every usage row recorded before 0016 is one call; the ledger counts them the same after
    it, and 0016 goes down to 0015 and up again."""
    db.upgrade(blank, "0015")
    with blank.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learners (external_id, created_at) "
                "VALUES ('terminal:usage', CURRENT_TIMESTAMP)"
            )
        )
        learner_id = connection.execute(
            text("SELECT id FROM learners WHERE external_id = 'terminal:usage'")
        ).scalar_one()
        for tokens in (10, 20, 30):
            connection.execute(
                text(
                    "INSERT INTO llm_usage (learner_id, model, purpose, input_tokens, "
                    "output_tokens, created_at) "
                    "VALUES (:learner, 'm', 'reply', :tokens, 1, CURRENT_TIMESTAMP)"
                ),
                {"learner": learner_id, "tokens": tokens},
            )

    db.upgrade(blank)

    assert Store(blank).ledger.usage(learner_id) == {"reply": (3, 60, 3)}
    assert "ix_corrections_message_id" in {
        index["name"] for index in inspect(blank).get_indexes("corrections")
    }
    assert {index["name"] for index in inspect(blank).get_indexes("llm_usage")} == {
        "ix_llm_usage_learner_id_created_at"
    }
    db.downgrade(blank, "0015")
    assert "calls" not in {column["name"] for column in inspect(blank).get_columns("llm_usage")}
    assert {index["name"] for index in inspect(blank).get_indexes("llm_usage")} == {
        "ix_llm_usage_learner_id"
    }
    assert "ix_corrections_message_id" not in {
        index["name"] for index in inspect(blank).get_indexes("corrections")
    }
    db.upgrade(blank)
    assert current_revision(blank) == head_revision(blank)
    assert not schema_differences(blank)


def test_0017_gives_parts_queued_before_it_no_deadline_and_goes_back_down(blank: Engine) -> None:
    """A part queued before 0017 has no send deadline (NULL, as every reply); 0017 goes down
    to 0016, keeping the outbox's rows, and up again."""
    db.upgrade(blank, "0016")
    with blank.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO outbox (address, status, attempts, available_at, inbox_id, seq, "
                "channel, chat_id, text, created_at) VALUES ('telegram:17', 'pending', 0, "
                "CURRENT_TIMESTAMP, 1, 0, 'telegram', '17', 'hola', CURRENT_TIMESTAMP)"
            )
        )

    db.upgrade(blank)

    with blank.connect() as connection:
        rows = connection.execute(text("SELECT text, send_before FROM outbox")).all()
    assert [tuple(row) for row in rows] == [("hola", None)]
    db.downgrade(blank, "0016")
    assert "send_before" not in {column["name"] for column in inspect(blank).get_columns("outbox")}
    with blank.connect() as connection:
        assert connection.execute(text("SELECT text FROM outbox")).scalars().all() == ["hola"]
    db.upgrade(blank)
    assert current_revision(blank) == head_revision(blank)
    assert not schema_differences(blank)


@pytest.fixture
def locked_down_postgres() -> Iterator[Engine]:
    """A database of its own in the test Postgres, reached as a role that owns only a schema
    there: it may not create extensions (as on a managed Postgres that allows none). Skipped
    where the test Postgres' user may not create roles and databases."""
    if not PG_URL:
        pytest.skip("PAM_TEST_DATABASE_URL is not set")
    name = f"pam_locked_{uuid.uuid4().hex[:10]}"
    password = uuid.uuid4().hex
    admin = db.make_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        may = connection.exec_driver_sql(
            "SELECT rolsuper OR (rolcreaterole AND rolcreatedb) FROM pg_roles "
            "WHERE rolname = current_user"
        ).scalar()
    if not may:
        admin.dispose()
        pytest.skip("the test Postgres' user may not create roles and databases")
    url = make_url(db.normalize_url(PG_URL)).set(database=name)
    engine: Engine | None = None
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
        owner = db.make_engine(url.render_as_string(hide_password=False))
        with owner.begin() as connection:
            connection.exec_driver_sql(f"CREATE SCHEMA pam AUTHORIZATION {name}")
        owner.dispose()
        engine = db.make_engine(
            url.set(username=name, password=password)
            .update_query_dict({"options": "-csearch_path=pam"})
            .render_as_string(hide_password=False)
        )
        yield engine
    finally:
        if engine is not None:
            engine.dispose()
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            connection.exec_driver_sql(f"DROP ROLE IF EXISTS {name}")
        admin.dispose()


def recall_index(engine: Engine) -> Any:
    """The reflected GIN index of recall's terms."""
    indexes = inspect(engine).get_indexes("recall_entries")
    return next(i for i in indexes if i["name"] == "ix_recall_entries_terms")


def test_postgres_that_allows_no_extension_still_migrates_and_recalls(
    locked_down_postgres: Engine,
) -> None:
    """Without `unaccent` (migration 0005) and `btree_gin` (0019), the migrations still
    reach head; recall's GIN index stays on the words alone (still without a pending list),
    and search keeps accents."""
    engine = locked_down_postgres
    db.upgrade(engine)

    assert current_revision(engine) == head_revision(engine)
    with engine.connect() as connection:
        extensions = connection.exec_driver_sql("SELECT extname FROM pg_extension").scalars()
        assert not {"unaccent", "btree_gin"} & set(extensions)
    terms = recall_index(engine)
    assert terms["column_names"] == ["terms"]
    assert terms["dialect_options"]["postgresql_with"] == {"fastupdate": "off"}
    assert_usable(engine)
    store = Store(engine)
    learner = store.learners.learner("terminal:locked")
    store.learners.update_settings(learner.id, target_language="Spanish")
    said = store.conversation.add_message(learner.id, LEARNER, "Mi perro se llama Bruno", 6)
    state = store.memory.summary(learner.id)
    assert store.memory.save_summary(
        learner.id, state.version, "summary", 1, said.id, previous_watermark=state.watermark
    )
    assert [s.text for s in store.recall.search(learner.id, "¿mi perro?")] == [
        "Mi perro se llama Bruno"
    ]
