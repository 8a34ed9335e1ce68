"""Buttons on Telegram: the inline keyboard the real PTB Bot sends under a reply (recorded by
the fake Bot API), and a tap coming back — a real callback_query update posted to the webhook
or fetched by polling — stored as the command typed by the user who tapped, deduplicated by
the callback query's id, and answered (answerCallbackQuery) so the button stops spinning."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from bot.channels import Button, ButtonSender
from bot.i18n import words_for
from bot.turn import density
from bot.worker.worker import Worker
from loopback.telegram_server import Failure, TelegramServer
from memory.queue.inbox import Inbox
from memory.store.message_store import Store
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.queues import inbox_items
from tests.support import wait_until
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.conftest import post_update
from tests.webhooks.telegram.test_polling import Poller, stored
from webhooks.telegram.buttons import MAX_CALLBACK_BYTES, TAP_PREFIX, fits, keyboard
from webhooks.telegram.client import UPDATE_TYPES, TelegramClient

Json = dict[str, Any]
TRANSLATE = Button("Translate", "/translate 41")
EXPLAIN = Button("Explain", "/explain 41")
SAY = Button("🔊 Say it", "/say 41")
FEWER = Button("Fewer corrections", "/corrections few")

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def tap(user: Json, chat: Json, data: str | None = "/help", **query: Any) -> Json:
    """A callback_query update as the Bot API sends it (Update, CallbackQuery, Message): the
    `user` tapped a button with callback `data` under Pam's message in `chat`."""
    body: Json = {
        "id": str(4_382_000_000_000_000_000 + uuid.uuid4().int % 10**18),
        "from": user,
        "message": {
            "message_id": 1201,
            "from": u.PAM,
            "chat": chat,
            "date": u.DATE,
            "text": "¡Hola! ¿Qué tal?",
            "reply_markup": {"inline_keyboard": [[{"text": "Help", "callback_data": data}]]},
        },
        "chat_instance": "-7236549873125412345",
    }
    if data is not None:
        body["data"] = data
    return u.update(callback_query=body | query)


# -- the keyboard under a reply ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("buttons", "rows"),
    [
        ((TRANSLATE,), [["/translate 41"]]),
        ((TRANSLATE, EXPLAIN, SAY), [["/translate 41", "/explain 41", "/say 41"]]),
        (
            (TRANSLATE, EXPLAIN, SAY, FEWER),
            [["/translate 41", "/explain 41"], ["/say 41", "/corrections few"]],
        ),
    ],
    ids=["one", "one-row-of-three", "rows-of-two"],
)
def test_buttons_go_under_the_message_as_an_inline_keyboard(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    buttons: tuple[Button, ...],
    rows: list[list[str]],
) -> None:
    assert isinstance(telegram_client, ButtonSender)
    telegram_client.send_buttons("777001", "¡Hola!", buttons, idempotency_key="pam-1")
    (keyboard,) = telegram_server.keyboards(777001)
    assert [[b["callback_data"] for b in row] for row in keyboard] == rows
    labels = [b["text"] for row in keyboard for b in row]
    assert labels == [b.label for b in buttons]
    assert telegram_server.sent_texts(777001) == ["¡Hola!"]


def test_a_command_too_long_for_callback_data_is_left_out(
    telegram_client: TelegramClient, telegram_server: TelegramServer
) -> None:
    """callback_data holds at most 64 bytes: a longer command is never cut (a cut command
    would say something else), its button is left out; typed, it still works."""
    long = Button("Long", "/translate " + "ñ" * 30)  # 11 + 60 bytes
    assert len(long.command.encode()) > MAX_CALLBACK_BYTES
    exact = Button("Exact", "/x " + "a" * (MAX_CALLBACK_BYTES - 3))
    telegram_client.send_buttons("777001", "Hola", [long, exact], idempotency_key="pam-1")
    (keyboard,) = telegram_server.keyboards(777001)
    assert keyboard == [[{"text": "Exact", "callback_data": exact.command}]]
    telegram_client.send_buttons("777001", "Hola", [long], idempotency_key="pam-2")
    assert len(telegram_server.keyboards(777001)) == 1  # the second message has no keyboard
    (second,) = [c for c in telegram_server.of("sendMessage") if "reply_markup" not in c.params]
    assert second.params["text"] == "Hola"


def test_the_keyboard_stays_when_telegram_refuses_the_formatting(
    telegram_client: TelegramClient, telegram_server: TelegramServer
) -> None:
    telegram_server.fail_next(
        Failure("sendMessage", 400, "Bad Request: can't parse entities: unsupported tag")
    )
    telegram_client.send_buttons("777001", "a < b", [TRANSLATE], idempotency_key="pam-1")
    (keyboard,) = telegram_server.keyboards(777001)
    assert keyboard[0][0]["callback_data"] == TRANSLATE.command
    assert telegram_server.sent_texts(777001) == ["a < b"]  # plain, after the refusal


def test_taps_are_among_the_updates_pam_asks_for() -> None:
    assert "callback_query" in UPDATE_TYPES


# -- a tap coming back -------------------------------------------------------------------------


def test_a_tap_is_stored_as_the_command_of_the_user_who_tapped_and_answered(
    client: FlaskClient, engine: Engine
) -> None:
    me = u.learner()
    update = tap(me, u.private_chat(me), "/translate 41")
    response = post_update(client, update)
    assert response.status_code == 200
    # The webhook's answer is Telegram's answerCallbackQuery for this tap (Bot API: making
    # requests when getting updates): the button stops spinning.
    query_id = update["callback_query"]["id"]
    assert response.get_json() == {
        "method": "answerCallbackQuery",
        "callback_query_id": query_id,
    }
    (item,) = inbox_items(engine)
    assert (item.address, item.chat_id) == (f"telegram:{me['id']}", str(me["id"]))
    assert (item.kind, item.text) == ("text", "/translate 41")
    assert item.platform_id == f"{TAP_PREFIX}{query_id}"
    assert item.display_name == me["first_name"]


def test_a_redelivered_tap_is_stored_once(client: FlaskClient, engine: Engine) -> None:
    me = u.learner()
    update = tap(me, u.private_chat(me), "/forget yes 7f3a")
    for _ in range(3):
        assert post_update(client, update).status_code == 200
    assert [i.text for i in inbox_items(engine)] == ["/forget yes 7f3a"]


def test_a_tap_in_a_group_is_the_tapping_members_own(client: FlaskClient, engine: Engine) -> None:
    """Anyone in a group can tap a button under Pam's reply to someone else: the tap is that
    member's own command, for their own learner of the group, never the first learner's."""
    group, tapper = u.group_chat(), u.learner("Aiko")
    post_update(client, tap(tapper, group, "/forget yes 7f3a"))
    (item,) = inbox_items(engine)
    assert item.address == f"telegram:{tapper['id']}@{group['id']}"
    assert item.chat_id == str(group["id"])


def test_a_tap_in_a_forum_topic_is_answered_in_that_topic(
    client: FlaskClient, engine: Engine
) -> None:
    group, me = u.group_chat(), u.learner()
    group["is_forum"] = True
    update = tap(me, group)
    update["callback_query"]["message"] |= {"message_thread_id": 42, "is_topic_message": True}
    post_update(client, update)
    (item,) = inbox_items(engine)
    assert item.chat_id == f"{group['id']}:42"


def test_a_tap_under_a_message_too_old_to_read_still_counts(
    client: FlaskClient, engine: Engine
) -> None:
    """Telegram sends an InaccessibleMessage (date 0) for a message older than 48 hours: the
    chat is still there."""
    me = u.learner()
    update = tap(me, u.private_chat(me), "/help")
    update["callback_query"]["message"] = {
        "message_id": 1201,
        "chat": u.private_chat(me),
        "date": 0,
    }
    post_update(client, update)
    assert [i.text for i in inbox_items(engine)] == ["/help"]


@sqlite_only
@pytest.mark.parametrize("what", ["game", "inline", "bot"])
def test_a_callback_that_is_no_tap_on_pams_message_is_answered_and_not_stored(
    client: FlaskClient, engine: Engine, what: str
) -> None:
    me = u.learner()
    if what == "game":
        update = tap(me, u.private_chat(me), None, game_short_name="quiz")
    elif what == "inline":
        update = tap(me, u.private_chat(me), "/help", inline_message_id="AAAAAJx")
        del update["callback_query"]["message"]
    else:
        update = tap(u.OTHER_BOT, u.private_chat(me), "/help")
    response = post_update(client, update)
    assert response.get_json()["method"] == "answerCallbackQuery"
    assert inbox_items(engine) == []


@sqlite_only
@pytest.mark.parametrize(
    "broken",
    [{"from": {"id": "777001", "is_bot": False, "first_name": "X"}}, {"data": ["/help"]}],
    ids=["user-id-a-string", "data-a-list"],
)
def test_a_malformed_tap_is_acknowledged_and_not_stored(
    client: FlaskClient, engine: Engine, broken: Json
) -> None:
    me = u.learner()
    update = tap(me, u.private_chat(me))
    update["callback_query"] |= broken
    response = post_update(client, update)
    assert response.status_code == 200 and response.get_json()["status"] == "ignored"
    assert inbox_items(engine) == []


def test_a_tap_is_one_more_message_answered_in_order(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
) -> None:
    """A message, then a tap on /help: both answered, in order; the tap costs no model call."""
    me = u.learner()
    post_update(client, u.text(me, "Hola"))
    post_update(client, tap(me, u.private_chat(me), "/help"))
    worker.drain()
    texts = telegram_server.sent_texts(me["id"])
    assert len(texts) == 2 and "/help" in texts[1]
    assert len(fake_model.of("reply")) == 1  # the message's; the tap's answer is a command's


def test_the_fewer_corrections_tap_sets_few_and_the_next_reply_shows_one_correction(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
) -> None:
    """The button under a corrected reply sends /corrections few: answered in the learner's
    language without the model, and from then on a reply shows one correction of those the
    model found (all of them stored)."""
    me = u.learner()
    mistakes = [
        {"original": "yo es", "corrected": "yo soy", "category": "conjugation"},
        {"original": "un hermanos", "corrected": "un hermano", "category": "grammar"},
    ]
    post_update(client, u.command(me, "/language Spanish German"))
    fake_model.queue("reply", reply_json("¡Hola, Lena! ¿Y tu hermano?", mistakes))
    post_update(client, u.text(me, "Hola, yo es Lena y tengo un hermanos"))
    worker.drain()
    assert telegram_server.sent_texts(me["id"])[-1].count("✏️") == 2
    keyboard = telegram_server.keyboards(me["id"])[-1]
    (fewer,) = [b for row in keyboard for b in row if b["callback_data"] == "/corrections few"]
    assert fewer["text"] == "Weniger Korrekturen"
    calls = len(fake_model.calls)

    post_update(client, tap(me, u.private_chat(me), fewer["callback_data"]))
    worker.drain()

    assert telegram_server.sent_texts(me["id"])[-1] == words_for("German", density.DOMAIN)(
        density.CHOSEN["few"]
    )
    assert len(fake_model.calls) == calls  # a setting: no model call
    learner = Store(engine).learners.find_learner(f"telegram:{me['id']}")
    assert learner is not None and learner.corrections == "few"

    fake_model.queue("reply", reply_json("¿Cómo se llama tu hermano?", mistakes))
    post_update(client, u.text(me, "Yo es Lena, tengo un hermanos mayor"))
    worker.drain()
    latest = telegram_server.sent_texts(me["id"])[-1]
    assert latest.count("✏️") == 1 and "<s>yo es</s>" in latest  # Telegram formats it
    assert len(Store(engine).ledger.corrections(learner.id)) == 4
    after = [b["callback_data"] for b in telegram_server.keyboards(me["id"])[-1][0]]
    assert "/corrections few" not in after


# -- polling -----------------------------------------------------------------------------------


def test_polling_stores_a_tap_and_answers_its_callback_query(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    engine: Engine,
) -> None:
    me = u.learner()
    update = telegram_server.tap(me, u.private_chat(me), 1201, "/help")
    query_id = update["callback_query"]["id"]
    with Poller(telegram_client, Inbox(engine, 60)):
        wait_until(lambda: bool(telegram_server.of("answerCallbackQuery")), "the tap answered")
    assert stored(engine, f"telegram:{me['id']}") == [(f"{TAP_PREFIX}{query_id}", "text", "/help")]
    (answer,) = telegram_server.of("answerCallbackQuery")
    assert str(answer.params["callback_query_id"]) == query_id


# -- the keyboard's layout, for any buttons ------------------------------------------------------


@given(
    st.lists(
        st.builds(Button, st.text(min_size=1, max_size=12), st.text(min_size=0, max_size=40)),
        max_size=7,
    )
)
def test_a_keyboard_holds_every_button_that_fits_in_order_in_short_rows(
    buttons: list[Button],
) -> None:
    markup = keyboard(buttons)
    fitting = [b for b in buttons if fits(b)]
    if not fitting:
        assert markup is None
        return
    assert markup is not None
    rows = markup.inline_keyboard
    shown = [(b.text, b.callback_data) for row in rows for b in row]
    assert shown == [(b.label, b.command) for b in fitting]
    assert all(len(b.callback_data.encode()) <= MAX_CALLBACK_BYTES for row in rows for b in row)
    assert len(rows) == 1 if len(fitting) <= 3 else all(len(row) <= 2 for row in rows)
