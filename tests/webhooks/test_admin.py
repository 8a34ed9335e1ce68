"""Operator memory inspection: GET /admin/learners/<id>/memory, GET …/recall?q= and POST
…/forget."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, text

from bot.worker.runtime import Pam
from memory.database import db
from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store
from memory.store.scrubs import Outcome
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.support import handle
from webhooks.app import create_app
from webhooks.settings import Settings

ADMIN = "admin-token-3b9d"


def client_for(settings: Settings, engine: Engine, token: str | None = ADMIN) -> FlaskClient:
    app = create_app(settings.replace(web={"admin_token": token}), engine=engine)
    return app.test_client()


def bearer(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def fold_all(store: Store, learner_id: int) -> None:
    """Fold everything the learner has said so far (a summary whose watermark covers it),
    which is what puts it in the recall index."""
    last = store.conversation.messages(learner_id)[-1].id
    summary = store.memory.summary(learner_id)
    assert store.memory.save_summary(learner_id, summary.version, "Lena.", 2, last)


def said(store: Store, external_id: str, *exchanges: tuple[str, str]) -> int:
    """A learner who said, and was answered, `exchanges`; their id."""
    learner = store.learners.learner(external_id)
    store.learners.update_settings(learner.id, target_language="Spanish")
    for learners, pams in exchanges:
        store.conversation.add_message(learner.id, LEARNER, learners, 10)
        store.conversation.add_message(learner.id, PAM, pams, 10)
    return learner.id


def test_disabled_without_a_token(pam: Pam, settings: Settings, engine: Engine) -> None:
    learner = pam.store.learners.learner(unique_user())
    client = client_for(settings, engine, token=None)
    assert client.get(f"/admin/learners/{learner.id}/memory", headers=bearer()).status_code == 404
    recall = client.get(f"/admin/learners/{learner.id}/recall?q=Luna", headers=bearer())
    assert recall.status_code == 404
    assert client.post(f"/admin/learners/{learner.id}/forget", headers=bearer()).status_code == 404
    assert pam.store.learners.find_learner(learner.external_id) is not None


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {ADMIN}x"},
        {"Authorization": f"Basic {ADMIN}"},
        {"Authorization": ADMIN},
        {"Authorization": f"Bearer {ADMIN.upper()}"},
    ],
)
def test_never_reachable_without_the_token(
    pam: Pam, settings: Settings, engine: Engine, headers: dict[str, str]
) -> None:
    learner = pam.store.learners.learner(unique_user())
    handle(pam, learner.external_id, "Hola, me llamo Lena")
    fold_all(pam.store, learner.id)
    client = client_for(settings, engine)
    memory = client.get(f"/admin/learners/{learner.id}/memory", headers=headers)
    recall = client.get(f"/admin/learners/{learner.id}/recall?q=Lena", headers=headers)
    forget = client.post(f"/admin/learners/{learner.id}/forget", headers=headers)
    assert (memory.status_code, recall.status_code, forget.status_code) == (401, 401, 401)
    assert "Lena" not in memory.get_data(as_text=True)
    assert "Lena" not in recall.get_data(as_text=True)
    assert pam.store.learners.find_learner(learner.external_id) is not None


def test_memory_shows_window_summary_profile_corrections_usage_and_jobs(
    pam: Pam, settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    user = unique_user()
    fake_model.queue(
        "reply",
        reply_json(
            "¡Hola Lena!",
            [
                {
                    "original": "yo es",
                    "corrected": "yo soy",
                    "explanation": "ser",
                    "category": "conjugation",
                }
            ],
        ),
    )
    fake_model.queue("profile", json.dumps({"who": "Lena, mensaje"}))  # the learner's words
    for n in range(5):
        handle(pam, user, f"yo es Lena, mensaje {n}")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None

    response = client_for(settings, engine).get(
        f"/admin/learners/{learner.id}/memory", headers=bearer()
    )

    assert response.status_code == 200
    body = response.get_json()
    assert body["learner"]["external_id"] == user
    assert [m["content"] for m in body["window"] if m["role"] == "learner"] == [
        f"yo es Lena, mensaje {n}" for n in range(5)
    ]
    assert body["summary"]["folds"] == 0
    assert body["profile"]["who"] == "Lena, mensaje"
    assert body["profile"]["_meta"]["messages_processed"] == 5
    assert body["corrections"][0] == {
        "original": "yo es",
        "corrected": "yo soy",
        "explanation": "ser",
        "category": "conjugation",
    }
    assert body["usage"]["reply"]["calls"] == 5
    assert body["usage"]["profile"]["calls"] == 1
    # The profile job, and the review job that graded the corrected message.
    assert [job["kind"] for job in body["jobs"]] == ["profile", "review"]
    assert not any(job["running"] for job in body["jobs"])


def test_memory_shows_audio_usage_and_spoken_messages(
    pam: Pam, settings: Settings, engine: Engine
) -> None:
    learner_id = said(pam.store, unique_user(), ("hola", "¡hola!"))
    pam.store.conversation.add_learner_message(
        learner_id, "Ayer fui al cine", 5, spoken_seconds=4.2
    )
    pam.store.ledger.record_audio(
        learner_id, "gpt-4o-mini-transcribe", "transcription", 1050, seconds=4.2
    )
    pam.store.ledger.record_audio(
        learner_id, "gpt-4o-mini-transcribe", "transcription", 500, seconds=2.0
    )
    pam.store.ledger.record_audio(learner_id, "gpt-4o-mini-tts", "speech", 2400, chars=30)
    pam.store.learners.update_settings(learner_id, voice_replies=True, corrections="few")

    body = (
        client_for(settings, engine)
        .get(f"/admin/learners/{learner_id}/memory", headers=bearer())
        .get_json()
    )

    assert body["learner"]["voice_replies"] is True
    assert body["learner"]["corrections"] == "few"
    assert body["window"][-1]["spoken_seconds"] == pytest.approx(4.2)
    assert "spoken_seconds" not in body["window"][0]
    assert body["usage"]["transcription"] == {
        "calls": 2,
        "input_tokens": 1550,
        "output_tokens": 0,
        "audio_seconds": 6.2,
        "speech_chars": 0,
    }
    assert body["usage"]["speech"] == {
        "calls": 1,
        "input_tokens": 2400,
        "output_tokens": 0,
        "audio_seconds": 0.0,
        "speech_chars": 30,
    }


def test_unknown_learner_is_404(settings: Settings, engine: Engine) -> None:
    client = client_for(settings, engine)
    assert client.get("/admin/learners/999999999/memory", headers=bearer()).status_code == 404
    assert client.post("/admin/learners/999999999/forget", headers=bearer()).status_code == 404


def test_forget_erases_every_row_about_the_learner(
    pam: Pam, settings: Settings, engine: Engine
) -> None:
    user = unique_user()
    bystander = unique_user("bystander")
    for who in (user, bystander):
        for n in range(6):
            handle(pam, who, f"mensaje {n}")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None

    response = client_for(settings, engine).post(
        f"/admin/learners/{learner.id}/forget", headers=bearer()
    )

    assert response.status_code == 200
    counts = pam.store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0)
    assert pam.store.learners.find_learner(bystander) is not None


LUNA = ("Tengo una perra que se llama Luna y vivo en Madrid.", "¡Qué nombre tan bonito!")
TRIP = ("En abril voy a viajar a Japón con mi hermana.", "¡Qué emoción, Japón en abril!")


def test_recall_shows_what_a_recall_for_the_learner_would_return(
    store: Store, settings: Settings, engine: Engine
) -> None:
    learner = said(store, unique_user(), LUNA, TRIP)
    fold_all(store, learner)
    # Said after the fold: the prompt carries it, so recall does not.
    said_again = "Luna está dormida en el sofá ahora mismo."
    store.conversation.add_message(learner, LEARNER, said_again, 10)

    response = client_for(settings, engine).get(
        f"/admin/learners/{learner}/recall",
        query_string={"q": "¿Cómo se llama mi perra?"},
        headers=bearer(),
    )

    assert response.status_code == 200
    body = response.get_json()
    assert body["learner"] == learner and body["query"] == "¿Cómo se llama mi perra?"
    expected = store.recall.search(learner, "¿Cómo se llama mi perra?")
    assert body["snippets"] == [
        {
            "kind": s.kind,
            "role": s.role,
            "text": s.text,
            "said_at": s.said_at.isoformat(timespec="seconds"),
            "score": s.score,
        }
        for s in expected
    ]
    assert 1 <= len(body["snippets"]) <= 3
    assert body["snippets"][0]["text"] == LUNA[0] and body["snippets"][0]["role"] == "learner"
    assert said_again not in response.get_data(as_text=True)


def test_recall_never_shows_another_learners_rows(
    store: Store, settings: Settings, engine: Engine
) -> None:
    learner = said(store, unique_user(), TRIP)
    fold_all(store, learner)
    theirs = "Mi perra se llama Luna, como la tuya, y también vivo en Madrid."
    other = said(store, unique_user("other"), (theirs, "¡Qué casualidad!"))
    fold_all(store, other)
    client = client_for(settings, engine)

    mine = client.get(
        f"/admin/learners/{learner}/recall?q=perra Luna Madrid", headers=bearer()
    ).get_json()
    their = client.get(
        f"/admin/learners/{other}/recall?q=perra Luna Madrid", headers=bearer()
    ).get_json()

    assert mine["snippets"] == []
    assert their["snippets"][0]["text"] == theirs


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        (None, "q is required"),
        ("", "q is required"),
        ("   ", "q is required"),
        ("luna " * 100 + "x", "q is too long"),
    ],
)
def test_recall_without_a_usable_q_is_400(
    store: Store, settings: Settings, engine: Engine, query: str | None, detail: str
) -> None:
    learner = said(store, unique_user(), LUNA)
    fold_all(store, learner)
    params = {} if query is None else {"q": query}

    response = client_for(settings, engine).get(
        f"/admin/learners/{learner}/recall", query_string=params, headers=bearer()
    )

    assert response.status_code == 400
    assert response.get_json()["error"] == "Bad Request"
    assert response.get_json()["detail"].startswith(detail)


def test_recall_takes_a_q_of_the_longest_allowed_length(
    store: Store, settings: Settings, engine: Engine
) -> None:
    learner = said(store, unique_user(), LUNA)
    fold_all(store, learner)
    query = ("Luna " * 100)[:500]
    response = client_for(settings, engine).get(
        f"/admin/learners/{learner}/recall", query_string={"q": query}, headers=bearer()
    )
    assert response.status_code == 200
    assert response.get_json()["snippets"][0]["text"] == LUNA[0]


@pytest.mark.parametrize(
    "query",
    [
        '"Luna',
        "Luna OR *",
        "NEAR(Luna Madrid",
        "-Luna",
        "Luna' ; DROP TABLE messages; --",
        "Luna \x00 Madrid",
        "¿?¡!…",
        "🐶🐶🐶",
        "luna:* & !madrid | (",
    ],
)
def test_recall_answers_any_query_text_without_crashing(
    store: Store, settings: Settings, engine: Engine, query: str
) -> None:
    learner = said(store, unique_user(), LUNA)
    fold_all(store, learner)
    response = client_for(settings, engine).get(
        f"/admin/learners/{learner}/recall", query_string={"q": query}, headers=bearer()
    )
    assert response.status_code == 200
    assert isinstance(response.get_json()["snippets"], list)
    assert store.learners.get_learner(learner).id == learner  # and nothing was dropped


def test_recall_of_an_unknown_learner_is_404(settings: Settings, engine: Engine) -> None:
    response = client_for(settings, engine).get(
        "/admin/learners/999999999/recall?q=Luna", headers=bearer()
    )
    assert response.status_code == 404
    assert response.get_json()["detail"] == "no such learner"


def test_recall_logs_how_many_snippets_never_their_text(
    store: Store, settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    learner = said(store, unique_user(), LUNA)
    fold_all(store, learner)
    with caplog.at_level(logging.DEBUG):
        response = client_for(settings, engine).get(
            f"/admin/learners/{learner}/recall?q=perra Luna", headers=bearer()
        )
    assert response.status_code == 200
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"learner={learner}" in logged and "snippets=" in logged
    assert "Luna" not in logged and "perra" not in logged


def test_recall_finds_nothing_once_the_learner_is_forgotten(
    store: Store, settings: Settings, engine: Engine
) -> None:
    learner = said(store, unique_user(), LUNA)
    fold_all(store, learner)
    client = client_for(settings, engine)
    assert client.get(f"/admin/learners/{learner}/recall?q=Luna", headers=bearer()).get_json()[
        "snippets"
    ]
    assert client.post(f"/admin/learners/{learner}/forget", headers=bearer()).status_code == 200
    gone = client.get(f"/admin/learners/{learner}/recall?q=Luna", headers=bearer())
    assert gone.status_code == 404
    assert "Luna" not in gone.get_data(as_text=True)


@contextmanager
def held_snapshot(engine: Engine) -> Iterator[None]:
    """Another connection inside a read transaction, holding the snapshot it read."""
    path = db.sqlite_file(str(engine.url))
    if path is None:
        isolated = engine.execution_options(isolation_level="REPEATABLE READ")
        with isolated.connect() as reader:
            reader.execute(text("SELECT count(*) FROM learners")).scalar()
            yield
        return
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM learners").fetchone()
        yield
    finally:
        reader.close()


def test_forget_is_not_200_while_a_reader_keeps_the_bytes_in_the_files(
    store: Store, settings: Settings, engine: Engine
) -> None:
    """SQLite: another connection's read snapshot keeps the checkpoint that clears the
    files from completing, so the answer is 202 "pending" and /admin/scrubs shows the scrub
    until a later run completes it. Postgres deletes logically (docs/how/remembers.md says
    what VACUUM does): a reader changes nothing there."""
    learner = said(store, unique_user(), LUNA)
    client = client_for(settings, engine)
    with held_snapshot(engine):
        response = client.post(f"/admin/learners/{learner}/forget", headers=bearer())

        scrubs = client.get("/admin/scrubs", headers=bearer())
        assert scrubs.status_code == 200
        if engine.dialect.name == "postgresql":
            assert response.status_code == 200
            assert scrubs.get_json() == {"pending": []}
            return
        assert response.status_code == 202
        body = response.get_json()
        assert (body["status"], body["learner"]) == ("pending", learner)
        assert "retries" in body["detail"] and "/admin/scrubs" in body["detail"]
        [pending] = scrubs.get_json()["pending"]
        assert (pending["inbox_id"], pending["attempts"]) == (None, 1)
        assert "snapshot" in pending["last_error"]
    counts = store.inspection.rows_about(learner, "")
    assert counts == dict.fromkeys(counts, 0)  # the rows went at once

    assert store.scrubs.run() is Outcome.DONE  # as the worker's next run does
    assert client.get("/admin/scrubs", headers=bearer()).get_json() == {"pending": []}
