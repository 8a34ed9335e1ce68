"""What a learner receives on Telegram: the Worker delivering through the real PTB Bot."""

from __future__ import annotations

import gc
import html
import itertools
import random
import re
import socket
import threading
import uuid
import warnings
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from bot.channels import PermanentSendError, RecipientBlocked, TransientSendError
from bot.corrections import parse_answer, render
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.harness import wait_for
from loopback.telegram_server import TOKEN, Failure, TelegramServer
from memory.clock import utcnow
from memory.database.claims import FAILED, PENDING, SENT
from memory.database.records import PAM
from memory.messages import Inbound
from tests.fakes import FakeChatModel, Gate, reply_json
from tests.helpers.queues import make_available_now, outbox_rows
from webhooks.telegram.client import TelegramClient

LIMIT = 4096
TAG = re.compile(r"</?(?:s|b|i)>")
CORRECTION = {
    "original": "yo es",
    "corrected": "yo soy",
    "explanation": "'ser' in first person is 'soy'",
    "category": "conjugation",
}
BLOCKED = "Forbidden: bot was blocked by the user"
CANT_PARSE = 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 5'


def new_chat() -> int:
    """A private chat id (= the learner's user id) no other test uses."""
    return random.randint(10**8, 10**10)


def accept(
    worker: Worker, chat_id: int | str, text: str = "Hola, yo es Lena", user: int = 0
) -> str:
    """Store an inbound Telegram message as the webhook or the poller would; its address."""
    address = f"telegram:{user or chat_id}"
    stored = worker.inbox.accept(
        Inbound(
            channel="telegram",
            platform_id=str(uuid.uuid4().int % 10**12),
            address=address,
            chat_id=str(chat_id),
            text=text,
            display_name="Lena",
        )
    )
    assert stored
    return address


def plain(message_html: str) -> str:
    """The text a learner sees in an HTML message: tags dropped, entities resolved."""
    return html.unescape(TAG.sub("", message_html))


def pam_replies(pam: Pam, address: str) -> list[str]:
    learner = pam.store.learners.find_learner(address)
    assert learner is not None
    return [m.content for m in pam.store.conversation.messages(learner.id) if m.role == PAM]


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- a normal reply -------------------------------------------------------------------------


def test_reply_arrives_as_html_with_the_correction_struck_through_and_bold(
    worker: Worker, fake_model: FakeChatModel, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    answer = reply_json("¡Hola Lena! Me encanta <3 el cine & la música. ¿Y tú?", [CORRECTION])
    fake_model.queue("reply", answer)
    accept(worker, chat)

    worker.drain()

    [sent] = telegram_server.of("sendMessage")
    assert str(sent.params["chat_id"]) == str(chat)
    assert sent.params["parse_mode"] == "HTML"
    text = sent.params["text"]
    assert "✏️ <s>yo es</s> → <b>yo soy</b> — <i>'ser' in first person is 'soy'</i>" in text
    assert "Me encanta &lt;3 el cine &amp; la música." in text
    assert plain(text) == render(parse_answer(answer))


def test_typing_is_shown_before_the_reply(worker: Worker, telegram_server: TelegramServer) -> None:
    chat = new_chat()
    accept(worker, chat)

    worker.drain()

    methods = [c.method for c in telegram_server.calls]
    assert "sendChatAction" in methods and "sendMessage" in methods
    assert methods.index("sendChatAction") < methods.index("sendMessage")
    [action] = telegram_server.of("sendChatAction")[:1]
    assert str(action.params["chat_id"]) == str(chat)
    assert action.params["action"] == "typing"


@pytest.mark.parametrize(("caption", "typing"), [("Mi perro en la playa", True), ("", False)])
def test_a_captioned_photo_shows_typing_while_a_bare_one_needs_none(
    worker: Worker, telegram_server: TelegramServer, caption: str, typing: bool
) -> None:
    # The caption is a turn like any text (the model is called); a bare photo gets its
    # friendly note at once.
    chat = new_chat()
    stored = worker.inbox.accept(
        Inbound(
            channel="telegram",
            platform_id=str(uuid.uuid4().int % 10**12),
            address=f"telegram:{chat}",
            chat_id=str(chat),
            text=caption,
            kind="media",
        )
    )
    assert stored

    worker.drain()

    assert bool(telegram_server.of("sendChatAction")) is typing
    assert len(telegram_server.of("sendMessage")) == 1


def test_a_reply_there_at_once_needs_no_typing(
    pam: Pam, telegram_client: TelegramClient, telegram_server: TelegramServer
) -> None:
    """Each "typing…" is a Bot API call: a turn quicker than TYPING_AFTER_SECONDS makes none."""
    worker = Worker(pam, {"telegram": telegram_client})
    worker.answering.typing_after = 60.0  # however slow this machine, the fake model is quicker
    accept(worker, new_chat())

    worker.drain()

    assert telegram_server.of("sendMessage") and not telegram_server.of("sendChatAction")


def test_a_slow_turn_shows_typing_while_it_runs(
    pam: Pam,
    fake_model: FakeChatModel,
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
) -> None:
    worker = Worker(pam, {"telegram": telegram_client})
    assert worker.answering.typing_after > 0, "by default a quick reply sends no typing"
    gate = Gate(reply_json("¡Hola!"))
    fake_model.queue("reply", gate)
    chat = new_chat()
    accept(worker, chat)
    turn = threading.Thread(target=worker.drain)
    turn.start()

    wait_for(lambda: bool(telegram_server.of("sendChatAction")), 20, "typing… in the slow turn")
    assert not telegram_server.of("sendMessage")
    gate.release.set()
    turn.join(20)

    [action] = telegram_server.of("sendChatAction")[:1]
    assert (str(action.params["chat_id"]), action.params["action"]) == (str(chat), "typing")
    assert len(telegram_server.of("sendMessage")) == 1


# -- long replies ---------------------------------------------------------------------------


def sentences(count: int, start: int = 0) -> list[str]:
    return [
        f"Frase número {n}: ayer fui al mercado, compré tomates y hablé con la vendedora."
        for n in range(start, start + count)
    ]


def long_reply(shape: str) -> str:
    """About 10,000 characters: paragraphs of sentences, or one paragraph of sentences."""
    if shape == "paragraphs":
        return "\n\n".join(" ".join(sentences(8, 8 * p)) for p in range(16))
    return " ".join(sentences(125))


@pytest.mark.parametrize("shape", ["paragraphs", "sentences"])
def test_a_long_reply_arrives_in_order_as_several_messages_split_at_boundaries(
    pam: Pam,
    worker: Worker,
    fake_model: FakeChatModel,
    telegram_server: TelegramServer,
    shape: str,
) -> None:
    chat = new_chat()
    answer = reply_json(long_reply(shape), [CORRECTION])
    expected = render(parse_answer(answer))
    assert 9_500 < len(expected) < 11_000
    fake_model.queue("reply", answer)
    address = accept(worker, chat)

    worker.drain()

    sent = telegram_server.sent_texts(chat)
    parts = [plain(text) for text in sent]
    assert len(parts) >= 3
    assert "".join(parts) == expected == pam_replies(pam, address)[-1]
    assert all(len(part) <= LIMIT for part in parts)
    for text in sent:  # formatting never spans two messages
        for tag in ("s", "b", "i"):
            assert text.count(f"<{tag}>") == text.count(f"</{tag}>")
    for part, following in itertools.pairwise(parts):
        if shape == "paragraphs":
            assert part.endswith("\n\n") and following.startswith("Frase número")
        else:
            assert part.rstrip().endswith(".") and following.lstrip().startswith("Frase número")
    assert all(c.params.get("parse_mode") == "HTML" for c in telegram_server.of("sendMessage"))
    assert {row.status for row in outbox_rows(worker.pam.engine, address)} == {SENT}


# -- formatting refused ---------------------------------------------------------------------


def test_formatting_refused_by_telegram_goes_out_again_as_plain_text(
    worker: Worker, fake_model: FakeChatModel, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    answer = reply_json("¡Qué bien! ¿Qué película viste?", [CORRECTION])
    fake_model.queue("reply", answer)
    address = accept(worker, chat)
    telegram_server.fail_next(Failure("sendMessage", 400, CANT_PARSE))

    worker.drain()

    assert not telegram_server.failures  # the formatted attempt was made, and refused
    [sent] = telegram_server.of("sendMessage")
    assert "parse_mode" not in sent.params
    assert sent.params["text"] == render(parse_answer(answer))
    [row] = outbox_rows(worker.pam.engine, address)
    assert row.status == SENT and row.attempts == 1


# -- rate limits ------------------------------------------------------------------------------


def test_429_is_transient_with_the_retry_after_telegram_asked_for(
    telegram_client: TelegramClient, telegram_server: TelegramServer
) -> None:
    telegram_server.fail_next(
        Failure("sendMessage", 429, "Too Many Requests: retry after 3", {"retry_after": 3})
    )

    with pytest.raises(TransientSendError) as raised:
        telegram_client.send(str(new_chat()), "Hola", idempotency_key="k-1")

    assert raised.value.retry_after == 3.0


def test_429_puts_the_reply_back_until_retry_after_then_delivers_it_once(
    worker: Worker, engine: Engine, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    address = accept(worker, chat)
    telegram_server.fail_next(
        Failure("sendMessage", 429, "Too Many Requests: retry after 3", {"retry_after": 3})
    )
    before = utcnow()

    worker.drain()

    [row] = outbox_rows(engine, address)
    assert row.status == PENDING and row.attempts == 1
    assert row.available_at >= before + timedelta(seconds=3)
    assert row.last_error and "rate limit" in row.last_error
    worker.drain()  # not due yet: nothing is sent
    assert telegram_server.sent_texts(chat) == []

    make_available_now(engine)
    worker.drain()
    worker.drain()

    assert len(telegram_server.sent_texts(chat)) == 1
    [row] = outbox_rows(engine, address)
    assert row.status == SENT and row.attempts == 2


# -- a learner who blocked the bot ----------------------------------------------------------


def test_blocked_bot_fails_the_reply_for_good_and_never_retries_it(
    worker: Worker, engine: Engine, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    address = accept(worker, chat)
    telegram_server.fail_next(Failure("sendMessage", 403, BLOCKED))

    worker.drain()
    for _ in range(5):
        make_available_now(engine)
        worker.drain()

    # Only one failure was scripted: a retry would have gone through and been recorded.
    assert not telegram_server.failures
    assert telegram_server.sent_texts(chat) == []
    [row] = outbox_rows(engine, address)
    assert row.status == FAILED and row.attempts == 1
    assert row.last_error and "blocked" in row.last_error


def test_later_replies_to_a_blocked_chat_are_each_tried_once(
    worker: Worker, engine: Engine, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    for n in range(3):
        address = accept(worker, chat, f"Mensaje {n}")
        telegram_server.fail_next(
            Failure("sendChatAction", 403, BLOCKED), Failure("sendMessage", 403, BLOCKED)
        )

    worker.drain()
    for _ in range(3):
        make_available_now(engine)
        worker.drain()

    assert not telegram_server.failures  # three refusals were scripted, three attempts made
    assert telegram_server.sent_texts(chat) == []
    rows = outbox_rows(engine, address)
    assert [(r.status, r.attempts) for r in rows] == [(FAILED, 1)] * 3


@pytest.mark.parametrize(
    "refusal", ["Forbidden: bot was blocked by the user", "Forbidden: user is deactivated"]
)
def test_a_learner_who_blocked_the_bot_or_is_gone_is_a_blocked_recipient(
    telegram_client: TelegramClient, telegram_server: TelegramServer, refusal: str
) -> None:
    telegram_server.fail_next(Failure("sendMessage", 403, refusal))

    with pytest.raises(RecipientBlocked):
        telegram_client.send(str(new_chat()), "Hola", idempotency_key="k-9")


def test_send_error_mapping_blocked_is_permanent(
    telegram_client: TelegramClient, telegram_server: TelegramServer
) -> None:
    telegram_server.fail_next(Failure("sendMessage", 403, BLOCKED))

    with pytest.raises(PermanentSendError, match="blocked"):
        telegram_client.send(str(new_chat()), "Hola", idempotency_key="k-2")


# -- network failure ------------------------------------------------------------------------


def test_an_unreachable_telegram_is_a_transient_failure(pam: Pam, engine: Engine) -> None:
    client = TelegramClient(TOKEN, f"http://127.0.0.1:{closed_port()}/bot", timeout=2.0)
    try:
        with pytest.raises(TransientSendError) as raised:
            client.send("12345", "Hola", idempotency_key="k-3")
        assert raised.value.retry_after is None

        worker = Worker(pam, {"telegram": client})
        chat = new_chat()
        address = accept(worker, chat)
        worker.drain()  # "typing…" fails too, and must not cost the reply
    finally:
        client.close()

    [row] = outbox_rows(engine, address)
    assert row.status == PENDING and row.attempts == 1
    assert row.last_error and "unreachable" in row.last_error


# -- a group that became a supergroup -------------------------------------------------------


def test_a_migrated_group_gets_the_reply_at_its_new_chat_id(
    worker: Worker, fake_model: FakeChatModel, engine: Engine, telegram_server: TelegramServer
) -> None:
    group, new_group = -random.randint(10**6, 10**9), -100123
    answer = reply_json("¡Hola a todos!", [CORRECTION])
    fake_model.queue("reply", answer)
    # The correction quotes the message ("yo es"): else it is dropped.
    address = accept(worker, group, "@PamTestBot hola, yo es Lena", user=new_chat())
    telegram_server.fail_next(
        Failure(
            "sendMessage",
            400,
            "Bad Request: group chat was upgraded to a supergroup chat",
            {"migrate_to_chat_id": new_group},
        )
    )

    worker.drain()

    assert telegram_server.sent_texts(group) == []
    [text] = telegram_server.sent_texts(new_group)
    assert plain(text) == render(parse_answer(answer))
    [row] = outbox_rows(engine, address)
    assert row.status == SENT and row.attempts == 1


# -- closing ----------------------------------------------------------------------------------


def test_each_thread_runs_the_bot_on_its_own_loop_and_close_closes_them(
    telegram_server: TelegramServer,
) -> None:
    """No loop thread of its own: the calling threads run the Bot's coroutines, each on one
    loop it keeps, and close() closes them all."""
    before = set(threading.enumerate())
    client = TelegramClient(TOKEN, telegram_server.base_url)
    try:
        client.send("12345", "Hola", idempotency_key="k-4")
        client.typing("12345")  # the same thread: the same loop
        other = threading.Thread(
            target=client.send, args=("12345", "Hi"), kwargs={"idempotency_key": "k"}
        )
        other.start()
        other.join()
        # The fake server answers each request on a thread of its own, which may still be
        # winding down after the reply reached the client: those are not the client's.
        started = {
            thread
            for thread in set(threading.enumerate()) - before
            if "process_request_thread" not in thread.name
        }
        assert started == set()
        loops = list(client._loops)
        assert len(loops) == 2
        assert telegram_server.sent_texts() == ["Hola", "Hi"]
    finally:
        client.close()

    assert all(loop.is_closed() for loop in loops)


def test_many_threads_sending_at_once_all_succeed(telegram_server: TelegramServer) -> None:
    """64 lanes send at the same moment, over kept-alive connections as Telegram's are:
    every message lands once, each lane gets its own message's id back, each lane ran its
    send on a loop of its own, and the client started no thread."""
    telegram_server.httpd.RequestHandlerClass.protocol_version = "HTTP/1.1"  # keep-alive
    lanes = 64
    client = TelegramClient(TOKEN, telegram_server.base_url)
    together = threading.Barrier(lanes)
    sent: dict[int, str | None] = {}

    def lane(n: int) -> None:
        together.wait()
        sent[n] = client.send(str(1000 + n), f"Hola {n}", idempotency_key=f"k-{n}").platform_id

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(lanes)]
    before = set(threading.enumerate()) | set(threads)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        started = {
            thread
            for thread in set(threading.enumerate()) - before
            if "process_request_thread" not in thread.name
        }
        loops = len(client._loops)
    finally:
        client.close()

    assert sorted(sent) == list(range(lanes)) and len(set(sent.values())) == lanes
    for n in range(lanes):
        assert telegram_server.sent_texts(1000 + n) == [f"Hola {n}"]
    assert (loops, started) == (lanes, set())


def test_close_closes_the_http_connections(telegram_server: TelegramServer) -> None:
    """close() promises to close the HTTP clients. Telegram keeps connections alive (so does
    the fake server here): a client left open leaks its sockets once the loop is gone."""
    telegram_server.httpd.RequestHandlerClass.protocol_version = "HTTP/1.1"  # keep-alive
    client = TelegramClient(TOKEN, telegram_server.base_url)
    client.send("12345", "Hola", idempotency_key="k-5")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.close()
        del client
        gc.collect()

    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


def test_progress_arrives_as_a_photo_with_its_summary(
    worker: Worker, telegram_server: TelegramServer
) -> None:
    chat = new_chat()
    accept(worker, chat, "/progress")
    worker.drain()
    (photo,) = telegram_server.of("sendPhoto")
    assert str(photo.params["chat_id"]) == str(chat)
    assert photo.params["photo"].startswith(b"\x89PNG\r\n\x1a\n")
    assert photo.params["caption"].startswith("Nothing to show yet")
    assert telegram_server.sent_texts(chat) == []
