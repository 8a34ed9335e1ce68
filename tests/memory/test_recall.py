"""Recall's index and search, on a real SQLite file and on Postgres: what a fold indexes (and
what it must not), accents, stems, ranking by relevance then recency, isolation between
learners, hostile queries, and /forget."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select, text, update

from memory.config import MemoryConfig
from memory.database.backends.postgres import _recall_statements
from memory.database.models import Summary
from memory.database.models_recall import RecallEntry
from memory.database.records import LEARNER, PAM, CorrectionRecord
from memory.jobs.summary import fold
from memory.recall.search import CORRECTION, MESSAGE, Snippet, index_folded
from memory.recall_terms import (
    MAX_QUERY_WORDS,
    learner_terms,
    pg_config,
    query_words,
    snowball_language,
)
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import explained_plan, rows_visited


def learner(store: Store, language: str | None = "Spanish") -> int:
    found = store.learners.learner(unique_user("recall"))
    if language is not None:
        store.learners.update_settings(found.id, target_language=language)
    return found.id


def say(store: Store, learner_id: int, *texts: str, role: str = LEARNER) -> list[int]:
    return [store.conversation.add_message(learner_id, role, t, 5).id for t in texts]


def fold_upto(store: Store, learner_id: int, watermark: int) -> None:
    """What a fold writes: the summary, compare-and-set, with the messages up to
    `watermark` going into the index."""
    state = store.memory.summary(learner_id)
    assert store.memory.save_summary(
        learner_id,
        state.version,
        "summary",
        1,
        watermark,
        previous_watermark=state.watermark,
    )


def texts(found: list[Snippet]) -> list[str]:
    return [s.text for s in found]


def entries(store: Store, learner_id: int) -> int:
    with store.recall.engine.connect() as connection:
        return connection.execute(
            select(func.count())
            .select_from(RecallEntry)
            .where(RecallEntry.learner_id == learner_id)
        ).scalar_one()


def test_only_what_a_fold_took_is_found(store: Store) -> None:
    me = learner(store)
    folded = say(store, me, "Mi perro se llama Bruno")
    folded += say(store, me, "¡Bruno es un nombre precioso para un perro!", role=PAM)
    say(store, me, "Mi gato se llama Tigre, pero el perro manda")  # still unfolded
    fold_upto(store, me, folded[-1])

    found = store.recall.search(me, "perro")

    assert sorted(texts(found)) == sorted(
        ["Mi perro se llama Bruno", "¡Bruno es un nombre precioso para un perro!"]
    )
    assert {(s.kind, s.role) for s in found} == {(MESSAGE, LEARNER), (MESSAGE, PAM)}
    assert store.recall.search(me, "Tigre") == []


def test_each_fold_indexes_only_its_own_range(store: Store) -> None:
    me = learner(store)
    first = say(store, me, "Trabajo en una panadería", "Me encanta la panadería")
    fold_upto(store, me, first[-1])
    second = say(store, me, "Mañana voy a la panadería otra vez")
    fold_upto(store, me, second[-1])

    assert entries(store, me) == 3
    assert len(store.recall.search(me, "panadería", limit=10)) == 3


def test_a_fold_that_loses_its_race_indexes_nothing(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Mi restaurante favorito es Casa Lucio")
    state = store.memory.summary(me)
    fold_upto(store, me, 0)  # a racing writer (say, a fold that took nothing) bumps the version
    lost = store.memory.save_summary(
        me, state.version, "late", 1, ids[-1], previous_watermark=state.watermark
    )
    assert lost is False
    assert entries(store, me) == 0
    assert store.recall.search(me, "restaurante") == []


def test_the_real_fold_indexes_in_its_own_write(store: Store) -> None:
    """Through summary.fold with a fake model: what leaves the conversation becomes findable."""
    config = MemoryConfig(
        memory_model="m", window_messages=4, summary_trigger_tokens=20, fold_batch_messages=2
    )
    me = learner(store)
    for n in range(6):
        say(store, me, f"El lago número {n} se llama Titicaca", role=LEARNER if n % 2 else PAM)
    say(store, me, "Hoy llueve", "Sí", "Mucho", "Adiós")  # the window, never folded here
    assert fold(
        me, store=store, model=FakeChatModel(), counter=TokenCounter("gpt-4o-mini"), config=config
    )
    watermark = store.memory.summary(me).watermark
    assert entries(store, me) == len(
        [m for m in store.conversation.messages(me) if m.id <= watermark]
    )
    assert len(store.recall.search(me, "Titicaca", limit=10)) == 6
    assert store.recall.search(me, "llueve") == []


def test_corrections_of_folded_messages_are_found_as_original_arrow_corrected(
    store: Store,
) -> None:
    me = learner(store)
    folded, later = say(store, me, "Yo soy hambre", "Yo tengo sed")
    store.ledger.add_corrections(
        me, folded, [CorrectionRecord("Yo soy hambre", "Yo tengo hambre", "tener hambre")]
    )
    store.ledger.add_corrections(me, later, [CorrectionRecord("Yo tengo sed", "Tengo sed")])
    fold_upto(store, me, folded)

    found = store.recall.search(me, "hambre", limit=5)
    corrections = [s for s in found if s.kind == CORRECTION]
    assert [s.text for s in corrections] == ["Yo soy hambre → Yo tengo hambre (tener hambre)"]
    assert corrections[0].role == LEARNER
    assert store.recall.search(me, "sed") == []  # its message is not folded yet


def test_accents_do_not_matter_either_way(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Me gusta el café de Bogotá", "La canción se llamaba Despacito")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "cafe bogota")) == ["Me gusta el café de Bogotá"]
    assert texts(store.recall.search(me, "CANCION")) == ["La canción se llamaba Despacito"]
    assert texts(store.recall.search(me, "cáfé")) == ["Me gusta el café de Bogotá"]


@pytest.mark.parametrize(
    ("language", "said", "asked"),
    [
        ("Spanish", "Vivo con mis dos perros", "¿Cómo se llama tu perro?"),
        ("spanish", "Trabajaba en una biblioteca", "¿Dónde trabajas?"),
        ("es", "Mis hermanas viven en Lima", "¿Tu hermana?"),
        ("German", "Meine Hunde heißen Max und Moritz", "Wie heißt dein Hund?"),
        ("French", "J'habite à Lyon depuis mai", "Où habites-tu ?"),
        ("Italian", "Cucinavo la pasta ogni giorno", "Cucini?"),
    ],
)
def test_stems_of_the_target_language_match_other_forms(
    store: Store, language: str, said: str, asked: str
) -> None:
    me = learner(store, language)
    ids = say(store, me, said, "Una frase sin nada que ver")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, asked)) == [said]


def test_a_language_without_a_stemmer_still_matches_words(store: Store) -> None:
    me = learner(store, "Klingon")
    ids = say(store, me, "Qapla' batlh Kahless")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "kahless")) == ["Qapla' batlh Kahless"]
    none = learner(store, None)
    ids = say(store, none, "My cat Whiskers")
    fold_upto(store, none, ids[-1])
    assert texts(store.recall.search(none, "whiskers")) == ["My cat Whiskers"]


def test_a_newer_statement_that_supersedes_an_older_one_ranks_first(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Vivo en Madrid", "Hoy hace sol", "Ahora vivo en Sevilla")
    fold_upto(store, me, ids[-1])

    found = store.recall.search(me, "¿Dónde vives?")

    assert texts(found) == ["Ahora vivo en Sevilla", "Vivo en Madrid"]
    assert found[0].score > found[1].score


def test_an_old_exact_match_beats_a_newer_passing_mention(store: Store) -> None:
    me = learner(store)
    ids = say(
        store,
        me,
        "Mi perro Bruno es un labrador",
        "Hoy fui al parque, había un perro, mucha gente, música, helados y bicicletas por todas"
        " partes, fue un día largo y bonito con amigos del trabajo",
    )
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "perro Bruno labrador"))[0] == (
        "Mi perro Bruno es un labrador"
    )


def test_snippets_are_dated_when_said(store: Store) -> None:
    me = learner(store)
    before = datetime.now(UTC) - timedelta(seconds=5)
    ids = say(store, me, "Mi cumpleaños es el 3 de mayo")
    fold_upto(store, me, ids[-1])
    (found,) = store.recall.search(me, "cumpleaños")
    assert found.said_at.tzinfo is not None
    assert before <= found.said_at <= datetime.now(UTC) + timedelta(seconds=5)


def test_limit_caps_the_results(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, *(f"La montaña número {n}" for n in range(8)))
    fold_upto(store, me, ids[-1])
    assert len(store.recall.search(me, "montaña")) == 3
    assert len(store.recall.search(me, "montaña", limit=5)) == 5
    assert store.recall.search(me, "montaña", limit=0) == []


def test_another_learners_identical_words_never_come_back(store: Store) -> None:
    me, other = learner(store), learner(store)
    mine = say(store, me, "Mi perro se llama Bruno")
    theirs = say(store, other, "Mi perro se llama Bruno", "Bruno Bruno perro perro perro")
    fold_upto(store, me, mine[-1])
    fold_upto(store, other, theirs[-1])

    assert texts(store.recall.search(me, "perro Bruno", limit=10)) == ["Mi perro se llama Bruno"]
    # Their learner id as a word of the query matches nothing of theirs either.
    assert store.recall.search(me, f"{other} perro", limit=10)[0].text == "Mi perro se llama Bruno"
    assert len(store.recall.search(me, f"{other} {me}", limit=10)) == 0


def test_a_learner_with_no_index_or_no_row_finds_nothing(store: Store) -> None:
    me = learner(store)
    assert store.recall.search(me, "perro") == []
    assert store.recall.search(10**9, "perro") == []


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "¿?¡!...",
        "el la de que y",
        "the and of",
        "a e i o u",
    ],
)
def test_a_query_with_no_searchable_words_finds_nothing(store: Store, query: str) -> None:
    me = learner(store)
    ids = say(store, me, "el la de que y the and of")
    fold_upto(store, me, ids[-1])
    assert store.recall.search(me, query) == []


HOSTILE = [
    '"',
    '""',
    "'",
    "perro\"'",
    '"perro" OR "gato"',
    "perro NEAR gato",
    "NEAR(perro gato, 2)",
    "perr*",
    "*",
    "text:perro",
    "learner_id : 1",
    "{text terms}: perro",
    "(perro",
    "perro)",
    "perro AND",
    "AND OR NOT",
    "perro & gato | !x <-> y:*",
    "'; DROP TABLE recall_entries; --",
    "perro\\",
    "^perro",
    "perro\x00gato",
    "perro " * 500,
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_only_words(store: Store, query: str) -> None:
    me = learner(store)
    ids = say(store, me, "Mi perro se llama Bruno", "Tengo un gato negro")
    fold_upto(store, me, ids[-1])

    found = store.recall.search(me, query)

    words = set(query_words(query))
    expected = set()
    if words & {"perro", "perr"}:
        expected.add("Mi perro se llama Bruno")
    if "gato" in words:
        expected.add("Tengo un gato negro")
    assert set(texts(found)) == expected
    assert entries(store, me) == 2  # nothing dropped


def test_forget_removes_the_learners_entries_with_everything_else(store: Store) -> None:
    me, other = learner(store), learner(store)
    mine = say(store, me, "Mi perro se llama Bruno")
    theirs = say(store, other, "Mi perro se llama Rex")
    fold_upto(store, me, mine[-1])
    fold_upto(store, other, theirs[-1])
    info = store.learners.get_learner(me)

    store.learners.forget(me)

    assert entries(store, me) == 0
    assert store.recall.search(me, "perro") == []
    assert store.inspection.rows_about(me, info.external_id)["recall_entries"] == 0
    assert texts(store.recall.search(other, "perro")) == ["Mi perro se llama Rex"]


def test_sqlite_merges_the_index_on_forget_only_for_a_learner_who_is_in_it(store: Store) -> None:
    """The merge that leaves no erased word in the file rewrites the whole index (half a
    second at a million entries): a learner with nothing folded yet costs none."""
    engine = store.recall.engine
    if engine.dialect.name != "sqlite":
        pytest.skip("the FTS5 merge is SQLite's")
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    fresh, indexed = learner(store), learner(store)
    said = say(store, indexed, "Mi perro se llama Bruno")
    fold_upto(store, indexed, said[-1])
    event.listen(engine, "before_cursor_execute", seen)
    try:
        store.learners.forget(fresh)
        merged_for_fresh = any("optimize" in s for s in statements)
        store.learners.forget(indexed)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert not merged_for_fresh
    assert any("optimize" in s for s in statements)


def test_a_new_target_language_reindexes_what_was_folded(store: Store) -> None:
    """Entries are indexed with the stems (SQLite) or the configuration (Postgres) of the
    learner's language: set a language later, and what was folded before is found by it."""
    me = learner(store, language=None)
    said = say(store, me, "Mis perros corren mucho en la playa")
    fold_upto(store, me, said[-1])
    assert store.recall.search(me, "perro") == []  # no stemmer: words only

    store.learners.update_settings(me, target_language="Spanish")

    assert texts(store.recall.search(me, "perro")) == ["Mis perros corren mucho en la playa"]
    assert entries(store, me) == 1
    store.learners.update_settings(me, target_language="Spanish", level="A2")  # no change
    assert entries(store, me) == 1


def test_language_names_map_to_stemmers_and_configurations() -> None:
    assert [snowball_language(n) for n in ("Spanish", "spanish", "es", "español", "pt-BR")] == [
        "spanish",
        "spanish",
        "spanish",
        "spanish",
        "portuguese",
    ]
    assert snowball_language("Klingon") is None and snowball_language(None) is None
    assert snowball_language("") is None and snowball_language("x" * 500) is None
    assert pg_config("German") == "german" and pg_config("Polish") == "simple"
    assert pg_config("de") == "german" and pg_config(None) == "simple"


def test_a_later_update_that_no_longer_shares_the_questions_words_still_ranks_first(
    store: Store,
) -> None:
    """The update says the new country, not "viaje" or "abril": it is found as what most
    resembles the learner's best match, said later, and matching the question too."""
    me = learner(store)
    # Weeks of other talk first: bm25 weighs a word by how few of the entries have it.
    say(store, me, *(f"Hoy el día {n} fue tranquilo en el trabajo" for n in range(12)))
    ids = say(
        store,
        me,
        "En abril voy a viajar a Japón con mi hermana Clara",
        "Mi hermana Clara tiene un hijo que se llama Leo",
        "Hoy hace mucho calor",
        "Al final no voy a Japón, voy a Corea del Sur con Clara",
    )
    fold_upto(store, me, ids[-1])

    found = texts(store.recall.search(me, "¿A qué país me voy de viaje en abril?"))

    assert found[:2] == [
        "Al final no voy a Japón, voy a Corea del Sur con Clara",
        "En abril voy a viajar a Japón con mi hermana Clara",
    ]


def test_a_later_mention_of_one_word_is_no_update(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Mi perro Bruno es un labrador", "Hoy vi un perro en el parque")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "labrador Bruno"))[0] == "Mi perro Bruno es un labrador"


def test_names_are_asked_with_nombre_and_pets_with_diminutives(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Tengo una perra que se llama Luna", "Mañana trabajo temprano")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "¿Te acuerdas del nombre de mi perrita?")) == [
        "Tengo una perra que se llama Luna"
    ]


def test_the_learners_own_statement_outranks_pams_echo_of_it(store: Store) -> None:
    me = learner(store)
    ids = say(store, me, "Mi restaurante favorito se llama Inti")
    ids += say(store, me, "¡Inti! Qué buen restaurante, me encanta", role=PAM)
    fold_upto(store, me, ids[-1])
    found = store.recall.search(me, "¿Cuál es mi restaurante favorito?")
    assert next((s.role, s.text) for s in found) == (
        LEARNER,
        "Mi restaurante favorito se llama Inti",
    )


def test_postgres_without_unaccent_still_searches_keeping_accents(store: Store) -> None:
    """Where `unaccent` cannot be created, the statements leave accents alone: words match
    as written, and nothing fails."""
    if store.recall.engine.dialect.name != "postgresql":
        pytest.skip("unaccent is Postgres'")
    plain_backend = store.recall.backend
    plain_backend._recall_sql = (*_recall_statements(""), {})  # type: ignore[attr-defined]
    store.memory.backend = plain_backend
    me = learner(store)
    ids = say(store, me, "Me gusta el café de Bogotá")
    fold_upto(store, me, ids[-1])
    assert texts(store.recall.search(me, "café")) == ["Me gusta el café de Bogotá"]
    assert texts(store.recall.search(me, "bogotá")) == ["Me gusta el café de Bogotá"]


def test_postgres_a_fold_committing_while_forget_waits_leaves_no_entry(store: Store) -> None:
    """/forget deletes the entries it sees, then waits on the summary row a fold holds; the
    fold commits entries /forget's own DELETE could not see, and the cascade from the
    learner's row (which that DELETE takes afresh) removes them."""
    engine = store.recall.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time: a fold and /forget never interleave")
    me = learner(store)
    ids = say(store, me, "Mi contraseña secreta es Zafiro")
    fold = engine.connect()
    transaction = fold.begin()
    fold.execute(
        update(Summary).where(Summary.learner_id == me).values(watermark=ids[-1], version=1)
    )
    assert index_folded(fold, store.memory.backend, me, 0, ids[-1]) == 1
    holder = fold.execute(text("SELECT txid_current()")).scalar_one()
    forgetting = threading.Thread(target=store.learners.forget, args=(me,), daemon=True)
    forgetting.start()
    with engine.connect() as watcher:  # until /forget waits on the fold's row lock
        for _ in range(2000):
            waiting = watcher.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted "
                    "AND locktype = 'transactionid' AND transactionid::text = :holder"
                ),
                {"holder": str(holder)},
            ).scalar_one()
            if waiting:
                break
            forgetting.join(0.01)
        assert waiting, "/forget never waited on the fold"
    transaction.commit()
    fold.close()
    forgetting.join(20)
    assert not forgetting.is_alive()
    assert entries(store, me) == 0


def test_query_words_are_letters_and_digits_without_stopwords_and_capped() -> None:
    assert query_words("¿Dónde VIVES ahora, Tom? 2024!") == ["vives", "ahora", "tom", "2024"]
    assert query_words("el la the der le il o a") == []
    assert len(query_words(" ".join(f"palabra{n}" for n in range(100)))) == MAX_QUERY_WORDS
    # A name is asked with the noun and said with the verb; a diminutive brings its base.
    assert query_words("nombre de mi perrita", "Spanish") == [
        "nombre",
        "llama",
        "llamo",
        "llamaba",
        "perrita",
        "perra",
    ]
    assert "perra" not in query_words("perrita", "German")


def test_sqlite_terms_belong_to_one_learner() -> None:
    assert learner_terms(7, ["perros", "café"], "spanish") == ["7xperr", "7xcaf"]
    assert learner_terms(7, ["perros"], None) == ["7xperros"]
    # Learner 12's "3abc" and learner 123's "abc" can never be the same term.
    assert learner_terms(12, ["3abc"], None) != learner_terms(123, ["abc"], None)


def test_postgres_search_reads_only_its_own_learners_entries_of_a_word(store: Store) -> None:
    """Recall's GIN index holds the learner with each word (migration 0019): a learner's
    search for a word others said thousands of times reads only the learner's few entries of
    it, not everyone's (as EXPLAIN ANALYZE counts the rows every scan returns or filters).
    Postgres takes that index for a learner with thousands of entries (bench recall_scale);
    for this test's few hundred it would read the table, or the learner's rows through the
    btree, so the test's own transaction turns both off."""
    engine = store.recall.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("the GIN index is Postgres'")
    me, others = learner(store), [learner(store) for _ in range(5)]
    backend = store.recall.backend
    said = datetime(2026, 1, 1, tzinfo=UTC)

    def entry(learner_id: int, number: int, text: str) -> dict[str, Any]:
        return {
            "learner_id": learner_id,
            "kind": MESSAGE,
            "role": LEARNER,
            "text": text,
            "said_at": said + timedelta(minutes=number),
            "source_id": number,
        }

    with engine.begin() as connection:
        rows = [entry(o, n, f"Mi perro come mucho, día {n}") for o in others for n in range(400)]
        rows += [entry(me, n, f"Hoy fui al mercado, día {n}") for n in range(400)]
        rows += [entry(me, 400 + n, f"Mi perro se llama Bruno {n}") for n in range(3)]
        backend.index_recall(connection, rows, "Spanish")
    with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
        connection.exec_driver_sql("ANALYZE recall_entries")

    with engine.connect() as connection:
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        connection.exec_driver_sql("DROP INDEX ix_recall_entries_learner_id_said_at")
        _, search, accents = backend._recall(connection)  # type: ignore[attr-defined]
        values = {
            "learner_id": me,
            "operands": ["'perro'"],
            "config": pg_config("Spanish"),
            "limit": 30,
            **accents,
        }
        explained = connection.execute(
            text("EXPLAIN (ANALYZE, FORMAT JSON) " + search.element.text), values
        ).scalar()
        assert len(connection.execute(search, values).all()) == 3

    plan = explained_plan(explained)
    assert rows_visited(plan, "recall_entries") < 50, json.dumps(plan, indent=1)
