"""`POST /telegram/webhook` with real Telegram update JSON: what each kind of update writes to
the inbox, what the learner then receives through the real PTB Bot, authentication,
deduplication by update_id, and malformed bodies."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot import phrases
from bot.turn import density
from bot.turn.commands import Command, parse_command
from bot.worker.worker import Worker
from loopback.telegram_server import USERNAME, TelegramServer
from tests.fakes import DEFAULT_REPLIES, FakeChatModel, reply_json
from tests.helpers.queues import inbox_items, queue_rows
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.conftest import SECRET, WEBHOOK, post_update
from webhooks.app import MAX_BODY_BYTES, create_app
from webhooks.settings import Settings
from webhooks.telegram.route import SECRET_HEADER

Json = dict[str, Any]
DEFAULT_REPLY = "¡Qué bien! ¿Y qué más hiciste?"  # the fake model's answer

# Authentication and parsing happen before the database is touched: those tests run on SQLite
# only, which keeps the Postgres run short.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def html(plain: str) -> str:
    """`plain` as Telegram HTML with no formatting: only <, > and & escaped."""
    return plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The test users' app is in English: Pam says she guessed it (issue 29).
WELCOME = html(
    phrases.welcome(
        "English",
        f"{phrases.NEEDS_LANGUAGE}\nVoice replies are off (/voice on to hear me).\n"
        f"{density.LINES[density.NORMAL]}",
        guessed=True,
    )
)
HELP = html(phrases.help_text(None))
VOICE_ANSWER = phrases.NOT_VOICE
MEDIA_ANSWER = phrases.NOT_MEDIA


@dataclass(frozen=True)
class Case:
    """An update for Pam from a fresh learner, the kind and text the inbox must then hold,
    and the one message the learner must receive."""

    make: Callable[[Json, Json], Json]  # (learner, group chat) → update
    kind: str
    text: str = ""
    in_group: bool = False
    reply: str = ""
    command: str | None = None  # for commands: the text may be "/help" or "/help@PamTestBot"


ACCEPTED = {
    # private chat
    "private text": Case(
        lambda me, g: u.text(me, "Hola, ¿qué tal?"), "text", "Hola, ¿qué tal?", reply=DEFAULT_REPLY
    ),
    "/start": Case(lambda me, g: u.command(me, "/start"), "text", "/start", reply=WELCOME),
    "/help@PamTestBot": Case(
        lambda me, g: u.command(me, f"/help@{USERNAME}"), "text", f"/help@{USERNAME}", reply=HELP
    ),
    "voice": Case(lambda me, g: u.voice(me), "voice", reply=VOICE_ANSWER),
    "audio": Case(lambda me, g: u.audio(me), "voice", reply=VOICE_ANSWER),
    "video_note": Case(lambda me, g: u.video_note(me), "voice", reply=VOICE_ANSWER),
    "photo": Case(lambda me, g: u.photo(me), "media", reply=MEDIA_ANSWER),
    # A caption is answered like a text, after the note that Pam cannot see the picture.
    "photo with caption": Case(
        lambda me, g: u.photo(me, "Mi perro en la playa"),
        "media",
        "Mi perro en la playa",
        reply=f"{MEDIA_ANSWER}\n\n{DEFAULT_REPLY}",
    ),
    "sticker": Case(lambda me, g: u.sticker(me), "media", reply=MEDIA_ANSWER),
    "document with caption": Case(
        lambda me, g: u.document(me),
        "media",
        "Mis deberes",
        reply=f"{MEDIA_ANSWER}\n\n{DEFAULT_REPLY}",
    ),
    "location": Case(lambda me, g: u.location(me), "media", reply=MEDIA_ANSWER),
    "venue": Case(lambda me, g: u.venue(me), "media", reply=MEDIA_ANSWER),
    "contact": Case(lambda me, g: u.contact(me), "media", reply=MEDIA_ANSWER),
    "poll": Case(lambda me, g: u.poll(me), "media", reply=MEDIA_ANSWER),
    "dice": Case(lambda me, g: u.dice(me), "media", reply=MEDIA_ANSWER),
    # groups: only what is addressed to Pam
    "group mention": Case(
        lambda me, g: u.mention(me, g, f"@{USERNAME} ¿cómo se dice «Feierabend»?"),
        "text",
        "¿cómo se dice «Feierabend»?",
        in_group=True,
        reply=DEFAULT_REPLY,
    ),
    "group mention, lower case": Case(
        lambda me, g: u.mention(me, g, f"@{USERNAME.lower()} hola", USERNAME.lower()),
        "text",
        "hola",
        in_group=True,
        reply=DEFAULT_REPLY,
    ),
    "group reply to Pam": Case(
        lambda me, g: u.reply_to_pam(me, g, "Fui al cine con mi hermana"),
        "text",
        "Fui al cine con mi hermana",
        in_group=True,
        reply=DEFAULT_REPLY,
    ),
    "group text_mention": Case(
        lambda me, g: u.text_mention(me, g, "Pam, ¿me ayudas con el subjuntivo?", "Pam"),
        "text",
        "Pam, ¿me ayudas con el subjuntivo?",
        in_group=True,
        reply=DEFAULT_REPLY,
    ),
    "group /help@PamTestBot": Case(
        lambda me, g: u.command(me, f"/help@{USERNAME}", g),
        "text",
        in_group=True,
        reply=HELP,
        command="help",
    ),
    "basic group mention": Case(
        lambda me, g: u.mention(me, u.group_chat("group"), f"@{USERNAME} hola"),
        "text",
        "hola",
        in_group=True,
        reply=DEFAULT_REPLY,
    ),
    "group photo, caption mentioning Pam": Case(
        lambda me, g: u.photo(me, f"@{USERNAME} ¿qué es esto?", g),
        "media",
        "¿qué es esto?",
        in_group=True,
        reply=f"{MEDIA_ANSWER}\n\n{DEFAULT_REPLY}",
    ),
}

IGNORED = {
    "edited_message": lambda me, g: u.edited_message(me),
    "channel_post": lambda me, g: u.channel_post(),
    "edited_channel_post": lambda me, g: u.edited_channel_post(),
    "my_chat_member: blocked": lambda me, g: u.my_chat_member(me, "member", "kicked"),
    "my_chat_member: unblocked": lambda me, g: u.my_chat_member(me, "kicked", "member"),
    "another bot": lambda me, g: u.from_other_bot(g),
    "service: new_chat_members": lambda me, g: u.new_chat_members(me, g),
    "service: pinned_message": lambda me, g: u.pinned_message(me),
    "group text not for Pam": lambda me, g: u.text(me, "¿Alguien viene al cine?", g),
    "group mention of someone else": lambda me, g: u.mention(
        me, g, f"@{USERNAME}Fans hola", f"{USERNAME}Fans"
    ),
    "group /help@OtherBot": lambda me, g: u.command(me, "/help@OtherBot", g),
    "group /help without a bot name": lambda me, g: u.command(me, "/help", g),
    "group reply to someone else": lambda me, g: u.text(
        me, "¡Sí!", g, reply_to_message=u.message(u.learner("Marta"), g, text="¿Vamos?")
    ),
    "a channel's post forwarded into its group": lambda me, g: u.automatic_forward(g),
    # Only a user's own chat is private: another "private" chat is read as a group's.
    "a private chat not the user's": lambda me, g: u.text(
        me, "Hola", u.private_chat(u.learner("Marta"))
    ),
}


def sent_messages(server: TelegramServer) -> list[tuple[str, str, str | None]]:
    """(chat_id, text, parse_mode) of every message the learner received."""
    return [
        (str(c.params["chat_id"]), c.params["text"], c.params.get("parse_mode"))
        for c in server.of("sendMessage")
    ]


# -- what each update writes, and what the learner receives --------------------------------


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_an_update_for_pam_is_stored_and_answered(
    name: str,
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    woken: list[int],
) -> None:
    case = ACCEPTED[name]
    me, group = u.learner(), u.group_chat()
    update = case.make(me, group)
    chat_id = str(update["message"]["chat"]["id"])

    response = post_update(client, update)

    assert response.status_code == 200
    assert response.get_json() == {"status": "accepted"}
    [item] = inbox_items(engine)
    assert (item.channel, item.platform_id) == ("telegram", str(update["update_id"]))
    if case.command is None:
        assert (item.kind, item.text) == (case.kind, case.text)
    else:
        assert (item.kind, parse_command(item.text)) == (case.kind, Command(case.command, []))
    # In a group the learner is the member of that group: their private memory stays out.
    member = f"@{chat_id}" if case.in_group else ""
    assert item.address == f"telegram:{me['id']}{member}"
    assert item.chat_id == chat_id
    assert item.chat_id.startswith("-") == case.in_group
    assert item.display_name == me["first_name"]
    assert woken == [1]

    worker.drain()

    assert sent_messages(telegram_server) == [(chat_id, case.reply, "HTML")]
    typing = [
        (str(c.params["chat_id"]), c.params["action"]) for c in telegram_server.of("sendChatAction")
    ]
    # Words to answer (a text, or a photo's caption) make a turn, with "typing…"; media
    # without words gets its note at once.
    has_words = case.kind == "text" or bool(item.text.strip())
    assert typing == ([(chat_id, "typing")] if has_words else [])


@pytest.mark.parametrize("name", list(IGNORED))
def test_an_update_ignored_by_design_writes_nothing_and_gets_no_answer(
    name: str,
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    woken: list[int],
) -> None:
    update = IGNORED[name](u.learner(), u.group_chat())

    response = post_update(client, update)

    assert response.status_code == 200
    assert response.get_json() == {"status": "ignored"}
    assert queue_rows(engine) == 0
    assert woken == []
    assert worker.drain() == 0
    assert telegram_server.of("sendMessage") == []
    assert telegram_server.of("sendChatAction") == []


def test_a_reply_with_corrections_arrives_as_telegram_html(
    client: FlaskClient,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
) -> None:
    fake_model.queue(
        "reply",
        reply_json(
            "¡Encantada, Lena! <3 ¿Trabajas & estudias?",
            [
                {
                    "original": "yo es",
                    "corrected": "yo soy",
                    "explanation": "con «yo», ser → soy",
                    "category": "conjugation",
                }
            ],
        ),
    )
    me = u.learner()
    post_update(client, u.text(me, "Hola, yo es Lena"))

    worker.drain()

    assert sent_messages(telegram_server) == [
        (
            str(me["id"]),
            "¡Encantada, Lena! &lt;3 ¿Trabajas &amp; estudias?\n\n"
            "✏️ <s>yo es</s> → <b>yo soy</b> — <i>con «yo», ser → soy</i>",
            "HTML",
        )
    ]


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (u.voice, "voice"),
        (u.audio, "voice"),
        (u.video_note, "voice"),
        (u.photo, "media"),
        (u.sticker, "media"),
        (u.location, "media"),
    ],
)
def test_what_pam_cannot_read_is_answered_in_the_native_language(
    make: Callable[[Json], Json],
    kind: str,
    client: FlaskClient,
    worker: Worker,
    telegram_server: TelegramServer,
) -> None:
    me = u.learner()
    post_update(client, u.command(me, "/language Spanish German"))
    post_update(client, make(me))

    worker.drain()

    confirmation, answer = telegram_server.sent_texts(me["id"])
    assert "Spanisch" in confirmation  # the settings line, in German
    assert answer == phrases.not_text(kind, "German")
    assert answer != phrases.not_text(kind, None)
    assert len(telegram_server.of("sendChatAction")) == 1, "typing… only for the command"


# -- authentication ------------------------------------------------------------------------


@sqlite_only
@pytest.mark.parametrize(
    "secret",
    [
        None,
        "",
        "wrong",
        SECRET.upper(),
        SECRET.lower(),
        SECRET.swapcase(),
        SECRET + "x",
        "x" + SECRET,
        SECRET[:-1],
        SECRET[1:],
        SECRET * 2,
        "sécret-ünïcode",
    ],
    ids=lambda s: repr(s),
)
def test_a_missing_or_wrong_secret_is_403_and_writes_nothing(
    secret: str | None,
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    woken: list[int],
) -> None:
    me, group = u.learner(), u.group_chat()
    for update in (u.text(me, "Hola"), u.voice(me), u.mention(me, group, f"@{USERNAME} hola")):
        response = post_update(client, update, secret=secret)
        assert response.status_code == 403
        assert response.is_json and isinstance(response.get_json()["error"], str)
    assert queue_rows(engine) == 0
    assert woken == []
    assert worker.drain() == 0
    assert telegram_server.calls == [], "not even getMe for a forged request"


@sqlite_only
def test_a_wrong_secret_is_403_before_the_body_is_read(client: FlaskClient, engine: Engine) -> None:
    response = client.post(
        WEBHOOK, data="{not json", content_type="application/json", headers={SECRET_HEADER: "no"}
    )
    assert response.status_code == 403
    assert queue_rows(engine) == 0


@sqlite_only
@pytest.mark.parametrize(
    "unset",
    [
        {"bot_token": None},
        {"bot_token": ""},
        {"webhook_secret": None},
        {"bot_token": None, "webhook_secret": None},
    ],
    ids=["no token", "empty token", "no secret", "neither"],
)
def test_the_webhook_is_404_when_telegram_is_not_configured(
    unset: dict[str, Any],
    telegram_settings: Settings,
    engine: Engine,
    telegram_server: TelegramServer,
) -> None:
    app = create_app(telegram_settings.replace(telegram=unset), engine=engine)
    client = app.test_client()
    for secret in (SECRET, None, "wrong"):
        response = post_update(client, u.text(u.learner(), "Hola"), secret=secret)
        assert response.status_code == 404
        assert response.is_json
    app.extensions["pam"].close()
    assert queue_rows(engine) == 0
    assert telegram_server.calls == []


# -- deduplication -------------------------------------------------------------------------


@pytest.mark.parametrize("make", [u.text, u.voice], ids=["text", "voice"])
def test_a_redelivered_update_is_stored_once_and_answered_once(
    make: Callable[..., Json],
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    woken: list[int],
) -> None:
    me = u.learner()
    update = make(me, "Hola") if make is u.text else make(me)

    statuses = [post_update(client, update).get_json()["status"] for _ in range(2)]
    worker.drain()
    statuses.append(post_update(client, update).get_json()["status"])  # after it was answered
    worker.drain()

    assert statuses == ["accepted", "duplicate", "duplicate"]
    assert len(inbox_items(engine)) == 1
    assert woken == [1]
    assert len(telegram_server.sent_texts(me["id"])) == 1
    assert len(fake_model.of("reply")) == (1 if make is u.text else 0)


def test_update_ids_that_do_not_increase_are_each_accepted_once(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    me = u.learner()
    sent = {}
    for update_id, words in ((10, "uno"), (5, "dos"), (7, "tres")):
        update = u.text(me, words)
        update["update_id"] = update_id
        sent[update_id] = update
        assert post_update(client, update).get_json() == {"status": "accepted"}
    for update in sent.values():  # every one of them is still recognised
        assert post_update(client, update).get_json() == {"status": "duplicate"}

    items = inbox_items(engine)
    assert [(i.platform_id, i.text) for i in items] == [("10", "uno"), ("5", "dos"), ("7", "tres")]
    worker.drain()
    # The fake never repeats Pam's previous reply (a repeat is no reply): it alternates.
    first, second = DEFAULT_REPLIES
    assert telegram_server.sent_texts(me["id"]) == [first, second, first]


# -- malformed bodies ----------------------------------------------------------------------

_ME = u.learner()
_GOOD = u.text(_ME, "Hola")["message"]
_GROUP = u.group_chat()


def _without(body: Json, key: str) -> Json:
    return {k: v for k, v in body.items() if k != key}


NOT_AN_UPDATE: dict[str, Any] = {
    "JSON array": [{"update_id": 1, "message": _GOOD}],
    "JSON string": "update",
    "JSON null": None,
    "JSON number": 42,
    "empty object": {},
    "missing update_id": {"message": _GOOD},
    "update_id a string": {"update_id": "10001", "message": _GOOD},
    "update_id null": {"update_id": None, "message": _GOOD},
    "update_id a float": {"update_id": 10001.5, "message": _GOOD},
    "update_id true": {"update_id": True, "message": _GOOD},
}
# Updates (an integer update_id) that python-telegram-bot cannot read, or that carry a field
# of the wrong type: Telegram would redeliver them after a 4xx, so they get a 200.
UNREADABLE: dict[str, Any] = {
    "message a string": {"update_id": 1, "message": "Hola"},
    "message a list": {"update_id": 1, "message": [_GOOD]},
    "message empty": {"update_id": 1, "message": {}},
    "message without chat": {"update_id": 1, "message": _without(_GOOD, "chat")},
    "message without message_id": {"update_id": 1, "message": _without(_GOOD, "message_id")},
    "message date a string": {"update_id": 1, "message": {**_GOOD, "date": "yesterday"}},
    "message from a string": {"update_id": 1, "message": {**_GOOD, "from": "Lena"}},
    "message entities a string": {"update_id": 1, "message": {**_GOOD, "entities": "bold"}},
    "message_thread_id a string": {
        "update_id": 1,
        "message": {**_GOOD, "message_thread_id": "7", "is_topic_message": True},
    },
    "message text a number": {"update_id": 1, "message": {**_GOOD, "text": 42}},
    "message text a list": {"update_id": 1, "message": {**_GOOD, "text": ["Hola"]}},
    "message text an object": {"update_id": 1, "message": {**_GOOD, "text": {"es": "Hola"}}},
    "message voice a string": {
        "update_id": 1,
        "message": {**_without(_GOOD, "text"), "voice": "x"},
    },
    "first_name a number": {
        "update_id": 1,
        "message": {**_GOOD, "from": {**_GOOD["from"], "first_name": 7}},
    },
    "from id a string": {
        "update_id": 1,
        "message": {**_GOOD, "from": {**_GOOD["from"], "id": "x"}},
    },
    "chat id a string": {
        "update_id": 1,
        "message": {**_GOOD, "chat": {**_GOOD["chat"], "id": "Lena"}},
    },
    "group mention offset a string": {
        "update_id": 1,
        "message": {
            **_GOOD,
            "chat": _GROUP,
            "entities": [{"type": "mention", "offset": "0", "length": 11}],
        },
    },
}


def raw_post(client: FlaskClient, data: str, content_type: str = "application/json") -> Any:
    return client.post(
        WEBHOOK, data=data, content_type=content_type, headers={SECRET_HEADER: SECRET}
    )


@sqlite_only
@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("Hola Pam", "application/json"),
        ('{"update_id": 1, "message": {', "application/json"),
        ("", "application/json"),
        (json.dumps({"update_id": 1, "message": _GOOD}), "text/plain"),
        (json.dumps({"update_id": 1, "message": _GOOD}), "application/x-www-form-urlencoded"),
    ],
    ids=["not JSON", "truncated JSON", "empty", "JSON as text/plain", "form content type"],
)
def test_a_body_that_is_not_json_is_400_and_writes_nothing(
    data: str, content_type: str, client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    response = raw_post(client, data, content_type)
    assert response.status_code == 400
    assert response.is_json and isinstance(response.get_json()["error"], str)
    assert queue_rows(engine) == 0
    assert woken == []


@sqlite_only
@pytest.mark.parametrize("name", list(NOT_AN_UPDATE))
def test_json_that_is_not_a_telegram_update_is_400_and_writes_nothing(
    name: str, client: FlaskClient, engine: Engine, woken: list[int]
) -> None:
    response = raw_post(client, json.dumps(NOT_AN_UPDATE[name]))
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.is_json and isinstance(response.get_json()["error"], str)
    assert queue_rows(engine) == 0
    assert woken == []


@sqlite_only
@pytest.mark.parametrize("name", list(UNREADABLE))
def test_an_update_pam_cannot_read_is_acknowledged_logged_and_writes_nothing(
    name: str,
    client: FlaskClient,
    engine: Engine,
    woken: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = {**UNREADABLE[name], "update_id": 424_242}
    with caplog.at_level(logging.DEBUG, logger="webhooks"):
        response = raw_post(client, json.dumps(body))

    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["status"] == "ignored"
    assert queue_rows(engine) == 0
    assert woken == []
    [line] = [r for r in caplog.records if r.name == "webhooks.telegram.payload"]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(
        "inbound unreadable channel=telegram update=424242 type=message: malformed update"
    )
    assert "Hola" not in caplog.text  # the message's text never reaches the log


@sqlite_only
@pytest.mark.parametrize(
    ("kind", "body"),
    [
        # Bot API docs, "MessageReactionUpdated".
        (
            "message_reaction",
            {
                "chat": _GOOD["chat"],
                "message_id": _GOOD["message_id"],
                "user": _ME,
                "date": u.DATE,
                "old_reaction": [],
                "new_reaction": [{"type": "emoji", "emoji": "👍"}],
            },
        ),
        ("a type from a later Bot API", {"some_new_field": {"x": 1}}),
    ],
    # A button press (callback_query) is a tap now: tests/webhooks/telegram/test_buttons.py.
    ids=["message_reaction", "unknown type"],
)
def test_update_types_pam_ignores_get_a_200_and_a_log_line(
    kind: str,
    body: Json,
    client: FlaskClient,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    update = {"update_id": 515_151, kind: body}
    with caplog.at_level(logging.INFO, logger="webhooks"):
        response = raw_post(client, json.dumps(update))

    assert response.status_code == 200
    assert response.get_json() == {"status": "ignored"}
    assert queue_rows(engine) == 0
    expected = "".join(ch for ch in kind if ch.isalnum() or ch == "_")
    assert f"inbound ignored channel=telegram update=515151 type={expected}" in caplog.text


@sqlite_only
def test_a_body_over_the_size_limit_is_413_and_writes_nothing(
    client: FlaskClient, engine: Engine
) -> None:
    response = post_update(client, u.text(u.learner(), "a" * MAX_BODY_BYTES))
    assert response.status_code == 413
    assert queue_rows(engine) == 0


# -- mentions in groups, exactly -----------------------------------------------------------


@sqlite_only
@pytest.mark.parametrize(
    ("words", "name", "expected"),
    [
        (f"@{USERNAME} ¿qué tal?", USERNAME, "¿qué tal?"),
        (f"¡Hola! @{USERNAME}", USERNAME, "¡Hola!"),
        # Entity offsets count UTF-16 code units: an emoji before the mention shifts them.
        (f"¡Hola! 👋 @{USERNAME}", USERNAME, "¡Hola! 👋"),
        (f"¿Vamos? 🇪🇸🇪🇸 @{USERNAME}", USERNAME, "¿Vamos? 🇪🇸🇪🇸"),
        # Usernames are case-insensitive: a mention in any case is Pam's, and is removed.
        (f"@{USERNAME.upper()} hola", USERNAME.upper(), "hola"),
        # Only Pam's own mention goes: not the start of a longer username.
        (f"@{USERNAME} saluda a @{USERNAME}Fans", USERNAME, f"saluda a @{USERNAME}Fans"),
    ],
    ids=["first", "last", "after emoji", "after flags", "upper case", "longer username"],
)
def test_a_group_mention_is_recognised_and_only_it_is_removed(
    words: str, name: str, expected: str, client: FlaskClient, engine: Engine
) -> None:
    me = u.learner()
    response = post_update(client, u.mention(me, u.group_chat(), words, name))

    assert response.get_json() == {"status": "accepted"}
    [item] = inbox_items(engine)
    assert (item.kind, item.text) == ("text", expected)


@sqlite_only
def test_a_refused_secret_is_said_once_a_minute_naming_the_setting(
    client: FlaskClient, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    me = u.learner()
    with caplog.at_level(logging.WARNING, logger="webhooks.web"):
        for n in range(3):
            assert post_update(client, u.text(me, f"Hola {n}"), secret="stale").status_code == 403
    said = [r.getMessage() for r in caplog.records if "webhook refused" in r.getMessage()]
    assert len(said) == 1, "once a minute, not once per retry"
    assert "TELEGRAM_WEBHOOK_SECRET" in said[0] and "set-webhook" in said[0]
    assert "stale" not in said[0] and "Hola" not in said[0]
