"""The HTTP API channel's callback: each reply names the request it answers, and is signed the
Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature), checked with the
spec's own Python library and with the docs' example; a replayed callback is rejected."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from standardwebhooks import Webhook, WebhookVerificationError

from bot import phrases
from bot.channels import Button
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.callback_server import CallbackServer
from memory.clock import utcnow
from memory.database.models_queue import OutboxItem
from tests.conftest import unique_user
from tests.support import API_TOKEN
from webhooks.api.sender import ApiCallbackSender
from webhooks.api.signing import webhook_signature
from webhooks.app import create_app
from webhooks.settings import Settings

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "channels" / "api.md"
KEY = "whsec_" + base64.b64encode(API_TOKEN.encode()).decode()  # the token, as the spec spells it


@pytest.fixture
def callback() -> Iterator[CallbackServer]:
    """An operator's callback endpoint on 127.0.0.1."""
    with CallbackServer() as server:
        yield server


class Clock:
    """time.time, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def serve(
    pam: Pam, settings: Settings, callback: CallbackServer, clock: Clock
) -> tuple[Any, Worker]:
    """The web app's test client and a worker delivering API replies to `callback`."""
    api = settings.replace(api={"token": API_TOKEN, "callback_url": callback.url})
    sender = ApiCallbackSender(callback.url, API_TOKEN, timeout=5, clock=clock)
    return create_app(api, engine=pam.engine).test_client(), Worker(pam, {"api": sender})


def post(client: Any, request_id: str, user: str, text: str) -> None:
    body = {"id": request_id, "user": user, "text": text}
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    assert client.post("/api/messages", json=body, headers=headers).status_code == 202


def docs_verifier() -> Any:
    """The `verified` function of the docs' HTTP API page, as a reader would paste it."""
    text = API_PAGE.read_text()
    [code] = re.findall(r"```python\n(import base64, hashlib, hmac, time\n.*?)```", text, re.S)
    scope: dict[str, Any] = {}
    exec(compile(code, str(API_PAGE), "exec"), scope)
    return scope["verified"]


def test_each_reply_names_the_request_it_answers_and_verifies(
    pam: Pam, settings: Settings, callback: CallbackServer
) -> None:
    client, worker = serve(pam, settings, callback, Clock())
    user = unique_user().split(":", 1)[1]
    post(client, "msg-1", user, "Hola")
    post(client, "msg-2", user, "Yo es Lena")

    worker.drain()
    worker.close_senders()

    replies = [Webhook(KEY).verify(r.body, r.headers) for r in callback.received]
    assert [(r["in_reply_to"], r["user"]) for r in replies] == [("msg-1", user), ("msg-2", user)]
    for reply, request in zip(replies, callback.received, strict=True):
        # A model-written reply carries its buttons as data (/translate, ...: issue 29).
        assert list(reply) == ["id", "in_reply_to", "user", "text", "buttons"]
        assert reply["buttons"][0]["command"].startswith("/translate ")
        assert reply["id"] == request.headers["webhook-id"] == request.headers["idempotency-key"]
        assert re.fullmatch(r"pam-\d+", reply["id"])
        assert docs_verifier()(request.body, request.headers, API_TOKEN)


def test_a_retried_reply_keeps_its_id_and_is_signed_at_its_new_time(
    pam: Pam, settings: Settings, callback: CallbackServer
) -> None:
    clock = Clock()
    client, worker = serve(pam, settings, callback, clock)
    callback.answers.append((503, {}))
    post(client, "msg-9", unique_user().split(":", 1)[1], "Hola")
    worker.drain()
    clock.now += 90
    with pam.engine.begin() as connection:  # skip the retry's backoff instead of sleeping
        connection.execute(update(OutboxItem).values(available_at=utcnow()))
    worker.drain()
    worker.close_senders()

    first, second = callback.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert int(second.headers["webhook-timestamp"]) == int(first.headers["webhook-timestamp"]) + 90
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"]
    assert first.body == second.body
    assert Webhook(KEY).verify(second.body, second.headers)["in_reply_to"] == "msg-9"


def test_a_replayed_or_altered_callback_is_rejected() -> None:
    body = json.dumps({"id": "pam-7", "in_reply_to": "m", "user": "u", "text": "Hola"}).encode()
    stale = int(time.time()) - 600  # recorded ten minutes ago, sent again now
    headers = {
        "webhook-id": "pam-7",
        "webhook-timestamp": str(stale),
        "webhook-signature": webhook_signature(API_TOKEN.encode(), "pam-7", stale, body),
    }
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(KEY).verify(body, headers)
    assert not docs_verifier()(body, headers, API_TOKEN)

    now = int(time.time())
    fresh = {**headers, "webhook-timestamp": str(now)}  # a new timestamp on the old signature
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(KEY).verify(body, fresh)
    assert not docs_verifier()(body, fresh, API_TOKEN)
    signed_now = {
        **fresh,
        "webhook-signature": webhook_signature(API_TOKEN.encode(), "pam-7", now, body),
    }
    assert docs_verifier()(body, signed_now, API_TOKEN)
    assert not docs_verifier()(body.replace(b"Hola", b"Adios"), signed_now, API_TOKEN)


@pytest.mark.parametrize(
    "forged",
    [
        {},
        {"webhook-timestamp": None},
        {"webhook-timestamp": "soon"},
        {"webhook-timestamp": "١٧٣٣٠٥٠٠٠٠"},  # digits, but not ASCII ones
        {"webhook-signature": None},
        {"webhook-signature": "v1,ñandú"},  # not ASCII: compare_digest would raise on str
        {"webhook-id": None},
    ],
)
def test_the_readme_check_answers_false_to_forged_headers(forged: dict[str, str | None]) -> None:
    # A receiver's endpoint faces anyone: a header missing or malformed is a no, never an
    # exception (a 500 for whoever sent it).
    body = b'{"id": "pam-7", "in_reply_to": "m", "user": "u", "text": "Hola"}'
    now = int(time.time())
    signed = {
        "webhook-id": "pam-7",
        "webhook-timestamp": str(now),
        "webhook-signature": webhook_signature(API_TOKEN.encode(), "pam-7", now, body),
    }
    headers = {k: v for k, v in {**signed, **forged}.items() if v is not None}

    assert docs_verifier()(body, headers, API_TOKEN) is (headers == signed)


def test_a_reply_queued_before_the_upgrade_still_goes_out(callback: CallbackServer) -> None:
    """Its chat address holds the user alone: the reply carries no in_reply_to."""
    sender = ApiCallbackSender(callback.url, API_TOKEN, timeout=5)
    try:
        sender.send("lena", "Hola", idempotency_key="pam-3")
    finally:
        sender.close()

    [request] = callback.received
    assert Webhook(KEY).verify(request.body, request.headers) == {
        "id": "pam-3",
        "user": "lena",
        "text": "Hola",
    }


def test_a_reply_with_buttons_carries_them_as_data(callback: CallbackServer) -> None:
    """The API has no buttons of its own: they go as data, each a label and the command a
    client sends back as the user's message."""
    sender = ApiCallbackSender(callback.url, API_TOKEN, timeout=5)
    buttons = [Button("Traducir", "/translate 41"), Button("🔊 Escuchar", "/say 41")]
    sender.send_buttons("lena", "¡Hola!", buttons, idempotency_key="pam-7")
    sender.close()
    (request,) = callback.received
    reply = Webhook(KEY).verify(request.body, request.headers)
    assert reply["text"] == "¡Hola!"
    assert reply["buttons"] == [
        {"label": "Traducir", "command": "/translate 41"},
        {"label": "🔊 Escuchar", "command": "/say 41"},
    ]


def test_on_the_api_forget_sent_twice_confirms(
    pam: Pam, settings: Settings, callback: CallbackServer
) -> None:
    """A program confirms /forget by sending it again within the expiry (the API's channel
    says so: ApiCallbackSender.repeat_confirms); the question says how, with its buttons as
    data for a client that shows them."""
    client, worker = serve(pam, settings, callback, Clock())
    user = unique_user().split(":", 1)[1]
    post(client, "msg-1", user, "/language Spanish English")
    post(client, "msg-2", user, "/forget")
    worker.drain()
    assert pam.store.learners.find_learner(f"api:{user}") is not None
    post(client, "msg-3", user, "/forget")
    worker.drain()
    worker.close_senders()

    replies = [Webhook(KEY).verify(r.body, r.headers) for r in callback.received]
    _, asked, done = replies
    assert asked["in_reply_to"] == "msg-2" and "send /forget again within 5" in asked["text"]
    assert [b["command"].split()[:2] for b in asked["buttons"]] == [
        ["/forget", "yes"],
        ["/forget", "no"],
    ]
    assert (done["in_reply_to"], done["text"]) == ("msg-3", phrases.FORGOTTEN)
    assert pam.store.learners.find_learner(f"api:{user}") is None
