"""Groups are not private chats: in a Telegram group or forum, Pam never shows one member's
private memory to the group. The member first tells Pam things in their private chat (a fact,
a corrected mistake now due for review, a summary and recall index of what was folded out),
then talks to Pam in a group — through the webhook's real python-telegram-bot parsing, the
worker and the fake Bot API. What the group's prompt holds is checked on the fake model's
calls, what the group reads on the fake Bot API's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot import phrases
from bot.turn import forgetting
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.telegram_server import USERNAME, Failure, TelegramServer
from memory.clock import ManualClock, utcnow
from memory.database.records import LEARNER
from memory.llm import ChatMessage
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.queues import inbox_items
from tests.helpers.review import BUEN, MISTAKE, review_pam
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.conftest import post_update
from tests.webhooks.telegram.updates import Json
from webhooks.settings import Settings

FACT = "Mi hermana es enfermera en Sevilla."
# Words of the member's private chat: none may reach the group, its prompt or its memory.
PRIVATE_WORDS = ("enfermera", "Sevilla", "hermana es", "bueno amigo", "Madrid")
ASKS = f"@{USERNAME} ¿Te acuerdas de lo que te conté de mi hermana?"


def _said(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(m["content"] for m in messages)


@pytest.fixture
def clock() -> ManualClock:
    """The worker's clock, a day ahead of the web's: what the web stores is due at once."""
    return ManualClock(utcnow() + timedelta(days=1))


@pytest.fixture
def pam(settings: Settings, engine: Engine, fake_model: FakeChatModel, clock: ManualClock) -> Pam:
    """Pam folding every turn (so the fact is summarised and indexed for recall), learning the
    profile after every message, with review on: a learner's whole memory within a few turns."""
    fake_model.defaults["summary"] = lambda messages: (
        "The learner said their sister is a nurse (enfermera) in Sevilla."
        if "enfermera" in _said(messages)
        else "The learner chatted about their day."
    )
    fake_model.defaults["profile"] = lambda messages: (
        json.dumps({"misc": ["hermana enfermera en Sevilla"]}, ensure_ascii=False)
        if "enfermera" in _said(messages)
        else '{"no_change": true}'
    )
    return review_pam(settings, engine, fake_model, clock, profile_every=1)


def private_memory(
    client: FlaskClient, worker: Worker, fake: FakeChatModel, me: Json, clock: ManualClock
) -> None:
    """`me` tells Pam in private about their sister and makes a mistake Pam corrects; an hour
    later the fact is in the profile, the summary and the recall index, the mistake due."""
    post_update(client, u.command(me, "/language Spanish English"))
    post_update(client, u.text(me, FACT))
    worker.drain()
    fake.queue("reply", reply_json("¡Qué bien!", [BUEN]))
    post_update(client, u.text(me, MISTAKE))
    worker.drain()
    for words in ("Hoy hace sol.", "Mañana voy al cine."):
        post_update(client, u.text(me, words))
        worker.drain()
    clock.advance(timedelta(hours=1))
    learner = worker.pam.store.learners.find_learner(f"telegram:{me['id']}")
    assert learner is not None
    assert "enfermera" in str(worker.pam.store.memory.profile(learner.id).data)
    assert "enfermera" in worker.pam.store.memory.summary(learner.id).text
    assert worker.pam.store.reviews.due(learner.id), "the mistake is due"


def group_reads(telegram_server: TelegramServer, chat: Json) -> str:
    """Everything Pam posted to `chat`: messages, and photos' captions."""
    texts = telegram_server.sent_texts(chat["id"])
    for method in ("sendPhoto", "sendVoice", "sendDocument"):
        calls = telegram_server.of(method)
        texts += [
            f"[{method}] {c.params.get('caption', '')}"
            for c in calls
            if str(c.params.get("chat_id")) == str(chat["id"])
        ]
    return "\n".join(texts)


def leaked(text: str) -> list[str]:
    return [word for word in PRIVATE_WORDS if word.lower() in text.lower()]


def test_a_group_turn_never_draws_on_the_members_private_memory(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    clock: ManualClock,
) -> None:
    """Asked in a group what it remembers of the member's sister, Pam's prompt holds none of
    their private chat: no profile fact, summary, recalled message or due review item."""
    me, group = u.learner(), u.group_chat()
    private_memory(client, worker, fake_model, me, clock)
    private_prompt = fake_model.of("reply")[-1].text
    assert leaked(private_prompt), "in private, Pam does remember"
    calls = len(fake_model.calls)

    post_update(client, u.mention(me, group, ASKS))
    worker.drain()

    [asked] = [c for c in fake_model.calls[calls:] if c.purpose == "reply"]
    assert "hermana" in asked.text  # the group's question itself
    for call in fake_model.calls[calls:]:  # the reply, and any memory job it started
        assert leaked(call.text.replace(ASKS.split(" ", 1)[1], "")) == [], call.purpose
    assert group_reads(telegram_server, group)
    assert leaked(group_reads(telegram_server, group)) == []
    # The member is a learner of their own in the group.
    [item] = [i for i in inbox_items(engine) if i.chat_id == str(group["id"])]
    assert item.address == f"telegram:{me['id']}@{group['id']}"


def test_a_forum_topic_is_a_group_too(
    client: FlaskClient,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    clock: ManualClock,
) -> None:
    me, forum = u.learner(), u.forum_chat()
    private_memory(client, worker, fake_model, me, clock)
    topic = u.topic_created(u.learner("Marta"), forum)
    calls = len(fake_model.calls)

    post_update(client, u.topic_mention(me, topic, ASKS))
    post_update(client, u.command(me, f"/profile@{USERNAME}", forum))
    worker.drain()

    for call in fake_model.calls[calls:]:
        assert leaked(call.text.replace(ASKS.split(" ", 1)[1], "")) == [], call.purpose
    assert leaked(group_reads(telegram_server, forum)) == []


@pytest.mark.parametrize("command", ["profile", "review", "progress"])
def test_commands_about_the_member_answer_in_the_group_with_a_link_to_the_private_chat(
    command: str,
    client: FlaskClient,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    clock: ManualClock,
) -> None:
    """/profile, /review and /progress show one learner's memory: in a group they get a short
    note in the member's native language (what they set in the group) with the deep link into the
    private chat, and nothing about the member — no profile, exercise or chart."""
    me, group = u.learner(), u.group_chat()
    private_memory(client, worker, fake_model, me, clock)
    post_update(client, u.command(me, f"/language@{USERNAME} Spanish English", group))
    worker.drain()
    before = len(telegram_server.sent_texts(group["id"]))

    post_update(client, u.command(me, f"/{command}@{USERNAME}", group))
    worker.drain()

    link = f"https://t.me/{USERNAME}?start={command}"
    assert telegram_server.sent_texts(group["id"])[before:] == [
        phrases.private_only("English", link)
    ]
    assert group_reads(telegram_server, group).count("[sendPhoto]") == 0
    assert leaked(group_reads(telegram_server, group)) == []


def test_without_the_bots_name_the_note_comes_alone(
    client: FlaskClient, worker: Worker, telegram_server: TelegramServer
) -> None:
    """When Telegram cannot say the bot's username (getMe fails), the note goes out without
    the link — and still nothing about the member."""
    me, group = u.learner(), u.group_chat()
    post_update(client, u.command(me, f"/profile@{USERNAME}", group))  # the web's getMe
    telegram_server.fail_next(Failure("getMe", 500, "Internal Server Error"))

    worker.drain()

    assert telegram_server.sent_texts(group["id"]) == [phrases.private_only(None, None)]


def test_the_link_into_the_private_chat_answers_the_command_there(
    client: FlaskClient,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    clock: ManualClock,
) -> None:
    """The deep link makes Telegram send `/start profile` in the private chat: the profile,
    there."""
    me = u.learner()
    private_memory(client, worker, fake_model, me, clock)

    post_update(client, u.command(me, "/start profile"))
    worker.drain()

    shown = telegram_server.sent_texts(me["id"])[-1]
    assert shown.startswith("Here's what I know about you")
    assert "enfermera" in shown


def test_forget_in_a_group_erases_only_what_the_member_said_there(
    client: FlaskClient,
    engine: Engine,
    worker: Worker,
    telegram_server: TelegramServer,
    fake_model: FakeChatModel,
    clock: ManualClock,
) -> None:
    """/forget in a group erases the member's memory of that group, never by accident their
    private chat with Pam: that stays, word for word."""
    me, group = u.learner(), u.group_chat()
    private_memory(client, worker, fake_model, me, clock)
    store = worker.pam.store
    private = store.learners.find_learner(f"telegram:{me['id']}")
    assert private is not None
    kept = [m.content for m in store.conversation.messages(private.id)]
    post_update(client, u.mention(me, group, f"@{USERNAME} Hola a todos"))
    worker.drain()
    member = f"telegram:{me['id']}@{group['id']}"
    assert store.learners.find_learner(member) is not None

    post_update(client, u.command(me, f"/forget@{USERNAME}", group))
    worker.drain()
    # Asked first, in the group, with the buttons under the question: nothing erased yet.
    assert telegram_server.sent_texts(group["id"])[-1].startswith(forgetting.ASK_IN_GROUP)
    assert store.learners.find_learner(member) is not None
    keyboard = telegram_server.keyboards(group["id"])[-1]
    [confirm] = [b["callback_data"] for row in keyboard for b in row if "yes" in b["callback_data"]]
    post_update(client, telegram_server.tap(me, group, 1, confirm))
    worker.drain()

    assert telegram_server.sent_texts(group["id"])[-1] == phrases.FORGOTTEN_IN_GROUP
    assert store.learners.find_learner(member) is None
    still = store.learners.find_learner(f"telegram:{me['id']}")
    assert still is not None and still.id == private.id
    assert [m.content for m in store.conversation.messages(private.id)] == kept
    assert FACT in [m.content for m in store.conversation.messages(private.id) if m.role == LEARNER]
