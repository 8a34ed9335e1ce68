"""Operator memory inspection: GET /admin/learners/<id>/memory and POST …/forget."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot.runtime import Pam
from bot.settings import Settings
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from webhooks.app import create_app

ADMIN = "admin-token-3b9d"


def client_for(settings: Settings, engine: Engine, token: str | None = ADMIN) -> FlaskClient:
    app = create_app(settings.replace(web={"admin_token": token}), engine=engine)
    return app.test_client()


def bearer(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_disabled_without_a_token(pam: Pam, settings: Settings, engine: Engine) -> None:
    learner = pam.store.learners.learner(unique_user())
    client = client_for(settings, engine, token=None)
    assert client.get(f"/admin/learners/{learner.id}/memory", headers=bearer()).status_code == 404
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
    pam.tutor.handle(learner.external_id, "Hola, me llamo Lena")
    client = client_for(settings, engine)
    memory = client.get(f"/admin/learners/{learner.id}/memory", headers=headers)
    forget = client.post(f"/admin/learners/{learner.id}/forget", headers=headers)
    assert (memory.status_code, forget.status_code) == (401, 401)
    assert "Lena" not in memory.get_data(as_text=True)
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
    fake_model.queue("profile", json.dumps({"who": "Lena, a nurse"}))
    for n in range(5):
        pam.tutor.handle(user, f"yo es Lena, mensaje {n}")
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
    assert body["profile"]["who"] == "Lena, a nurse"
    assert body["profile"]["_meta"]["messages_processed"] == 5
    assert body["corrections"][0] == {
        "original": "yo es",
        "corrected": "yo soy",
        "explanation": "ser",
        "category": "conjugation",
    }
    assert body["usage"]["reply"]["calls"] == 5
    assert body["usage"]["profile"]["calls"] == 1
    assert [job["kind"] for job in body["jobs"]] == ["profile"]
    assert body["jobs"][0]["running"] is False


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
            pam.tutor.handle(who, f"mensaje {n}")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None

    response = client_for(settings, engine).post(
        f"/admin/learners/{learner.id}/forget", headers=bearer()
    )

    assert response.status_code == 200
    counts = pam.store.inspection.rows_about(learner.id, learner.external_id)
    assert counts == dict.fromkeys(counts, 0)
    assert pam.store.learners.find_learner(bystander) is not None
