"""Admission per address (issue 27): a learner with PAM_MAX_QUEUED_PER_ADDRESS messages
waiting gets the next ones turned away before anything of them is stored — 429 on the API,
200 to Telegram (which would otherwise deliver them again) — with one note queued in their
place, so that they are told once to slow down. Everyone else is stored as before."""

from __future__ import annotations

import uuid

from flask.testing import FlaskClient
from sqlalchemy import Engine

from memory.messages import TURNED_AWAY
from tests.conftest import unique_user
from tests.helpers.queues import inbox_items
from tests.support import API_TOKEN
from webhooks.app import create_app
from webhooks.settings import Settings

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
SECRET = "telegram-secret-0123456789"


def client_for(settings: Settings, engine: Engine, max_queued: int) -> FlaskClient:
    bounded = settings.replace(
        api={"token": API_TOKEN},
        telegram={"bot_token": "123456:TEST", "webhook_secret": SECRET},
        limits={"max_queued_per_address": max_queued},
    )
    return create_app(bounded, engine=engine, on_inbound=lambda: None).test_client()


def post(client: FlaskClient, user: str, text: str) -> tuple[int, dict[str, str]]:
    body = {"id": uuid.uuid4().hex, "user": user, "text": text}
    response = client.post("/api/messages", json=body, headers=AUTH)
    return response.status_code, dict(response.headers)


def test_the_api_turns_a_learner_away_past_the_bound_and_stores_nothing_of_it(
    settings: Settings, engine: Engine
) -> None:
    client = client_for(settings, engine, max_queued=3)
    user, other = unique_user().split(":")[1], unique_user().split(":")[1]
    answers = [post(client, user, f"secreto {n}") for n in range(10)]
    assert [status for status, _ in answers] == [202] * 3 + [429] * 7
    assert all(int(headers["Retry-After"]) > 0 for _, headers in answers[3:])
    assert post(client, other, "Hola")[0] == 202  # theirs alone

    rows = [row for row in inbox_items(engine) if row.address == f"api:{user}"]
    assert [row.text for row in rows] == ["secreto 0", "secreto 1", "secreto 2", ""]
    assert [row.kind for row in rows][-1] == TURNED_AWAY  # one note, however many came
    assert len(inbox_items(engine)) == 5


def test_telegram_is_told_a_turned_away_update_arrived(settings: Settings, engine: Engine) -> None:
    """A 4xx or 5xx would make Telegram deliver the update again, and again."""
    client = client_for(settings, engine, max_queued=1)
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    statuses = []
    for update_id in (1, 2, 3):
        update = {
            "update_id": update_id + int(uuid.uuid4().int % 10**8) * 10,
            "message": {
                "message_id": update_id,
                "date": 1_700_000_000,
                "chat": {"id": 4242, "type": "private"},
                "from": {"id": 4242, "is_bot": False, "first_name": "Lena"},
                "text": f"hola {update_id}",
            },
        }
        response = client.post("/telegram/webhook", json=update, headers=headers)
        statuses.append((response.status_code, response.get_json()["status"]))
    assert statuses == [(200, "accepted"), (200, "turned away"), (200, "turned away")]
