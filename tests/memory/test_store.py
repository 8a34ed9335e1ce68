"""The message store on a real database: learners, messages, context, corrections, usage, forget."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, Select, delete, func, literal, select, union_all

from memory.clock import ManualClock, utcnow
from memory.database import db
from memory.database.backends import backend_for
from memory.database.models import Learner, Profile, Summary
from memory.database.models_review import ReviewItem
from memory.database.records import (
    LEARNER,
    LEARNER_TABLES,
    PAM,
    Activity,
    ActivityWindow,
    CorrectionRecord,
    LearnerGone,
    ReplyRecord,
    ReviewReport,
    SavedReply,
    StoredMessage,
)
from memory.database.schema import metadata
from memory.database.statements import named, named_all
from memory.jobs.coordinator import FOLD, Coordinator
from memory.review.reads import Exercise
from memory.store.message_store import Store
from tests.conftest import unique_user, unread_by_profile


def _converse(store: Store, learner_id: int, turns: int, tokens: int = 10) -> list[int]:
    """Store `turns` learner/Pam exchanges; the ids of the stored messages, in order."""
    ids = []
    for n in range(turns):
        ids.append(
            store.conversation.add_message(learner_id, LEARNER, f"learner says {n}", tokens).id
        )
        ids.append(store.conversation.add_message(learner_id, PAM, f"pam answers {n}", tokens).id)
    return ids


def _save_reply(
    engine: Engine,
    learner_id: int,
    reply_to: int,
    content: str,
    tokens: int,
    corrections: tuple[CorrectionRecord, ...],
    usage: tuple[str, int, int],
    backlog_limit: int,
) -> SavedReply:
    """The backend's own write of a reply (no claim to finish): the stored reply and the
    backlog as of it."""
    reply = ReplyRecord(learner_id, reply_to, content, tokens, corrections, usage)
    return backend_for(engine).save_reply(reply, backlog_limit, utcnow())


def _inbox_id() -> int:
    """An inbox id no other test uses (message inbox ids are unique across learners)."""
    return uuid.uuid4().int % 2**62


def _fill_every_table(store: Store, learner_id: int) -> None:
    """Give the learner at least one row in every table that holds something about them."""
    ids = _converse(store, learner_id, 6)
    store.ledger.add_corrections(
        learner_id, ids[0], [CorrectionRecord("yo es", "yo soy", "ser", "verb")]
    )
    store.ledger.record_usage(learner_id, "gpt-4o-mini", "reply", 100, 20)
    summary = store.memory.summary(learner_id)
    assert store.memory.save_summary(learner_id, summary.version, "They like chess.", 4, ids[1])
    profile = store.memory.profile(learner_id)
    assert store.memory.save_profile(learner_id, profile.version, {"who": "Lena"}, ids[0], 1)
    assert Coordinator(store.learners.engine, 300).mark(learner_id, FOLD)
    store.reviews.record_turn(
        learner_id, ids[0], [CorrectionRecord("yo es", "yo soy", "ser", "verb", "ser for identity")]
    )
    with store.inspection.sessions.begin() as session:
        item_id = session.scalars(
            select(ReviewItem.id).where(ReviewItem.learner_id == learner_id)
        ).one()
    store.reviews.start_session(learner_id, Exercise(item_id, "fix", "yo es", "yo soy"), [])
    store.charts.save(learner_id, b"\x89PNG", "This week: ...")
    store.voice_clips.save(learner_id, b"OggS", "audio/ogg")
    # A reply whose grades wait for the review job (review_pending).
    asked = store.conversation.add_message(learner_id, LEARNER, "tengo un buen amigo", 5)
    reply = ReplyRecord(
        learner_id, asked.id, "¡Bien!", 2, (), ("m", 1, 1), ReviewReport((item_id,), (), (item_id,))
    )
    backend_for(store.learners.engine).save_reply(reply, 10, utcnow())
    # A learner who said /checkins on, with tomorrow's check-in planned.
    store.checkins.set_preference(learner_id, True)
    tomorrow = utcnow() + timedelta(days=1)
    assert store.checkins.schedule(learner_id, tomorrow.date().isoformat(), tomorrow)


# -- learners -----------------------------------------------------------------------------


def test_learner_is_created_once_and_found_again(store: Store) -> None:
    user = unique_user()
    assert store.learners.find_learner(user) is None
    first = store.learners.learner(user, "Lena")
    again = store.learners.learner(user, "Someone Else")
    assert again == first
    assert first.external_id == user
    assert first.display_name == "Lena"
    assert store.learners.find_learner(user) == first
    assert store.learners.get_learner(first.id) == first
    # A new learner starts with an empty summary and profile.
    assert store.memory.summary(first.id).watermark == 0
    assert store.memory.summary(first.id).text == ""
    assert store.memory.profile(first.id).data == {}
    assert store.memory.profile(first.id).watermark == 0


def test_concurrent_creation_from_threads_yields_one_learner(store: Store) -> None:
    user = unique_user("race")
    start = threading.Barrier(8)

    def create() -> int:
        start.wait()
        return store.learners.learner(user).id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(lambda _: create(), range(8)))
    assert len(set(ids)) == 1
    with store.inspection.sessions() as session:
        count = session.scalar(
            select(func.count()).select_from(Learner).where(Learner.external_id == user)
        )
    assert count == 1
    # ...and exactly one summary and one profile row came with it.
    counts = store.inspection.rows_about(ids[0], user)
    assert counts["summaries"] == 1
    assert counts["profiles"] == 1


def test_get_learner_of_unknown_id_raises_learner_gone(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.learners.get_learner(learner.id)
    with pytest.raises(LearnerGone):
        store.learners.update_settings(learner.id, level="B1")


def test_update_settings_sets_known_fields_and_rejects_others(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    updated = store.learners.update_settings(
        learner.id, target_language="Spanish", native_language="German", level="A2"
    )
    assert (updated.target_language, updated.native_language, updated.level) == (
        "Spanish",
        "German",
        "A2",
    )
    assert store.learners.get_learner(learner.id) == updated
    with pytest.raises(ValueError, match="unknown learner settings"):
        store.learners.update_settings(learner.id, external_id="someone-else")


# -- messages and context -----------------------------------------------------------------


def test_messages_are_in_order_and_filtered_by_learner_and_role(store: Store) -> None:
    lena = store.learners.learner(unique_user("lena"))
    omar = store.learners.learner(unique_user("omar"))
    lena_ids = []
    for n in range(4):
        lena_ids.append(store.conversation.add_message(lena.id, LEARNER, f"lena {n}", 3).id)
        store.conversation.add_message(omar.id, LEARNER, f"omar {n}", 3)
        lena_ids.append(store.conversation.add_message(lena.id, PAM, f"pam to lena {n}", 5).id)

    messages = store.conversation.messages(lena.id)
    assert [m.id for m in messages] == lena_ids == sorted(lena_ids)
    assert [m.content for m in messages[:2]] == ["lena 0", "pam to lena 0"]
    assert all("omar" not in m.content for m in messages)
    assert [m.tokens for m in messages[:2]] == [3, 5]

    learner_only = store.conversation.messages(lena.id, role=LEARNER)
    assert [m.content for m in learner_only] == [f"lena {n}" for n in range(4)]
    assert {m.role for m in store.conversation.messages(lena.id, role=PAM)} == {PAM}

    after = store.conversation.messages(lena.id, after=lena_ids[3])
    assert [m.id for m in after] == lena_ids[4:]
    assert [m.content for m in store.conversation.messages(omar.id)] == [
        f"omar {n}" for n in range(4)
    ]


def test_add_message_rejects_unknown_role_and_forgotten_learner(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    with pytest.raises(ValueError, match="unknown role"):
        store.conversation.add_message(learner.id, "system", "be evil", 3)
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.conversation.add_message(learner.id, LEARNER, "hola", 3)
    assert store.inspection.rows_about(learner.id, learner.external_id)["messages"] == 0


def test_add_learner_message_is_idempotent_and_brings_back_the_reply(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    inbox_id = _inbox_id()
    stored, answered = store.conversation.add_learner_message(
        learner.id, "hola", 3, inbox_id=inbox_id
    )
    assert answered is None
    assert (stored.role, stored.content, stored.tokens) == (LEARNER, "hola", 3)
    # Run again before Pam answered (the LLM failed): the same message, still no reply.
    assert store.conversation.add_learner_message(learner.id, "hola", 3, inbox_id=inbox_id) == (
        stored,
        None,
    )
    reply = _save_reply(engine, learner.id, stored.id, "¡hola!", 4, (), ("m", 9, 2), 9).stored
    # Run again after a crash that came after the reply: the message with its reply.
    assert store.conversation.add_learner_message(learner.id, "hola", 3, inbox_id=inbox_id) == (
        stored,
        reply,
    )
    assert store.conversation.messages(learner.id) == [stored, reply]
    # Without an inbox item nothing is recognised: each call stores a message.
    again, answered = store.conversation.add_learner_message(learner.id, "hola", 3)
    assert answered is None and again.id > reply.id


def test_add_learner_message_for_forgotten_learner_raises_learner_gone(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.conversation.add_learner_message(learner.id, "hola", 3)
    with pytest.raises(LearnerGone):
        store.conversation.add_learner_message(learner.id, "hola", 3, inbox_id=_inbox_id())
    assert store.inspection.rows_about(learner.id, learner.external_id)["messages"] == 0


def test_save_reply_stores_everything_and_reads_the_backlog_as_of_the_reply(
    store: Store, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    _converse(store, learner.id, 2, tokens=5)
    question, _ = store.conversation.add_learner_message(learner.id, "yo es Lena", 6)
    fix = CorrectionRecord("yo es", "yo soy", "ser", "grammar")
    reply, backlog, finished, _ = _save_reply(
        engine, learner.id, question.id, "¡Hola, Lena!", 7, (fix,), ("m", 30, 8), 2
    )
    assert finished is None  # no inbox claim to finish
    assert store.conversation.messages(learner.id)[-2:] == [question, reply]
    assert store.ledger.corrections(learner.id) == [fix]
    assert store.ledger.usage(learner.id) == {"reply": (1, 30, 8)}
    assert backlog == (6, 4 * 5 + 6 + 7, ["learner says 1", "yo es Lena"])
    assert backlog == store.conversation.memory_backlog(learner.id, limit=2)


def test_context_holds_summary_and_every_unfolded_message(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    other = store.learners.learner(unique_user("other"))
    ids = _converse(store, learner.id, 15, tokens=7)
    _converse(store, other.id, 3)
    summary = store.memory.summary(learner.id)
    assert store.memory.save_summary(learner.id, summary.version, "Lena plays chess.", 5, ids[11])

    context = store.conversation.context(learner.id)
    assert context.learner.id == learner.id
    assert context.summary.text == "Lena plays chess."
    assert context.summary.watermark == ids[11]
    assert context.summary.folds == 1
    assert [m.id for m in context.messages] == ids[12:]
    assert len(context.messages) == 18  # more than the window: nothing unfolded is dropped
    assert all(m.content.startswith(("learner says", "pam answers")) for m in context.messages)
    assert store.conversation.unfolded_tokens(learner.id) == (18, 18 * 7)


def test_context_of_forgotten_learner_raises(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.conversation.context(learner.id)


@pytest.mark.parametrize("gone", [Summary, Profile])
def test_context_without_a_summary_or_profile_row_raises(
    store: Store, gone: type[Summary] | type[Profile]
) -> None:
    """With messages or without: the read's first row (the learner's own) is missing, and the
    messages' rows alone make no context."""
    learner = store.learners.learner(unique_user())
    talker = store.learners.learner(unique_user("talker"))
    _converse(store, talker.id, 2)
    with store.memory.engine.begin() as connection:
        connection.execute(delete(gone).where(gone.learner_id.in_([learner.id, talker.id])))
    for someone in (learner, talker):
        with pytest.raises(LearnerGone):
            store.conversation.context(someone.id)


def test_memory_backlog_holds_only_learner_messages_the_profile_has_not_read(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    ids = _converse(store, learner.id, 6)
    assert unread_by_profile(store, learner.id) == 6
    profile = store.memory.profile(learner.id)
    assert store.memory.save_profile(learner.id, profile.version, None, ids[4], 3)
    assert unread_by_profile(store, learner.id) == 3


# -- summary and profile writes -----------------------------------------------------------


def test_summary_and_profile_writes_are_compare_and_set(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    ids = _converse(store, learner.id, 2)
    summary = store.memory.summary(learner.id)
    assert store.memory.save_summary(learner.id, summary.version, "first", 1, ids[0])
    assert not store.memory.save_summary(learner.id, summary.version, "stale", 1, ids[1])
    assert store.memory.summary(learner.id).text == "first"
    assert store.memory.summary(learner.id).watermark == ids[0]
    assert store.memory.summary(learner.id).version == summary.version + 1

    profile = store.memory.profile(learner.id)
    assert store.memory.save_profile(learner.id, profile.version, {"who": "Lena"}, ids[0], 1)
    assert not store.memory.save_profile(learner.id, profile.version, {"who": "stale"}, ids[2], 1)
    now = store.memory.profile(learner.id)
    assert (now.data, now.watermark, now.messages_processed) == ({"who": "Lena"}, ids[0], 1)
    # data=None only moves the watermark.
    assert store.memory.save_profile(learner.id, now.version, None, ids[2], 1)
    later = store.memory.profile(learner.id)
    assert (later.data, later.watermark, later.messages_processed) == ({"who": "Lena"}, ids[2], 2)


# -- corrections and usage ----------------------------------------------------------------


def test_corrections_are_stored_per_learner_newest_last(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    other = store.learners.learner(unique_user("other"))
    message = store.conversation.add_message(learner.id, LEARNER, "yo es Lena", 5)
    store.ledger.add_corrections(learner.id, message.id, [])  # nothing to store is fine
    store.ledger.add_corrections(
        learner.id,
        message.id,
        [
            CorrectionRecord("yo es", "yo soy", "'ser' conjugates to 'soy'", "grammar"),
            CorrectionRecord("la problema", "el problema", "masculine", "gender"),
        ],
    )
    store.ledger.add_corrections(learner.id, None, [CorrectionRecord("a", "b")])
    store.ledger.add_corrections(other.id, None, [CorrectionRecord("x", "y")])

    corrections = store.ledger.corrections(learner.id)
    assert corrections == [
        CorrectionRecord("yo es", "yo soy", "'ser' conjugates to 'soy'", "grammar"),
        CorrectionRecord("la problema", "el problema", "masculine", "gender"),
        CorrectionRecord("a", "b", "", "other"),
    ]
    assert store.ledger.corrections(learner.id, limit=2) == corrections[1:]
    assert store.ledger.corrections(other.id) == [CorrectionRecord("x", "y")]


def test_add_corrections_for_forgotten_learner_raises_learner_gone(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.ledger.add_corrections(learner.id, None, [CorrectionRecord("a", "b")])


def test_usage_is_recorded_per_purpose(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    other = store.learners.learner(unique_user("other"))
    store.ledger.record_usage(learner.id, "gpt-4o-mini", "reply", 100, 20)
    store.ledger.record_usage(learner.id, "gpt-4o-mini", "reply", 50, 10)
    store.ledger.record_usage(learner.id, "small-model", "summary", 400, 80)
    store.ledger.record_usage(other.id, "gpt-4o-mini", "reply", 7, 7)
    assert store.ledger.usage(learner.id) == {"reply": (2, 150, 30), "summary": (1, 400, 80)}
    assert store.ledger.usage(other.id) == {"reply": (1, 7, 7)}


def test_activity_counts_recent_learner_messages_and_todays_tokens(engine: Engine) -> None:
    # Rows stamped a century ahead: on Postgres the schema holds other tests' rows, some
    # stamped by clocks they moved days or years forward; none of them lies in these windows.
    clock = ManualClock(datetime.now(UTC) + timedelta(days=36500))
    store = Store(engine, clock)
    learner = store.learners.learner(unique_user())
    other = store.learners.learner(unique_user("other"))
    _converse(store, learner.id, 3)  # three learner messages, three of Pam's
    store.ledger.record_usage(learner.id, "m", "reply", 100, 20)
    store.ledger.record_usage(learner.id, "m", "summary", 30, 5)
    store.ledger.record_usage(other.id, "m", "reply", 7, 7)
    now = clock.now
    minute_ago, today = now - timedelta(minutes=1), now - timedelta(hours=1)

    def activity(
        learner_id: int, since_messages: datetime, since_tokens: datetime, all_: bool
    ) -> Activity | None:
        window = ActivityWindow(since_messages, since_tokens, all_)
        return store.conversation.context_and_activity(learner_id, window)[1]

    messages, mine, everyone = activity(learner.id, minute_ago, today, True)
    assert (messages, mine) == (3, 155)
    assert everyone is not None and everyone >= 155 + 14  # Postgres holds other tests' usage
    assert activity(learner.id, minute_ago, today, False) == (3, 155, None)
    later = now + timedelta(minutes=1)
    assert activity(learner.id, later, later, True) == (0, 0, 0)
    assert activity(other.id, minute_ago, today, False) == (0, 14, None)


def test_record_usage_for_forgotten_learner_writes_nothing(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    store.ledger.record_usage(learner.id, "gpt-4o-mini", "summary", 100, 20)  # does not raise
    assert store.ledger.usage(learner.id) == {}
    assert store.inspection.rows_about(learner.id, learner.external_id)["llm_usage"] == 0


# -- forget -------------------------------------------------------------------------------


def test_forget_leaves_zero_rows_in_every_table(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    bystander = store.learners.learner(unique_user("bystander"))
    _fill_every_table(store, learner.id)
    _fill_every_table(store, bystander.id)

    before = store.inspection.rows_about(learner.id, learner.external_id)
    about = {m.__tablename__ for m in LEARNER_TABLES} | {"learners"}
    assert about <= set(before)
    assert all(before[table] > 0 for table in about), before

    store.learners.forget(learner.id)

    assert store.inspection.rows_about(learner.id, learner.external_id) == dict.fromkeys(before, 0)
    assert store.learners.find_learner(learner.external_id) is None
    # The other learner keeps everything.
    assert store.inspection.rows_about(bystander.id, bystander.external_id) == before


def test_forget_covers_every_table_with_a_learner_id() -> None:
    """rows_about and forget walk LEARNER_TABLES: a new table about learners must be listed."""
    with_learner_id = {
        table.name
        for table in metadata.sorted_tables
        if "learner_id" in table.columns and table.name != "learners"
    }
    assert with_learner_id == {m.__tablename__ for m in LEARNER_TABLES}


def test_a_new_learner_after_forget_gets_a_new_id(store: Store) -> None:
    user = unique_user()
    old = store.learners.learner(user)
    old_messages = _converse(store, old.id, 2)
    store.learners.forget(old.id)  # the newest learner and messages: SQLite would reuse their ids
    new = store.learners.learner(user)
    assert new.id > old.id
    new_message = store.conversation.add_message(new.id, LEARNER, "hola otra vez", 3)
    assert new_message.id > max(old_messages)
    assert store.conversation.messages(new.id) == [new_message]
    assert store.memory.summary(new.id).watermark == 0
    assert store.memory.profile(new.id).data == {}


def test_ids_are_never_reused_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    """On a blank SQLite file the forgotten learner holds the highest ids: still never reused."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'ids.db'}")
    try:
        db.upgrade(engine)
        store = Store(engine)
        old = store.learners.learner("solo")
        message = store.conversation.add_message(old.id, LEARNER, "hola", 2)
        store.ledger.add_corrections(old.id, message.id, [CorrectionRecord("a", "b")])
        store.learners.forget(old.id)
        new = store.learners.learner("solo")
        again = store.conversation.add_message(new.id, LEARNER, "hola", 2)
        assert (old.id, message.id) == (1, 1)
        assert new.id == 2
        assert again.id == 2
    finally:
        engine.dispose()


def test_forgotten_text_is_not_left_in_the_sqlite_files(tmp_path: Path) -> None:
    """secure_delete plus a WAL checkpoint: the erased words are in no byte of the database."""
    path = tmp_path / "secure.db"
    engine = db.make_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    store = Store(engine)
    learner = store.learners.learner("test:secret-keeper")
    store.learners.update_settings(learner.id, target_language="English")
    marker = "ZEPHYR-QUARTZ-9137 is my secret"
    ids = [
        store.conversation.add_message(learner.id, LEARNER, f"{marker} number {n}", 9).id
        for n in range(50)
    ]
    store.ledger.add_corrections(learner.id, None, [CorrectionRecord(marker, "fixed")])
    store.ledger.add_corrections(learner.id, ids[0], [CorrectionRecord("XYLOPHONIC", "fixed")])
    # Folded, so the recall index (its rows, the FTS5 index of their words and stems) has them.
    assert store.memory.save_summary(learner.id, 0, "s", 1, ids[-1], previous_watermark=0)
    # Another learner's entries share the FTS5 index's segments with the forgotten ones'.
    other = store.learners.learner("test:bystander")
    said = store.conversation.add_message(other.id, LEARNER, "my bicycle is blue", 5)
    assert store.memory.save_summary(other.id, 0, "s", 1, said.id, previous_watermark=0)
    written = path.read_bytes() + _wal(path)
    assert marker.encode() in written  # it really was written
    for token in (b"zephyr", b"quartz", b"xylophon"):  # the index's lowercased words and stems
        assert token in written, token

    store.learners.forget(learner.id)

    leftovers = (path.read_bytes() + _wal(path)).lower()
    for erased in (b"zephyr", b"quartz", b"xylophon"):
        assert erased not in leftovers, erased
    assert [s.text for s in store.recall.search(other.id, "bicycle")] == ["my bicycle is blue"]
    engine.dispose()


def _wal(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


@pytest.mark.parametrize("everyone", [False, True])
def test_begin_turn_stores_the_message_and_reads_what_a_later_read_would(
    store: Store, everyone: bool
) -> None:
    """On Postgres one statement inserts and reads from a snapshot without the new message:
    what it returns must equal the plain reads made afterwards."""
    learner = store.learners.learner(unique_user())
    store.ledger.record_usage(learner.id, "m", "reply", 100, 20)
    _converse(store, learner.id, 3)
    store.memory.save_summary(
        learner.id, 0, "Lena, a nurse", 5, watermark=_converse(store, learner.id, 1)[0]
    )
    store.memory.save_profile(learner.id, 0, {"who": "Lena"}, watermark=0, processed=0)
    now = datetime.now(UTC)
    window = ActivityWindow(now - timedelta(minutes=1), now - timedelta(hours=1), everyone)
    inbox_id = _inbox_id()

    stored, answered, context, activity = store.conversation.begin_turn(
        learner.id, "Ayer fui al cine", 7, inbox_id=inbox_id, window=window
    )

    assert answered is None and context is not None
    assert (stored.role, stored.content, stored.tokens) == (LEARNER, "Ayer fui al cine", 7)
    assert context == store.conversation.context(learner.id)
    assert context.messages[-1] == stored
    assert context.profile.data == {"who": "Lena"} and context.summary.text == "Lena, a nurse"
    assert activity == store.conversation.context_and_activity(learner.id, window)[1]
    assert activity is not None and activity.messages == 5 and activity.tokens == 120


def test_begin_turn_run_again_returns_the_stored_message_and_its_reply(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    inbox_id = _inbox_id()
    first = store.conversation.begin_turn(learner.id, "Hola", 2, inbox_id=inbox_id, window=None)
    again = store.conversation.begin_turn(learner.id, "Hola", 2, inbox_id=inbox_id, window=None)
    assert again.stored == first.stored and again.answered is None
    assert again.context == first.context  # crashed before the reply: the turn goes on

    reply = store.conversation.add_message(learner.id, PAM, "¡Hola!", 3, reply_to=first.stored.id)
    answered = store.conversation.begin_turn(learner.id, "Hola", 2, inbox_id=inbox_id, window=None)
    assert (answered.stored, answered.answered, answered.context) == (first.stored, reply, None)


def test_begin_turn_for_a_forgotten_learner_raises_learner_gone(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    store.learners.forget(learner.id)
    with pytest.raises(LearnerGone):
        store.conversation.begin_turn(learner.id, "Hola", 2, inbox_id=_inbox_id(), window=None)


def test_rows_of_one_result_decode_as_each_row_alone_would(engine: Engine) -> None:
    """`named_all` looks at a result's columns once for all its rows: each record is the one
    `named` makes of its row, and a field without a column keeps its default."""

    def said(message_id: int, text: str) -> Select[Any]:
        return select(
            literal(1).label("learner_id"),
            literal(message_id).label("message_id"),
            literal("learner").label("message_role"),
            literal(text).label("message_content"),
            literal(3).label("message_tokens"),
        )

    with engine.connect() as connection:
        rows = connection.execute(union_all(said(7, "Hola"), said(8, "¿Qué tal?"))).all()
    decoded = named_all(rows, "message", StoredMessage)
    assert decoded == [named(row, "message", StoredMessage) for row in rows]
    assert sorted(decoded, key=lambda m: m.id) == [
        StoredMessage(7, "learner", "Hola", 3),
        StoredMessage(8, "learner", "¿Qué tal?", 3),
    ]
    assert all(m.said_at is None and m.spoken_seconds is None for m in decoded)
    assert named_all([], "message", StoredMessage) == []
