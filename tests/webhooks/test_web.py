"""The web app through Flask's test client: health check, the API channel's auth, validation,
persistence and acknowledgement, and database failures answered with 503."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from werkzeug.test import TestResponse

from memory.database import db
from memory.database.claims import PENDING
from memory.database.models_queue import InboxItem
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.helpers.queues import queue_rows
from tests.support import API_TOKEN
from tests.webhooks.conftest import app_for
from webhooks.app import MAX_BODY_BYTES, create_app
from webhooks.settings import Settings

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
UNREACHABLE_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:1/x"


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    """The web app of these tests has the API channel on."""
    return settings.replace(api={"token": API_TOKEN})


def message(
    user: str | None = None, text: str = "Hola, yo es Lena", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"id": uuid.uuid4().hex, "user": user or uuid.uuid4().hex, "text": text}
    body.update(extra)
    return body


def post(client: FlaskClient, body: Any, headers: dict[str, str] | None = None) -> TestResponse:
    return client.post("/api/messages", json=body, headers=AUTH if headers is None else headers)


def assert_json_error(response: TestResponse, status: int) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.is_json
    assert isinstance(response.get_json()["error"], str)


# -- health -------------------------------------------------------------------------------


def test_healthz_is_200_on_a_live_database(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "database": "ok"}


@pytest.fixture(params=["postgres-port-1", "sqlite-missing-directory"])
def dead_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine whose database cannot be reached."""
    if request.param == "postgres-port-1":
        url = UNREACHABLE_POSTGRES
    else:
        url = f"sqlite:///{tmp_path / 'missing' / 'pam.db'}"
    engine = db.make_engine(url)
    yield engine
    engine.dispose()


def dead_settings(engine: Engine) -> Settings:
    return Settings(
        database_url=engine.url.render_as_string(hide_password=False),
        llm={"api_key": "test-key"},
        api={"token": API_TOKEN},
    )


def test_healthz_is_503_when_the_database_is_unreachable(dead_engine: Engine) -> None:
    client = create_app(dead_settings(dead_engine), engine=dead_engine).test_client()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.get_json() == {"status": "unavailable", "database": "unreachable"}


def test_a_message_is_503_with_retry_after_when_the_database_is_unreachable(
    dead_engine: Engine,
) -> None:
    woken: list[int] = []
    app = app_for(dead_settings(dead_engine), dead_engine, woken)
    response = post(app.test_client(), message())
    assert_json_error(response, 503)
    assert int(response.headers["Retry-After"]) > 0
    assert woken == []


def test_a_database_error_while_accepting_is_503_with_retry_after(
    app: Flask, client: FlaskClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> bool:
        raise OperationalError(
            "INSERT INTO inbox ...", {}, Exception("server closed the connection")
        )

    monkeypatch.setattr(app.extensions["pam"].inbox, "admit", broken)
    response = post(client, message())
    assert_json_error(response, 503)
    assert int(response.headers["Retry-After"]) > 0
    assert "server closed" not in response.get_data(as_text=True), "no internals in answers"


# -- the API channel: authentication ------------------------------------------------------


def test_the_api_channel_is_off_without_a_token(
    settings: Settings, engine: Engine, woken: list[int]
) -> None:
    assert settings.api.token is None
    client = app_for(settings, engine, woken).test_client()
    for headers in ({}, AUTH, {"Authorization": "Bearer "}, {"Authorization": "Bearer None"}):
        assert_json_error(post(client, message(), headers), 404)
    assert queue_rows(engine) == 0
    assert woken == []


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong-token",
        f"Bearer {API_TOKEN[:-1]}",
        f"Bearer {API_TOKEN}x",
        f"Basic {API_TOKEN}",
        API_TOKEN,
        f"Token {API_TOKEN}",
        "Bearer tōken-ünïcode",
    ],
)
def test_a_missing_or_wrong_token_is_401_and_writes_nothing(
    client: FlaskClient, engine: Engine, woken: list[int], authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = post(client, message(), headers)
    assert_json_error(response, 401)
    assert queue_rows(engine) == 0
    assert woken == []


def test_the_bearer_scheme_is_case_insensitive(client: FlaskClient, engine: Engine) -> None:
    response = post(client, message(), {"Authorization": f"bearer {API_TOKEN}"})
    assert response.status_code == 202


# -- the API channel: bad bodies ----------------------------------------------------------


def raw(client: FlaskClient, data: bytes | str, content_type: str) -> TestResponse:
    return client.post("/api/messages", data=data, content_type=content_type, headers=AUTH)


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("hello", "text/plain"),
        ("hello", "application/json"),
        ('{"id": "1", "user": "u", "text": ', "application/json"),
        ("", "application/json"),
        (b"\xff\xfe\x00garbage", "application/json"),
        ("[]", "application/json"),
        ('["id", "user", "text"]', "application/json"),
        ("null", "application/json"),
        ('"a string"', "application/json"),
        ("42", "application/json"),
        ('{"id": "1", "user": "u", "text": "hi"}', "application/x-www-form-urlencoded"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_400(
    client: FlaskClient, engine: Engine, woken: list[int], data: str | bytes, content_type: str
) -> None:
    assert_json_error(raw(client, data, content_type), 400)
    assert queue_rows(engine) == 0
    assert woken == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"id": "m1", "user": "u1"},
        {"id": "m1", "text": "hi"},
        {"user": "u1", "text": "hi"},
        {"id": 1, "user": "u1", "text": "hi"},
        {"id": "m1", "user": 7, "text": "hi"},
        {"id": "m1", "user": "u1", "text": None},
        {"id": "m1", "user": "u1", "text": ["hi"]},
        {"id": "m1", "user": "u1", "text": {"body": "hi"}},
        {"id": "m1", "user": "u1", "text": True},
        {"id": "m1", "user": "u1", "text": "hi", "name": 5},
        {"id": "", "user": "u1", "text": "hi"},
        {"id": "   ", "user": "u1", "text": "hi"},
        {"id": "m1", "user": "", "text": "hi"},
        {"id": "x" * 101, "user": "u1", "text": "hi"},
        {"id": "m1", "user": "u" * 101, "text": "hi"},
        {"id": "m1", "user": "u1", "text": "hi", "name": "n" * 101},
        {"id": "m1", "user": "u1", "text": "x" * 20001},
    ],
)
def test_invalid_fields_are_400_and_write_nothing(
    client: FlaskClient, engine: Engine, woken: list[int], body: dict[str, Any]
) -> None:
    response = post(client, body)
    assert_json_error(response, 400)
    assert queue_rows(engine) == 0
    assert woken == []


def test_an_oversize_body_is_413_and_writes_nothing(client: FlaskClient, engine: Engine) -> None:
    body = json.dumps(message(text="x" * (MAX_BODY_BYTES + 1)))
    assert_json_error(raw(client, body, "application/json"), 413)
    assert queue_rows(engine) == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/messages"), ("PUT", "/api/messages"), ("POST", "/api/nope"), ("GET", "/")],
)
def test_wrong_routes_and_methods_are_json_4xx(client: FlaskClient, method: str, path: str) -> None:
    response = client.open(path, method=method, headers=AUTH, json=message())
    assert 400 <= response.status_code < 500
    assert response.is_json


@pytest.mark.parametrize(
    "body",
    [
        message(text="half an emoji \ud83d"),
        message(text="a NUL \x00 byte"),
        message(user="user-\ud83d"),
        message(user="user-\x00"),
        message(name="Lena \udc00"),
        message(name="Lena \x00"),
        {"id": "id-\ud83d-" + uuid.uuid4().hex, "user": "u1", "text": "hi"},
        {"id": "id-\x00-" + uuid.uuid4().hex, "user": "u1", "text": "hi"},
    ],
    ids=[
        "surrogate-text",
        "nul-text",
        "surrogate-user",
        "nul-user",
        "surrogate-name",
        "nul-name",
        "surrogate-id",
        "nul-id",
    ],
)
def test_odd_but_legal_json_strings_never_get_a_5xx(
    client: FlaskClient, engine: Engine, body: dict[str, Any]
) -> None:
    """JSON may carry lone surrogates and NUL characters. Neither may become a 5xx: the
    platform would redeliver the message forever. (Accepting, cleaned, or a 400 are both fine.)"""
    response = client.post(
        "/api/messages",
        data=json.dumps(body),  # ensure_ascii keeps the surrogate as a \ud83d escape
        content_type="application/json",
        headers=AUTH,
    )
    assert response.status_code in (200, 202, 400), response.get_data(as_text=True)
    assert response.is_json


# -- the API channel: accepted messages ---------------------------------------------------


def test_a_valid_message_is_persisted_once_and_acknowledged(
    client: FlaskClient, engine: Engine, woken: list[int], fake_model: FakeChatModel
) -> None:
    user = unique_user().split(":", 1)[1]
    body = message(user=f"  {user}  ", text="  Hola, yo es Lena 🇩🇪  ", name="Lena")
    response = post(client, body)
    assert response.status_code == 202
    assert response.get_json() == {"status": "accepted"}
    assert woken == [1]

    with Session(engine) as session:
        items = list(session.scalars(select(InboxItem)))
    assert len(items) == 1
    item = items[0]
    assert (item.channel, item.platform_id, item.address, item.chat_id) == (
        "api",
        f"{user}\x1f{body['id']}",  # deduplicated per user and id
        f"api:{user}",
        f"{user}\x1f{body['id']}",  # the reply names the request it answers
    )
    assert (item.text, item.display_name, item.status) == ("Hola, yo es Lena 🇩🇪", "Lena", PENDING)
    assert fake_model.calls == [], "the webhook never calls the LLM"


def test_a_redelivery_is_200_duplicate_and_not_stored_again(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    body = message()
    assert post(client, body).status_code == 202
    again = post(client, body)
    assert again.status_code == 200
    assert again.get_json() == {"status": "duplicate"}
    changed = post(client, {**body, "text": "same id, other text"})
    assert changed.status_code == 200
    assert queue_rows(engine) == 1
    assert woken == [1], "on_inbound runs once per new message"


def test_each_new_message_wakes_the_worker_once(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    user = uuid.uuid4().hex
    bodies = [message(user=user, text=f"mensaje {n}") for n in range(5)]
    for body in bodies:
        assert post(client, body).status_code == 202
    for body in bodies:
        assert post(client, body).status_code == 200
    assert len(woken) == 5
    assert queue_rows(engine) == 5


@pytest.mark.parametrize(("id_chars", "user_chars"), [(98, 1), (49, 50), (1, 98)])
def test_a_message_of_exactly_the_size_limits_is_accepted(
    client: FlaskClient, engine: Engine, id_chars: int, user_chars: int
) -> None:
    """`id` and `user` travel with the reply in one 100-character column, joined by one
    character: together they may have 99."""
    body = {"id": "i" * id_chars, "user": "u" * user_chars, "text": "t" * 20000, "name": "n" * 100}
    assert post(client, body).status_code == 202
    assert queue_rows(engine) == 1


@pytest.mark.parametrize(("id_chars", "user_chars"), [(100, 100), (50, 50), (99, 1)])
def test_an_id_and_user_too_long_together_are_400_and_say_so(
    client: FlaskClient, engine: Engine, id_chars: int, user_chars: int
) -> None:
    response = post(client, message(user="u" * user_chars, id="i" * id_chars))

    assert_json_error(response, 400)
    assert response.get_json()["detail"] == ("user and id together must be at most 99 characters")
    assert queue_rows(engine) == 0
