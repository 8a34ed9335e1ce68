"""Telegram forum topics: a message in a topic is answered in that topic — the reply and its
"typing…" — through the real PTB Bot, with the learner (the member of the group) and
deduplication unchanged."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot.worker.worker import Worker
from loopback.telegram_server import USERNAME, TelegramServer
from tests.helpers.queues import inbox_items
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.conftest import post_update
from webhooks.telegram.address import chat_address, destination

DEFAULT_REPLY = "¡Qué bien! ¿Y qué más hiciste?"  # the fake model's answer


def test_a_message_in_a_topic_is_answered_in_that_topic(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    me, chat = u.learner(), u.forum_chat()
    topic = u.topic_created(u.learner("Marta"), chat)
    update = u.topic_mention(me, topic, f"@{USERNAME} ¿cómo se dice «Feierabend»?")

    assert post_update(client, update).get_json() == {"status": "accepted"}
    [item] = inbox_items(engine)
    # The member of the group: one learner, whichever topic they write in.
    assert item.address == f"telegram:{me['id']}@{chat['id']}"
    assert item.chat_id == f"{chat['id']}:{topic['message_thread_id']}"
    assert item.text == "¿cómo se dice «Feierabend»?"

    worker.drain()

    [sent] = telegram_server.of("sendMessage")
    assert str(sent.params["chat_id"]) == str(chat["id"])
    assert sent.params["message_thread_id"] == topic["message_thread_id"]
    assert sent.params["text"] == DEFAULT_REPLY
    [typing] = telegram_server.of("sendChatAction")
    assert str(typing.params["chat_id"]) == str(chat["id"])
    assert typing.params["message_thread_id"] == topic["message_thread_id"]


def test_two_topics_of_one_chat_get_their_own_replies(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    me, chat = u.learner(), u.forum_chat()
    grammar, travel = (u.topic_created(me, chat, name) for name in ("Gramática", "Viajes"))
    post_update(client, u.topic_mention(me, grammar, f"@{USERNAME} ¿ser o estar?"))
    post_update(client, u.topic_mention(me, travel, f"@{USERNAME} Fui a Lisboa"))

    worker.drain()

    threads = [c.params["message_thread_id"] for c in telegram_server.of("sendMessage")]
    assert threads == [grammar["message_thread_id"], travel["message_thread_id"]]
    assert len({i.address for i in inbox_items(engine)}) == 1


def test_a_redelivered_topic_message_is_answered_once(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    chat = u.forum_chat()
    update = u.topic_mention(u.learner(), u.topic_created(u.learner(), chat), f"@{USERNAME} hola")

    assert post_update(client, update).get_json() == {"status": "accepted"}
    assert post_update(client, update).get_json() == {"status": "duplicate"}
    worker.drain()

    assert len(inbox_items(engine)) == 1
    assert len(telegram_server.of("sendMessage")) == 1


def test_a_reply_to_pam_in_a_topic_is_answered_there(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    me, chat = u.learner(), u.forum_chat()
    topic = u.topic_created(me, chat)
    pams = {
        **u.message(u.PAM, chat, text="¿Y el fin de semana?"),
        "message_thread_id": topic["message_thread_id"],
        "is_topic_message": True,
    }
    post_update(client, u.in_topic(me, topic, "Fui al cine", reply_to_message=pams))

    worker.drain()

    [sent] = telegram_server.of("sendMessage")
    assert sent.params["message_thread_id"] == topic["message_thread_id"]


def test_a_topic_pam_opened_is_no_reply_to_pam(client: FlaskClient, engine: Engine) -> None:
    """Every message in a topic "replies" to the topic's first message: when Pam's account
    opened the topic, that is still not the learner replying to Pam."""
    chat = u.forum_chat()
    topic = u.topic_created(u.PAM, chat)

    response = post_update(client, u.in_topic(u.learner(), topic, "¿Alguien viene al cine?"))

    assert response.get_json() == {"status": "ignored"}
    assert inbox_items(engine) == []


def test_the_general_topic_and_reply_threads_of_plain_groups_answer_in_the_chat(
    client: FlaskClient, engine: Engine, worker: Worker, telegram_server: TelegramServer
) -> None:
    """Messages in a forum's General topic carry no thread; a reply in a supergroup without
    topics carries a message_thread_id but is no topic message (is_topic_message absent)."""
    me, forum, plain = u.learner(), u.forum_chat(), u.group_chat()
    post_update(client, u.mention(me, forum, f"@{USERNAME} hola"))
    words = f"@{USERNAME} ¿qué tal?"
    post_update(client, u.mention(me, plain, words))
    in_thread = u.mention(me, plain, words)
    in_thread["message"]["message_thread_id"] = 4_242
    post_update(client, in_thread)

    worker.drain()

    chats = [i.chat_id for i in inbox_items(engine)]
    assert chats == [str(forum["id"]), str(plain["id"]), str(plain["id"])]
    assert all("message_thread_id" not in c.params for c in telegram_server.of("sendMessage"))


@pytest.mark.parametrize(
    ("chat", "thread"), [(-1001234567890, 42), (-1001234567890, None), (123456789, None)]
)
def test_a_chat_address_reads_back_as_its_chat_and_topic(chat: int, thread: int | None) -> None:
    assert destination(chat_address(chat, thread)) == (str(chat), thread)
