"""The Twilio webhook: signatures (behind proxies too), dedupe, media kinds, and status."""

from __future__ import annotations

import base64
import json
import logging
import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine
from werkzeug.test import TestResponse

from bot import phrases
from bot.turn import forgetting
from bot.worker.worker import Worker
from loopback.twilio_server import NUMBER, sign
from memory.database.claims import FAILED, SENT
from memory.store.message_store import Store
from tests.helpers.queues import inbox_items, outbox_items
from tests.webhooks.conftest import app_for
from tests.webhooks.whatsapp.conftest import (
    LOCAL,
    STATUS,
    WEBHOOK,
    CountingTwilioServer,
    location_form,
    media_form,
    new_wa_id,
    post_form,
    status_form,
    text_form,
    with_twilio,
)
from webhooks.app import create_app
from webhooks.settings import Settings
from webhooks.whatsapp.signature import SIGNATURE_HEADER

DEFAULT_REPLY = "¡Qué bien! ¿Y qué más hiciste?"  # the fake model's answer

PUBLIC = "https://pam.example"


def assert_empty_twiml(response: TestResponse) -> None:
    """200 with an empty TwiML <Response>: Twilio sends nothing back by itself."""
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/xml"
    root = ET.fromstring(response.get_data())
    assert root.tag == "Response" and len(root) == 0 and not (root.text or "").strip()


def assert_refused(response: TestResponse, status: int, engine: Engine, woken: list[int]) -> None:
    """A clear 4xx with a JSON error, and nothing written or woken."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.is_json and response.get_json()["error"]
    assert inbox_items(engine) == [] and outbox_items(engine) == []
    assert woken == []


# -- accepted messages ----------------------------------------------------------------------


def test_text_is_stored_once_and_acknowledged_with_empty_twiml(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    wa_id = new_wa_id()
    form = text_form(wa_id, "Hola Pam, ¿qué tal?", profile_name="Lucía Núñez")

    assert_empty_twiml(post_form(client, form))

    [item] = inbox_items(engine)
    assert (item.channel, item.platform_id, item.kind) == ("whatsapp", form["MessageSid"], "text")
    assert item.address == f"whatsapp:+{wa_id}"
    assert item.chat_id == f"whatsapp:+{wa_id}"
    assert item.text == "Hola Pam, ¿qué tal?"
    assert item.display_name == "Lucía Núñez"
    assert woken == [1]


def test_a_body_with_form_special_characters_keeps_its_signature_and_text(
    client: FlaskClient, engine: Engine
) -> None:
    body = "café & crème = 100% +1 😊\nsegunda línea; a=b&c=d"
    assert_empty_twiml(post_form(client, text_form(new_wa_id(), body)))

    [item] = inbox_items(engine)
    assert item.text == body


def test_a_redelivered_message_sid_is_stored_once(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")

    assert_empty_twiml(post_form(client, form))
    assert_empty_twiml(post_form(client, form))

    assert len(inbox_items(engine)) == 1
    assert woken == [1]


def test_two_messages_of_one_learner_are_both_stored(client: FlaskClient, engine: Engine) -> None:
    wa_id = new_wa_id()
    post_form(client, text_form(wa_id, "uno"))
    post_form(client, text_form(wa_id, "dos"))

    assert [item.text for item in inbox_items(engine)] == ["uno", "dos"]


def test_an_empty_body_without_media_is_acknowledged_and_not_stored(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    assert_empty_twiml(post_form(client, text_form(new_wa_id(), "")))
    assert_empty_twiml(post_form(client, text_form(new_wa_id(), "  \n ")))

    assert inbox_items(engine) == [] and woken == []


@pytest.mark.parametrize(
    ("content_type", "message_type", "kind"),
    [
        ("audio/ogg", "audio", "voice"),
        ("image/jpeg", "image", "media"),
        ("application/pdf", "document", "media"),
        ("image/webp", "sticker", "media"),
        ("video/mp4", "video", "media"),
    ],
)
def test_media_is_stored_by_kind(
    client: FlaskClient, engine: Engine, content_type: str, message_type: str, kind: str
) -> None:
    wa_id = new_wa_id()
    form = media_form(wa_id, content_type, message_type)

    assert_empty_twiml(post_form(client, form))

    [item] = inbox_items(engine)
    assert (item.kind, item.text, item.address) == (kind, "", f"whatsapp:+{wa_id}")
    assert item.platform_id == form["MessageSid"]


def test_media_with_a_caption_keeps_the_caption_as_its_text(
    client: FlaskClient, engine: Engine
) -> None:
    form = media_form(new_wa_id(), "image/jpeg", "image", body="Mi perro en la playa")

    assert_empty_twiml(post_form(client, form))

    [item] = inbox_items(engine)
    assert (item.kind, item.text) == ("media", "Mi perro en la playa")


def test_a_captioned_photo_gets_the_note_and_an_answer_to_its_caption(
    client: FlaskClient, worker: Worker, twilio_server: CountingTwilioServer
) -> None:
    wa_id = new_wa_id()
    post_form(client, text_form(wa_id, "/language Spanish"))
    post_form(client, media_form(wa_id, "image/jpeg", "image", body="Mi perro en la playa"))

    worker.drain()

    answer = twilio_server.bodies(f"whatsapp:+{wa_id}")[-1]
    assert answer == f"{phrases.NOT_MEDIA}\n\n{DEFAULT_REPLY}"


def unsupported_form(wa_id: str) -> dict[str, str]:
    """What Twilio posts for a WhatsApp message type it does not pass on (a poll, say):
    MessageType=unsupported, no body, no media."""
    form = text_form(wa_id, "")
    form["MessageType"] = "unsupported"
    return form


def test_an_unsupported_message_type_gets_the_friendly_media_answer(
    client: FlaskClient, engine: Engine, worker: Worker, twilio_server: CountingTwilioServer
) -> None:
    wa_id = new_wa_id()

    assert_empty_twiml(post_form(client, unsupported_form(wa_id)))

    [item] = inbox_items(engine)
    assert (item.kind, item.text) == ("media", "")
    worker.drain()
    assert twilio_server.bodies(f"whatsapp:+{wa_id}") == [phrases.NOT_MEDIA]


def test_a_location_is_stored_as_media(client: FlaskClient, engine: Engine) -> None:
    assert_empty_twiml(post_form(client, location_form(new_wa_id())))

    [item] = inbox_items(engine)
    assert (item.kind, item.text) == ("media", "")


SHARED_KEY = "webhooks-shared-key-secret-0123456789"


def test_a_sha256_signature_with_the_shared_key_is_accepted(
    whatsapp_settings: Settings, engine: Engine
) -> None:
    """With X-Twilio-Webhooks-Signature-Settings, Twilio signs with the SharedKey secret."""
    settings = whatsapp_settings.replace(whatsapp={"webhook_shared_key": SHARED_KEY})
    app = create_app(settings, engine=engine)
    form = text_form(new_wa_id(), "Hola")
    signature = sign(LOCAL + WEBHOOK, form, token=SHARED_KEY, algorithm="HMAC_SHA256")
    settings_header = {
        "X-Twilio-Webhooks-Signature-Settings": "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"
    }

    response = post_form(app.test_client(), form, signature=signature, headers=settings_header)

    assert_empty_twiml(response)
    assert len(inbox_items(engine)) == 1


def test_a_shared_key_signature_is_refused_without_the_shared_key_configured(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    signature = sign(LOCAL + WEBHOOK, form, token=SHARED_KEY, algorithm="HMAC_SHA256")
    settings_header = {"X-Twilio-Webhooks-Signature-Settings": "algorithm=HMAC_SHA256"}

    assert_refused(
        post_form(client, form, signature=signature, headers=settings_header), 403, engine, woken
    )


def test_a_sha1_signature_under_a_sha256_settings_header_is_refused(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    settings_header = {"X-Twilio-Webhooks-Signature-Settings": "algorithm=HMAC_SHA256"}

    assert_refused(post_form(client, form, headers=settings_header), 403, engine, woken)


def test_a_form_with_a_charset_in_its_content_type_is_accepted(
    client: FlaskClient, engine: Engine
) -> None:
    form = text_form(new_wa_id(), "Hola")
    headers = {SIGNATURE_HEADER: sign(LOCAL + WEBHOOK, form)}

    response = client.post(
        WEBHOOK,
        data=form,
        headers=headers,
        content_type="application/x-www-form-urlencoded; charset=UTF-8",
    )

    assert_empty_twiml(response)
    assert len(inbox_items(engine)) == 1


def test_the_query_string_of_the_configured_url_is_part_of_what_was_signed(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    path = WEBHOOK + "?source=whatsapp&v=2"

    assert_empty_twiml(post_form(client, form, path=path))
    refused = post_form(client, form, path=path, signed_url=LOCAL + WEBHOOK)
    assert refused.status_code == 403
    assert len(inbox_items(engine)) == 1


# -- behind a proxy, and PAM_PUBLIC_URL -----------------------------------------------------


@pytest.fixture
def behind_a_proxy(whatsapp_settings: Settings, engine: Engine, woken: list[int]) -> FlaskClient:
    """The web app behind one trusted proxy (PAM_PROXY_HOPS=1)."""
    settings = whatsapp_settings.replace(web={"proxy_hops_override": 1})
    return app_for(settings, engine, woken).test_client()


def test_behind_a_tls_proxy_the_https_url_is_what_was_signed(
    behind_a_proxy: FlaskClient, engine: Engine
) -> None:
    form = text_form(new_wa_id(), "Hola")
    signature = sign(f"{PUBLIC}{WEBHOOK}", form)

    response = post_form(
        behind_a_proxy,
        form,
        signature=signature,
        headers={"X-Forwarded-Proto": "https"},
        base_url="http://pam.example",
    )

    assert_empty_twiml(response)
    assert len(inbox_items(engine)) == 1


def test_without_a_proxy_a_clients_x_forwarded_proto_counts_for_nothing(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    forwarded = {"X-Forwarded-Proto": "https"}

    refused = post_form(
        client,
        form,
        signature=sign(f"{PUBLIC}{WEBHOOK}", form),
        headers=forwarded,
        base_url="http://pam.example",
    )
    accepted = post_form(client, form, headers=forwarded, base_url="http://pam.example")

    assert refused.status_code == 403
    assert_empty_twiml(accepted)  # signed over the URL it really called: http://pam.example
    assert len(inbox_items(engine)) == 1


def test_only_the_nearest_proxys_scheme_is_trusted(
    behind_a_proxy: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    """A client that sends its own X-Forwarded-Proto gets the proxy's appended after it."""
    form = text_form(new_wa_id(), "Hola")
    forwarded = {"X-Forwarded-Proto": "http, https"}

    response = post_form(
        behind_a_proxy,
        form,
        signature=sign(f"http://pam.example{WEBHOOK}", form),
        headers=forwarded,
        base_url="http://pam.example",
    )

    assert_refused(response, 403, engine, woken)


def test_the_https_signature_without_x_forwarded_proto_is_refused(
    behind_a_proxy: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    signature = sign(f"{PUBLIC}{WEBHOOK}", form)

    response = post_form(behind_a_proxy, form, signature=signature, base_url="http://pam.example")

    assert_refused(response, 403, engine, woken)


def test_a_forwarded_host_is_not_trusted_even_behind_a_proxy(
    behind_a_proxy: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    """Heroku's router and Fly's proxy pass the Host on and set no X-Forwarded-Host: one that
    arrives was written by the client. Behind a proxy that rewrites the Host, set
    PAM_PUBLIC_URL."""
    form = text_form(new_wa_id(), "Hola")
    signature = sign(f"{PUBLIC}{WEBHOOK}", form)
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "pam.example"}

    response = post_form(
        behind_a_proxy,
        form,
        signature=signature,
        headers=forwarded,
        base_url="http://10.0.0.7:8000",
    )

    assert_refused(response, 403, engine, woken)


@pytest.mark.parametrize("public_url", [PUBLIC, PUBLIC + "/"])
def test_with_a_public_url_its_signature_is_accepted_whatever_the_host(
    settings: Settings,
    twilio_server: CountingTwilioServer,
    engine: Engine,
    woken: list[int],
    public_url: str,
) -> None:
    app = app_for(
        with_twilio(settings, twilio_server, web={"public_url": public_url}), engine, woken
    )
    form = text_form(new_wa_id(), "Hola")
    signature = sign(f"{PUBLIC}{WEBHOOK}", form)

    response = post_form(
        app.test_client(), form, signature=signature, base_url="http://10.0.0.7:8000"
    )

    assert_empty_twiml(response)
    assert len(inbox_items(engine)) == 1


def test_with_a_public_url_a_signature_over_the_host_is_refused(
    settings: Settings, twilio_server: CountingTwilioServer, engine: Engine, woken: list[int]
) -> None:
    app = app_for(with_twilio(settings, twilio_server, web={"public_url": PUBLIC}), engine, woken)
    form = text_form(new_wa_id(), "Hola")
    host_url = "http://10.0.0.7:8000"

    response = post_form(
        app.test_client(),
        form,
        signature=sign(host_url + WEBHOOK, form),
        headers={"X-Forwarded-Proto": "http"},
        base_url=host_url,
    )

    assert_refused(response, 403, engine, woken)


# -- refused requests -----------------------------------------------------------------------


Tamper = Callable[[dict[str, str]], tuple[dict[str, str], str]]


def forged(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """A signature that is no HMAC of anything."""
    return form, base64.b64encode(b"not a real hmac-sha1 digest!").decode()


def missing(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """No X-Twilio-Signature header."""
    return form, ""


def another_token(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """Signed with another account's auth token."""
    return form, sign(LOCAL + WEBHOOK, form, token="another-accounts-auth-token-000000")


def changed_body(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """A genuine signature replayed with the Body changed."""
    return {**form, "Body": "/forget"}, sign(LOCAL + WEBHOOK, form)


def extra_param(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """A genuine signature replayed with a parameter added."""
    return {**form, "MediaUrl0": "https://evil.example/x.ogg"}, sign(LOCAL + WEBHOOK, form)


def fewer_params(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """A genuine signature replayed with a parameter removed."""
    trimmed = {name: value for name, value in form.items() if name != "ProfileName"}
    return trimmed, sign(LOCAL + WEBHOOK, form)


def other_path(form: dict[str, str]) -> tuple[dict[str, str], str]:
    """A genuine signature for the status callback URL."""
    return form, sign(LOCAL + STATUS, form)


@pytest.mark.parametrize(
    "tamper",
    [forged, missing, another_token, changed_body, extra_param, fewer_params, other_path],
)
def test_a_bad_signature_is_refused_and_nothing_is_written(
    client: FlaskClient, engine: Engine, woken: list[int], tamper: Tamper
) -> None:
    form, signature = tamper(text_form(new_wa_id(), "Hola"))

    assert_refused(post_form(client, form, signature=signature), 403, engine, woken)


def test_a_json_body_is_refused_with_415(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    form = text_form(new_wa_id(), "Hola")
    headers = {SIGNATURE_HEADER: sign(LOCAL + WEBHOOK, {})}

    response = client.post(
        WEBHOOK, data=json.dumps(form), headers=headers, content_type="application/json"
    )

    assert_refused(response, 415, engine, woken)


def test_a_text_body_is_refused_with_415(
    client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    headers = {SIGNATURE_HEADER: sign(LOCAL + WEBHOOK, {})}

    response = client.post(WEBHOOK, data="Body=Hola", headers=headers, content_type="text/plain")

    assert_refused(response, 415, engine, woken)


@pytest.mark.parametrize("path", [WEBHOOK, STATUS])
def test_without_twilio_configured_the_routes_are_404(
    settings: Settings, engine: Engine, woken: list[int], path: str
) -> None:
    client = app_for(settings, engine, woken).test_client()

    response = post_form(client, text_form(new_wa_id(), "Hola"), path=path)

    assert_refused(response, 404, engine, woken)


# -- commands typed as text, end to end -----------------------------------------------------


def test_commands_typed_as_text_work_end_to_end(
    client: FlaskClient,
    worker: Worker,
    store: Store,
    twilio_server: CountingTwilioServer,
) -> None:
    wa_id = new_wa_id()
    address = f"whatsapp:+{wa_id}"

    post_form(client, text_form(wa_id, "/language Spanish English"))
    worker.drain()
    learner = store.learners.find_learner(address)
    assert learner is not None
    assert (learner.target_language, learner.native_language) == ("Spanish", "English")
    assert (
        "We're practising Spanish, with corrections explained in Spanish (at /level A1 or A2, "
        "in English)." in twilio_server.bodies(address)[-1]
    )

    post_form(client, text_form(wa_id, "Hola, me llamo Lucía"))
    post_form(client, text_form(wa_id, "/profile"))
    worker.drain()
    profile = twilio_server.bodies(address)[-1]
    assert profile.startswith("Here's what I know about you:")
    assert "Spanish" in profile and "/forget" in profile

    post_form(client, text_form(wa_id, "/forget"))
    worker.drain()
    assert twilio_server.bodies(address)[-1].startswith(forgetting.ASK)
    assert store.learners.find_learner(address) is not None  # asked: nothing erased yet
    post_form(client, text_form(wa_id, "Yes"))  # the reply word, typed
    worker.drain()
    assert twilio_server.bodies(address)[-1] == phrases.FORGOTTEN
    assert store.learners.find_learner(address) is None
    assert len(twilio_server.bodies(address)) == 5
    assert {m["From"] for m in twilio_server.messages} == {NUMBER}


# -- POST /whatsapp/status ------------------------------------------------------------------


def delivered_reply(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> tuple[str, str]:
    """Send one reply through the worker: the learner's address and the reply's Twilio sid."""
    wa_id = new_wa_id()
    post_form(client, text_form(wa_id, "Hola"))
    worker.drain()
    [row] = outbox_items(engine)
    assert row.status == SENT and row.platform_message_id
    assert len(twilio_server.messages) == 1
    return f"whatsapp:+{wa_id}", row.platform_message_id


def test_an_undelivered_status_marks_the_reply_failed_with_its_error_code(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> None:
    address, sid = delivered_reply(client, worker, engine, twilio_server)

    response = post_form(client, status_form(sid, address, "undelivered", "63016"), path=STATUS)

    assert response.status_code in (200, 204)
    [row] = outbox_items(engine)
    assert row.status == FAILED
    assert row.last_error is not None and "63016" in row.last_error


def test_a_delivered_status_changes_nothing(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> None:
    address, sid = delivered_reply(client, worker, engine, twilio_server)

    for state in ("sent", "delivered", "read"):
        response = post_form(client, status_form(sid, address, state), path=STATUS)
        assert response.status_code in (200, 204)

    [row] = outbox_items(engine)
    assert (row.status, row.last_error) == (SENT, None)


def test_an_unsigned_status_callback_is_refused_and_changes_nothing(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> None:
    address, sid = delivered_reply(client, worker, engine, twilio_server)
    form = status_form(sid, address, "undelivered", "63016")

    assert post_form(client, form, path=STATUS, signature="").status_code == 403
    assert post_form(client, form, path=STATUS, signed_url=LOCAL + WEBHOOK).status_code == 403

    [row] = outbox_items(engine)
    assert (row.status, row.last_error) == (SENT, None)


def test_a_status_for_an_unknown_message_changes_nothing(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> None:
    address, _ = delivered_reply(client, worker, engine, twilio_server)
    form = status_form("SM" + "f" * 32, address, "failed", "30008")

    assert post_form(client, form, path=STATUS).status_code in (200, 204)

    [row] = outbox_items(engine)
    assert row.status == SENT


def test_a_status_is_authenticated_against_the_public_url(
    settings: Settings,
    twilio_server: CountingTwilioServer,
    engine: Engine,
    woken: list[int],
    worker: Worker,
    client: FlaskClient,
) -> None:
    address, sid = delivered_reply(client, worker, engine, twilio_server)
    public = app_for(
        with_twilio(settings, twilio_server, web={"public_url": PUBLIC}), engine, woken
    )
    form = status_form(sid, address, "failed", "21211")

    response = post_form(
        public.test_client(),
        form,
        path=STATUS,
        signed_url=f"{PUBLIC}{STATUS}",
        base_url="http://10.0.0.7:8000",
    )

    assert response.status_code in (200, 204)
    [row] = outbox_items(engine)
    assert row.status == FAILED and "21211" in (row.last_error or "")


def test_a_refused_signature_is_said_once_a_minute_with_the_url_checked(
    client: FlaskClient, engine: Engine, woken: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    form = text_form(new_wa_id(), "Hola")
    with caplog.at_level(logging.WARNING, logger="webhooks.web"):
        for _ in range(3):
            response = post_form(client, form, path=WEBHOOK + "?token=x", signed_url=PUBLIC)
            assert_refused(response, 403, engine, woken)
    said = [r.getMessage() for r in caplog.records if "webhook refused" in r.getMessage()]
    assert len(said) == 1, "once a minute, not once per retry"
    assert "PAM_PUBLIC_URL" in said[0] and LOCAL + WEBHOOK in said[0]
    assert "token=x" not in said[0] and "Hola" not in said[0], "no query string, no body"
