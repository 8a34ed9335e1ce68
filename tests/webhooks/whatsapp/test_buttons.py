"""Buttons on WhatsApp: quick replies through Twilio's Content API with the real twilio client
(a `twilio/quick-reply` template per button set, created once, then the reply sent with
ContentSid and the text as ContentVariables {"1": ...}); plain text where they cannot go; and
a tap coming back in Twilio's signed webhook form, its ButtonPayload the command."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot import phrases
from bot.channels import Button, ButtonSender
from bot.i18n import words_for
from bot.turn import density, forgetting
from bot.worker.worker import Worker
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, Failure, tap_form
from memory.store.message_store import Store
from tests.fakes import FakeChatModel
from tests.helpers.queues import inbox_items
from tests.webhooks.whatsapp.conftest import CountingTwilioServer, new_wa_id, post_form, text_form
from webhooks.whatsapp.buttons import MAX_BODY_CHARS, MAX_TITLE_CHARS
from webhooks.whatsapp.sender import TwilioSender

TO = "whatsapp:+34600000000"
TRANSLATE = Button("Traducir", "/translate 41")
EXPLAIN = Button("Explicar", "/explain 41")
SAY = Button("🔊 Escuchar", "/say 41")
FEWER = Button("Menos correcciones", "/corrections few")

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def sender(twilio_server: CountingTwilioServer) -> TwilioSender:
    return TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)


def test_a_reply_goes_with_quick_replies_from_one_content_template(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    assert isinstance(sender, ButtonSender)
    sent = sender.send_buttons(TO, "¡Hola!\nQué tal?", [TRANSLATE, SAY], idempotency_key="pam-1")
    assert sent.platform_id.startswith("SM")
    (template,) = twilio_server.contents.values()
    # The Content API's create request, as Twilio documents twilio/quick-reply.
    # The Content API's create request, as Twilio documents twilio/quick-reply: the body and
    # each action's id are variables ("Variable support: Yes" for both), so that one template
    # serves every reply with these buttons.
    assert template["types"]["twilio/quick-reply"] == {
        "body": "{{1}}",
        "actions": [
            {"title": "Traducir", "id": "{{2}}"},
            {"title": "🔊 Escuchar", "id": "{{3}}"},
        ],
    }
    # The samples Twilio asks for.
    assert template["variables"] == {"1": "¡Hola!", "2": "/translate 41", "3": "/say 41"}
    assert template["friendly_name"].startswith("pam_buttons_")
    (message,) = twilio_server.messages
    assert message["ContentSid"] in twilio_server.contents and "Body" not in message
    assert json.loads(message["ContentVariables"]) == {
        "1": "¡Hola!\nQué tal?",
        "2": "/translate 41",
        "3": "/say 41",
    }
    assert (message["From"], message["To"]) == (NUMBER, TO)


def test_one_template_per_button_set(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    for n in range(3):
        sender.send_buttons(TO, f"uno {n}", [TRANSLATE, SAY], idempotency_key=f"pam-{n}")
    sender.send_buttons(TO, "dos", [EXPLAIN], idempotency_key="pam-9")
    assert len(twilio_server.contents) == 2
    assert [text for text, _ in twilio_server.quick_replies(TO)] == [
        "uno 0",
        "uno 1",
        "uno 2",
        "dos",
    ]


def test_buttons_of_every_reply_share_one_template_and_name_their_own_reply(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    for reply in (41, 42, 43):
        buttons = [
            Button("Traducir", f"/translate {reply}"),
            Button("Explicar", f"/explain {reply}"),
        ]
        sender.send_buttons(TO, f"respuesta {reply}", buttons, idempotency_key=f"pam-{reply}")
    assert len(twilio_server.contents) == 1
    # Each message's taps say its own reply: the ids WhatsApp gets are filled per message.
    assert [[a["id"] for a in actions] for _, actions in twilio_server.quick_replies(TO)] == [
        ["/translate 41", "/explain 41"],
        ["/translate 42", "/explain 42"],
        ["/translate 43", "/explain 43"],
    ]


def test_at_most_three_buttons_and_titles_whatsapp_shows(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    long = Button("Una etiqueta muy, muy larga", "/help")
    sender.send_buttons(TO, "Hola", [long, TRANSLATE, EXPLAIN, FEWER], idempotency_key="pam-1")
    ((_, actions),) = twilio_server.quick_replies(TO)
    assert [a["id"] for a in actions] == ["/help", "/translate 41", "/explain 41"]
    assert actions[0]["title"] == "Una etiqueta muy, m…"
    assert len(actions[0]["title"]) == MAX_TITLE_CHARS


@pytest.mark.parametrize(
    "why",
    ["text-too-long", "content-api-fails", "no-button-fits"],
)
def test_where_buttons_cannot_go_the_text_goes_alone(
    sender: TwilioSender, twilio_server: CountingTwilioServer, why: str
) -> None:
    text, buttons = "Hola", [TRANSLATE]
    if why == "text-too-long":
        text = "a" * (MAX_BODY_CHARS + 1)
    elif why == "content-api-fails":
        twilio_server.fail_content_next(Failure(400, 20001, "Invalid content"))
    else:
        buttons = [Button("Demasiado", "/translate " + "x" * 300)]
    sender.send_buttons(TO, text, buttons, idempotency_key="pam-1")
    assert twilio_server.bodies(TO) == [text]
    assert twilio_server.quick_replies(TO) == []


def test_a_failed_template_is_tried_again_with_the_next_reply(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    twilio_server.fail_content_next(Failure(503, 20500, "Service unavailable"))
    sender.send_buttons(TO, "uno", [TRANSLATE], idempotency_key="pam-1")
    sender.send_buttons(TO, "dos", [TRANSLATE], idempotency_key="pam-2")
    assert twilio_server.bodies(TO) == ["uno", "dos"]  # what the learner reads
    assert [text for text, _ in twilio_server.quick_replies(TO)] == ["dos"]


# -- a tap coming back -------------------------------------------------------------------------


def test_a_tap_is_stored_as_the_buttons_command(client: FlaskClient, engine: Engine) -> None:
    wa_id = new_wa_id()
    form = tap_form(f"whatsapp:+{wa_id}", "Traducir", "/translate 41")
    assert post_form(client, form).status_code == 200
    (item,) = inbox_items(engine)
    assert (item.address, item.kind, item.text) == (f"whatsapp:+{wa_id}", "text", "/translate 41")
    assert item.platform_id == form["MessageSid"]


def test_a_redelivered_tap_is_stored_once(client: FlaskClient, engine: Engine) -> None:
    form = tap_form(f"whatsapp:+{new_wa_id()}", "Sí, borrar", "/forget yes 7f3a")
    for _ in range(2):
        post_form(client, form)
    assert [i.text for i in inbox_items(engine)] == ["/forget yes 7f3a"]


@sqlite_only
def test_a_tap_with_a_forged_signature_is_refused(client: FlaskClient, engine: Engine) -> None:
    form = tap_form(f"whatsapp:+{new_wa_id()}", "Sí, borrar", "/forget yes 7f3a")
    assert post_form(client, form, signature="bm9wZQ==").status_code == 403
    assert inbox_items(engine) == []


@sqlite_only
def test_a_message_without_a_payload_is_its_body(client: FlaskClient, engine: Engine) -> None:
    post_form(client, text_form(new_wa_id(), "Traducir") | {"ButtonPayload": ""})
    assert [i.text for i in inbox_items(engine)] == ["Traducir"]


def test_a_tap_is_answered_like_the_command_typed(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    twilio_server: CountingTwilioServer,
    fake_model: FakeChatModel,
) -> None:
    wa_id = new_wa_id()
    post_form(client, tap_form(f"whatsapp:+{wa_id}", "Ayuda", "/help"))
    worker.drain()
    (answer,) = twilio_server.bodies(f"whatsapp:+{wa_id}")
    assert "/help" in answer
    assert fake_model.calls == []


def test_forget_asks_with_quick_replies_and_a_yes_tap_erases_once(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    twilio_server: CountingTwilioServer,
    fake_model: FakeChatModel,
) -> None:
    """/forget's question goes as quick replies in the learner's language (titles WhatsApp
    shows whole); tapping "Sí, bórralo todo" erases, and the same tap again (Twilio redelivers
    it, or the learner taps twice) erases nothing more."""
    wa_id = new_wa_id("34")  # a Spanish number: Pam's words are in Spanish even once forgotten
    address = f"whatsapp:+{wa_id}"
    post_form(client, text_form(wa_id, "/language German Spanish"))
    post_form(client, text_form(wa_id, "/forget"))
    worker.drain()
    question, actions = twilio_server.quick_replies(address)[-1]
    assert question.startswith(words_for("Spanish", forgetting.DOMAIN)(forgetting.ASK))
    assert [a["title"] for a in actions] == ["Sí, bórralo todo", "No, guárdalo"]
    assert all(len(a["title"]) <= MAX_TITLE_CHARS for a in actions)
    yes = actions[0]
    assert worker.pam.store.learners.find_learner(address) is not None

    post_form(client, tap_form(address, yes["title"], yes["id"]))
    post_form(client, tap_form(address, yes["title"], yes["id"]))  # tapped again
    worker.drain()

    done, again = twilio_server.bodies(address)[-2:]
    assert done == phrases.said(phrases.FORGOTTEN, "Spanish")
    assert again == words_for("Spanish", forgetting.DOMAIN)(forgetting.STALE)
    assert worker.pam.store.learners.find_learner(address) is None
    assert fake_model.calls == []


def test_a_fewer_corrections_tap_sets_few_in_the_learners_language(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    twilio_server: CountingTwilioServer,
    fake_model: FakeChatModel,
) -> None:
    wa_id = new_wa_id("34")  # a Spanish number: Pam's words are guessed Spanish
    post_form(client, tap_form(f"whatsapp:+{wa_id}", FEWER.label, FEWER.command))
    worker.drain()
    (answer,) = twilio_server.bodies(f"whatsapp:+{wa_id}")
    assert answer == words_for("Spanish", density.DOMAIN)(density.CHOSEN["few"])
    learner = Store(engine).learners.find_learner(f"whatsapp:+{wa_id}")
    assert learner is not None and learner.corrections == "few"
    assert fake_model.calls == []


def test_a_new_process_finds_the_templates_made_before_and_makes_no_new_one(
    twilio_server: CountingTwilioServer,
) -> None:
    """A template is named by a hash of its actions: a restarted process reads the account's
    templates once and sends with the one made before."""
    first = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)
    first.send_buttons(TO, "uno", [TRANSLATE, SAY], idempotency_key="pam-1")
    (sid,) = twilio_server.contents
    again = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio_server.base_url)
    again.send_buttons(TO, "dos", [TRANSLATE, SAY], idempotency_key="pam-2")
    again.send_buttons(TO, "tres", [EXPLAIN], idempotency_key="pam-3")
    again.send_buttons(TO, "cuatro", [FEWER], idempotency_key="pam-4")
    assert [m["ContentSid"] for m in twilio_server.messages][:2] == [sid, sid]
    assert len(twilio_server.contents) == 3
    assert twilio_server.content_lists == 2  # once per process


def test_a_list_that_fails_leaves_the_template_to_be_made(
    sender: TwilioSender, twilio_server: CountingTwilioServer
) -> None:
    twilio_server.fail_content_next(Failure(500, 20500, "Internal error"), listing=True)
    sender.send_buttons(TO, "uno", [TRANSLATE], idempotency_key="pam-1")
    assert [text for text, _ in twilio_server.quick_replies(TO)] == ["uno"]
