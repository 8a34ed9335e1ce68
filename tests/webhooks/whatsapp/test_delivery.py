"""Replies through the Worker and the real TwilioSender to a fake Twilio REST server."""

from __future__ import annotations

import logging
import re
import socket
import threading

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot import phrases
from bot.channels import PermanentSendError, TransientSendError
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, Failure
from memory.database.claims import FAILED, PENDING, SENT
from memory.store.message_store import Store
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.queues import make_available_now, outbox_items
from tests.webhooks.whatsapp.conftest import (
    CountingTwilioServer,
    media_form,
    new_wa_id,
    post_form,
    text_form,
)
from webhooks.services import service_logging
from webhooks.settings import Settings
from webhooks.whatsapp.sender import TwilioSender
from webhooks.wiring import build, senders

LIMIT = 1600
SENTENCE_END = re.compile(r"[.!?…]$")


def learner_says(client: FlaskClient, text: str, wa_id: str = "", **form: str) -> str:
    """Post a signed text message from the learner; their whatsapp: address."""
    wa_id = wa_id or new_wa_id()
    response = post_form(client, {**text_form(wa_id, text), **form})
    assert response.status_code == 200
    return f"whatsapp:+{wa_id}"


def utf16_length(text: str) -> int:
    """The length of `text` in UTF-16 code units: an emoji outside the BMP counts twice."""
    return len(text.encode("utf-16-le")) // 2


def long_reply(chars: int = 4000, decoration: str = "") -> str:
    """A reply of exactly `chars` characters made of numbered sentences of varied length."""
    sentences: list[str] = []
    n = 0
    while len(" ".join(sentences)) < chars - 120:
        n += 1
        sentences.append(f"Frase número {n}{decoration}" + ", y otra cosa" * (1 + n % 4) + ".")
    body = " ".join(sentences)
    return body + " ¡Fin" + "!" * (chars - len(body) - 5)


def test_a_reply_goes_from_the_number_to_the_learner_with_the_exact_text(
    client: FlaskClient,
    worker: Worker,
    engine: Engine,
    fake_model: FakeChatModel,
    twilio_server: CountingTwilioServer,
) -> None:
    fake_model.queue("reply", reply_json('¡Hola! 😊 ¿Qué tal tu día, "amiga" & compañía?'))
    address = learner_says(client, "Hola Pam")

    worker.drain()

    [message] = twilio_server.messages
    assert message["From"] == NUMBER
    assert message["To"] == address
    assert twilio_server.bodies(address) == ['¡Hola! 😊 ¿Qué tal tu día, "amiga" & compañía?']
    assert "StatusCallback" not in message
    [row] = outbox_items(engine)
    assert row.status == SENT
    assert row.platform_message_id == f"SM{1:032d}"  # the sid Twilio answered with


def test_a_voice_note_gets_the_read_text_answer_in_the_native_language(
    client: FlaskClient, worker: Worker, twilio_server: CountingTwilioServer
) -> None:
    wa_id = new_wa_id()
    address = learner_says(client, "/language Spanish Italian", wa_id)
    worker.drain()

    post_form(client, media_form(wa_id, "audio/ogg", "audio"))
    worker.drain()

    assert twilio_server.bodies(address)[-1] == phrases.not_text("voice", "Italian")
    assert twilio_server.bodies(address)[-1].startswith("Per ora leggo solo il testo")
    assert len(twilio_server.bodies(address)) == 2


def test_a_voice_note_from_a_stranger_gets_the_english_answer(
    client: FlaskClient, worker: Worker, twilio_server: CountingTwilioServer
) -> None:
    wa_id = new_wa_id()
    post_form(client, media_form(wa_id, "audio/ogg; codecs=opus", "audio"))
    worker.drain()

    assert twilio_server.bodies(f"whatsapp:+{wa_id}") == [phrases.NOT_VOICE]


@pytest.mark.parametrize(
    ("content_type", "message_type"),
    [("image/jpeg", "image"), ("application/pdf", "document"), ("image/webp", "sticker")],
)
def test_other_media_gets_the_cannot_see_answer_in_the_native_language(
    client: FlaskClient,
    worker: Worker,
    twilio_server: CountingTwilioServer,
    content_type: str,
    message_type: str,
) -> None:
    wa_id = new_wa_id()
    address = learner_says(client, "/language French Dutch", wa_id)
    post_form(client, media_form(wa_id, content_type, message_type))
    worker.drain()

    assert twilio_server.bodies(address)[-1] == phrases.not_text("media", "Dutch")
    assert twilio_server.bodies(address)[-1].startswith("Dat kan ik niet zien")


def test_a_long_reply_arrives_as_ordered_messages_split_at_sentences(
    client: FlaskClient,
    worker: Worker,
    engine: Engine,
    fake_model: FakeChatModel,
    twilio_server: CountingTwilioServer,
) -> None:
    reply = long_reply(4000)
    assert len(reply) == 4000
    fake_model.queue("reply", reply_json(reply))
    address = learner_says(client, "Cuéntame algo largo")

    worker.drain()

    parts = twilio_server.bodies(address)
    assert len(parts) == 3
    assert "".join(parts) == reply
    assert all(len(part) <= LIMIT for part in parts)
    assert all(SENTENCE_END.search(part.rstrip()) for part in parts)
    assert [row.seq for row in outbox_items(engine)] == [0, 1, 2]
    assert {row.status for row in outbox_items(engine)} == {SENT}


def test_a_long_reply_with_emoji_fits_twilios_count_of_characters(
    client: FlaskClient,
    worker: Worker,
    fake_model: FakeChatModel,
    twilio_server: CountingTwilioServer,
) -> None:
    """Twilio counts an emoji as more than one of its 1,600 characters (error 21617): a part
    that is 1,600 code points with emoji in it is refused. UTF-16 code units are the least
    Twilio counts."""
    reply = long_reply(4000, decoration=" 😅")
    fake_model.queue("reply", reply_json(reply))
    address = learner_says(client, "Cuéntame algo largo")

    worker.drain()

    parts = twilio_server.bodies(address)
    assert "".join(parts) == reply
    lengths = [utf16_length(part) for part in parts]
    assert all(length <= LIMIT for length in lengths), lengths


def test_a_500_is_retried_and_the_reply_delivered_exactly_once(
    client: FlaskClient,
    worker: Worker,
    engine: Engine,
    twilio_server: CountingTwilioServer,
) -> None:
    twilio_server.fail_next(Failure(500, 20500, "Internal Server Error"))
    address = learner_says(client, "Hola")

    worker.drain()

    [row] = outbox_items(engine)
    assert (row.status, row.attempts) == (PENDING, 1)
    assert row.last_error is not None and "500" in row.last_error
    assert twilio_server.calls() == 1 and twilio_server.messages == []

    make_available_now(engine)
    worker.drain()
    for _ in range(3):  # nothing is left to send, however often the worker looks
        make_available_now(engine)
        worker.drain()

    assert len(twilio_server.bodies(address)) == 1
    assert twilio_server.calls() == 2
    [row] = outbox_items(engine)
    assert (row.status, row.attempts) == (SENT, 2)


def test_a_429_is_transient(
    client: FlaskClient, worker: Worker, engine: Engine, twilio_server: CountingTwilioServer
) -> None:
    twilio_server.fail_next(Failure(429, 20429, "Too Many Requests"))
    address = learner_says(client, "Hola")

    worker.drain()
    [row] = outbox_items(engine)
    assert row.status == PENDING and "429" in (row.last_error or "")

    make_available_now(engine)
    worker.drain()
    assert len(twilio_server.bodies(address)) == 1
    assert outbox_items(engine)[0].status == SENT


@pytest.mark.parametrize(
    ("code", "why"),
    [(63016, "outside the 24-hour session window"), (21211, "invalid 'To' phone number")],
)
def test_a_permanent_error_is_recorded_and_never_retried(
    client: FlaskClient,
    worker: Worker,
    engine: Engine,
    twilio_server: CountingTwilioServer,
    code: int,
    why: str,
) -> None:
    twilio_server.fail_next(Failure(400, code, why))
    learner_says(client, "Hola")

    worker.drain()
    for _ in range(5):
        make_available_now(engine)
        worker.drain()

    [row] = outbox_items(engine)
    assert (row.status, row.attempts) == (FAILED, 1)
    assert row.last_error is not None and str(code) in row.last_error
    assert twilio_server.calls() == 1 and twilio_server.messages == []


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (Failure(500, 20500), TransientSendError),
        (Failure(503, 20503), TransientSendError),
        (Failure(429, 20429), TransientSendError),
        (Failure(400, 63016), PermanentSendError),
        (Failure(400, 21211), PermanentSendError),
        (Failure(400, 21610), PermanentSendError),  # the learner replied STOP
        (Failure(401, 20003), PermanentSendError),  # wrong credentials: no retry helps
    ],
)
def test_twilio_errors_map_to_transient_or_permanent(
    twilio_server: CountingTwilioServer, failure: Failure, error: type[Exception]
) -> None:
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)
    twilio_server.fail_next(failure)

    with pytest.raises(error, match=str(failure.code)):
        sender.send("whatsapp:+34600000000", "Hola", idempotency_key="pam-1")


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connection_refused_is_transient() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=url, timeout=5)

    with pytest.raises(TransientSendError, match="unreachable"):
        sender.send("whatsapp:+34600000000", "Hola", idempotency_key="pam-1")


def test_a_timeout_is_transient() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=url, timeout=0.2)

        with pytest.raises(TransientSendError, match="unreachable"):
            sender.send("whatsapp:+34600000000", "Hola", idempotency_key="pam-1")


def test_connection_refused_leaves_the_reply_queued_for_a_retry(
    client: FlaskClient,
    pam: Pam,
    whatsapp_settings: Settings,
    engine: Engine,
) -> None:
    unreachable = whatsapp_settings.replace(
        whatsapp={"api_url": f"http://127.0.0.1:{closed_port()}"}
    )
    learner_says(client, "Hola")

    Worker(pam, senders(unreachable)).drain()

    [row] = outbox_items(engine)
    assert (row.status, row.attempts) == (PENDING, 1)
    assert "unreachable" in (row.last_error or "")


def test_many_lanes_sending_at_once_all_land_over_kept_connections(
    twilio_server: CountingTwilioServer, caplog: pytest.LogCaptureFixture
) -> None:
    """64 lanes send at the same moment through the real twilio client, over kept-alive
    connections as Twilio's are: every message lands once, and the HTTP pool keeps a
    connection for each lane (requests' default pool of 10 would discard the rest, and
    urllib3 warns of each it discards)."""
    twilio_server.httpd.RequestHandlerClass.protocol_version = "HTTP/1.1"  # keep-alive
    lanes = 64
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)
    together = threading.Barrier(lanes)
    sent: dict[int, str] = {}

    def lane(n: int) -> None:
        together.wait()
        to = f"whatsapp:+34600{n:06d}"
        sent[n] = str(sender.send(to, f"Hola {n}", idempotency_key=f"pam-{n}").platform_id)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(lanes)]
    with caplog.at_level(logging.WARNING, logger="urllib3"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert sorted(sent) == list(range(lanes)) and len(set(sent.values())) == lanes
    for n in range(lanes):
        assert twilio_server.bodies(f"whatsapp:+34600{n:06d}") == [f"Hola {n}"]
    assert twilio_server.calls() == lanes
    assert [r.getMessage() for r in caplog.records if r.name.startswith("urllib3")] == []


def test_a_number_without_the_whatsapp_prefix_sends_from_whatsapp(
    twilio_server: CountingTwilioServer,
) -> None:
    sender = TwilioSender(
        ACCOUNT_SID, AUTH_TOKEN, NUMBER.removeprefix("whatsapp:"), api_url=twilio_server.base_url
    )

    sent = sender.send("whatsapp:+34600000000", "Hola", idempotency_key="pam-1")

    assert sent.platform_id == f"SM{1:032d}"
    assert twilio_server.messages[0]["From"] == NUMBER


def test_the_profile_name_seeds_the_display_name_and_reaches_the_prompt(
    client: FlaskClient,
    worker: Worker,
    store: Store,
    fake_model: FakeChatModel,
) -> None:
    address = learner_says(client, "Hola", ProfileName="Lucía Núñez")

    worker.drain()

    learner = store.learners.find_learner(address)
    assert learner is not None and learner.display_name == "Lucía Núñez"
    [call] = fake_model.of("reply")
    assert "Lucía Núñez" in call.text


def test_a_later_profile_name_does_not_overwrite_the_first(
    client: FlaskClient, worker: Worker, store: Store
) -> None:
    wa_id = new_wa_id()
    address = learner_says(client, "Hola", wa_id, ProfileName="Lucía")
    worker.drain()
    learner_says(client, "Otra vez", wa_id, ProfileName="🌸 Lu 🌸")
    worker.drain()

    learner = store.learners.find_learner(address)
    assert learner is not None and learner.display_name == "Lucía"


def test_with_a_public_url_replies_ask_for_status_callbacks(
    client: FlaskClient,
    pam: Pam,
    whatsapp_settings: Settings,
    twilio_server: CountingTwilioServer,
) -> None:
    public = whatsapp_settings.replace(web={"public_url": "https://pam.example/"})
    address = learner_says(client, "Hola")

    Worker(pam, senders(public)).drain()

    [message] = twilio_server.messages
    assert message["To"] == address
    assert message["StatusCallback"] == "https://pam.example/whatsapp/status"


def test_service_logs_leave_out_the_twilio_clients_request_dumps(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    twilio_server: CountingTwilioServer,
) -> None:
    """`pam serve`/`pam worker` log at INFO; twilio's client logs ~11 INFO lines per send
    (request URL with the account sid, headers, response headers) unless quieted."""
    monkeypatch.setattr(logging, "basicConfig", lambda **_: None)  # keep pytest's handlers
    touched = [
        "httpx",
        "httpx2",
        "httpcore",
        "openai",
        "urllib3",
        "apscheduler",
        "twilio",
        "twilio.http_client",
    ]
    levels = {name: logging.getLogger(name).level for name in touched}
    try:
        service_logging(Settings())
        caplog.set_level(logging.INFO)
        sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)
        sender.send("whatsapp:+34600000000", "Hola", idempotency_key="pam-1")
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)

    assert len(twilio_server.messages) == 1
    assert [r.getMessage() for r in caplog.records if r.name.startswith("twilio")] == []


def test_progress_sends_media_whose_signed_link_the_web_app_serves(
    client: FlaskClient,
    engine: Engine,
    fake_model: FakeChatModel,
    whatsapp_settings: Settings,
    twilio_server: CountingTwilioServer,
) -> None:
    public = whatsapp_settings.replace(web={"public_url": "https://pam.example/"})
    pam = build(public, model=fake_model, submit=lambda w: w(), engine=engine)
    address = learner_says(client, "/progress")
    Worker(pam, senders(public)).drain()
    [message] = twilio_server.messages
    assert message["To"] == address
    assert message["Body"].startswith("Nothing to show yet")
    link = message["MediaUrl"]
    assert link.startswith("https://pam.example/charts/") and link.endswith(".png")
    served = client.get(link.removeprefix("https://pam.example"))  # no credentials
    assert served.status_code == 200 and served.mimetype == "image/png"
    assert served.data.startswith(b"\x89PNG\r\n\x1a\n")
    tampered = link.removeprefix("https://pam.example").replace(".png", "x.png")
    assert client.get(tampered).status_code == 403
