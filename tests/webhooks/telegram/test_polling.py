"""`pam telegram`: long polling against the fake Bot API, and the telegram CLI subcommands."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from bot.i18n import LOCALES
from bot.phrases import menu as menu_in
from bot.worker.answering import TYPING_AFTER_SECONDS
from loopback.audio_samples import sample
from loopback.harness import ROOT, sqlite_url
from loopback.openai_server import HEARD, Fault, OpenAIServer
from loopback.telegram_server import TOKEN, Failure, TelegramServer
from memory.database import db
from memory.database.claims import DONE
from memory.database.models_queue import InboxItem
from memory.queue.inbox import Inbox
from tests.helpers.cli import run_pam
from tests.support import HANG_SECONDS, WAIT, wait_until
from tests.webhooks.telegram import updates as u
from webhooks.telegram.client import COMMANDS, UPDATE_TYPES, TelegramClient, WebhookIsSet
from webhooks.telegram.poll import poll

SECRET = "pam-poll_Secret-31d7"
CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)


def stored(engine: Engine, address: str) -> list[tuple[str, str, str]]:
    """(platform id, kind, text) of the inbox rows of `address`, oldest first."""
    with Session(engine) as session:
        rows = session.execute(
            select(InboxItem.platform_id, InboxItem.kind, InboxItem.text)
            .where(InboxItem.address == address)
            .order_by(InboxItem.id)
        )
        return [(p, k, t) for p, k, t in rows]


def address_of(user: dict[str, Any]) -> str:
    return f"telegram:{user['id']}"


def serve(server: TelegramServer, *updates: dict[str, Any]) -> None:
    """Make `updates` available to getUpdates (in this order, repeats included)."""
    with server.lock:
        server.updates.extend(updates)


def offsets(server: TelegramServer) -> list[int | None]:
    """The offset of every successful getUpdates call, in order."""
    return [c.params.get("offset") for c in server.of("getUpdates")]


class Poller:
    """poll() on a thread, with a short long-poll timeout; its errors are kept for the test."""

    def __init__(self, client: TelegramClient, inbox: Inbox) -> None:
        self.stop = threading.Event()
        self.woken = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(client, inbox), daemon=True)

    def _wake(self) -> None:
        self.woken += 1

    def _run(self, client: TelegramClient, inbox: Inbox) -> None:
        try:
            poll(client, inbox, self.stop, self._wake, timeout=1)
        except BaseException as exc:
            self.errors.append(exc)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=WAIT)
        assert not self.thread.is_alive(), "poll() did not end after stop.set()"
        if self.errors:
            raise self.errors[0]


@pytest.fixture
def inbox(engine: Engine) -> Inbox:
    return Inbox(engine, 60)


# -- poll() -----------------------------------------------------------------------------------


def test_updates_are_stored_once_each_and_the_offset_advances(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    inbox: Inbox,
    engine: Engine,
) -> None:
    lena, marta = u.learner(), u.learner("Marta")
    group = u.group_chat()
    # Created in batch order: Telegram hands updates out in increasing update_id order.
    hola, cine = u.text(lena, "Hola Pam"), u.text(lena, "Ayer yo es en el cine")
    ignored = [
        u.edited_message(lena),
        u.channel_post(),
        u.my_chat_member(lena, "member", "kicked"),
        u.text(marta, "Hola a todos", group),  # a group message not addressed to Pam
    ]
    sticker, voice = u.sticker(marta), u.voice(lena)
    batch = [hola, cine, cine, *ignored, sticker, voice]  # `cine` is delivered twice
    serve(telegram_server, *batch)
    last = voice["update_id"]

    with Poller(telegram_client, inbox) as poller:
        wait_until(lambda: len(offsets(telegram_server)) >= 2, "a second getUpdates call")
        assert stored(engine, address_of(lena)) == [
            (str(hola["update_id"]), "text", "Hola Pam"),
            (str(cine["update_id"]), "text", "Ayer yo es en el cine"),
            (str(voice["update_id"]), "voice", ""),
        ]
        assert stored(engine, address_of(marta)) == [(str(sticker["update_id"]), "media", "")]
        assert poller.woken == 4
        assert offsets(telegram_server)[:2] == [None, last + 1]

        later = u.text(lena, "¿Y tú qué hiciste?")
        serve(telegram_server, later)
        wait_until(lambda: len(stored(engine, address_of(lena))) == 4, "the later update")
        wait_until(
            lambda: offsets(telegram_server)[-1] == later["update_id"] + 1,
            "the offset to move past the later update",
        )

    assert poller.woken == 5
    assert stored(engine, address_of(lena))[-1] == (
        str(later["update_id"]),
        "text",
        "¿Y tú qué hiciste?",
    )
    assert {o for o in offsets(telegram_server) if o is not None} == {
        last + 1,
        later["update_id"] + 1,
    }


def test_an_update_python_telegram_bot_cannot_read_is_passed_and_polling_goes_on(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    inbox: Inbox,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One such update used to fail the whole getUpdates batch, again and again, for good.
    lena = u.learner()
    before = u.text(lena, "Hola Pam")
    unreadable = u.update(message={"message_id": 1, "date": 0, "chat": "secreto"})
    after = u.text(lena, "¿Qué tal?")
    serve(telegram_server, before, unreadable, after)

    with Poller(telegram_client, inbox):
        wait_until(lambda: len(stored(engine, address_of(lena))) == 2, "both readable updates")
        wait_until(
            lambda: offsets(telegram_server)[-1] == after["update_id"] + 1,
            "the offset to move past all three",
        )

    assert [text for _, _, text in stored(engine, address_of(lena))] == ["Hola Pam", "¿Qué tal?"]
    assert f"inbound unreadable channel=telegram update={unreadable['update_id']}" in caplog.text
    assert "secreto" not in caplog.text  # the update's content never reaches the log


def test_updates_delivered_again_after_a_restart_are_not_stored_twice(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    inbox: Inbox,
    engine: Engine,
) -> None:
    lena = u.learner()
    serve(telegram_server, u.text(lena, "Hola"), u.text(lena, "¿Qué tal?"), u.voice(lena))
    with Poller(telegram_client, inbox) as first:
        wait_until(lambda: len(stored(engine, address_of(lena))) == 3, "the first delivery")
    before = stored(engine, address_of(lena))
    calls = len(offsets(telegram_server))

    # A new poller starts without an offset: Telegram hands out the same updates again.
    with Poller(telegram_client, inbox) as second:
        wait_until(lambda: len(offsets(telegram_server)) >= calls + 2, "a redelivery")

    assert offsets(telegram_server)[calls] is None
    assert stored(engine, address_of(lena)) == before
    assert (first.woken, second.woken) == (3, 0)


def test_stop_ends_the_loop(
    telegram_client: TelegramClient, telegram_server: TelegramServer, inbox: Inbox
) -> None:
    with Poller(telegram_client, inbox):
        wait_until(lambda: len(offsets(telegram_server)) >= 2, "polling to run")
    # Poller's exit asserts that the thread ended; a stop set beforehand means no call at all.
    calls = len(offsets(telegram_server))
    stop = threading.Event()
    stop.set()
    poll(telegram_client, inbox, stop, lambda: None, timeout=1)
    assert len(offsets(telegram_server)) == calls


def test_a_webhook_conflict_raises_webhook_is_set(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    inbox: Inbox,
    engine: Engine,
) -> None:
    lena = u.learner()
    serve(telegram_server, u.text(lena, "Hola"))
    telegram_server.fail_next(Failure("getUpdates", 409, CONFLICT))
    woken: list[int] = []

    with pytest.raises(WebhookIsSet):
        poll(telegram_client, inbox, threading.Event(), lambda: woken.append(1), timeout=1)

    assert stored(engine, address_of(lena)) == [] and woken == []


def test_a_transient_failure_is_retried(
    telegram_client: TelegramClient,
    telegram_server: TelegramServer,
    inbox: Inbox,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lena = u.learner()
    hola = u.text(lena, "Hola")
    serve(telegram_server, hola)
    telegram_server.fail_next(Failure("getUpdates", 502, "Bad Gateway"))

    with (
        caplog.at_level(logging.WARNING, "webhooks.telegram.poll"),
        Poller(telegram_client, inbox) as poller,
    ):
        wait_until(lambda: len(stored(engine, address_of(lena))) == 1, "the retried fetch")

    assert not telegram_server.failures
    assert stored(engine, address_of(lena)) == [(str(hola["update_id"]), "text", "Hola")]
    assert poller.woken == 1
    assert any("polling failed" in r.getMessage() for r in caplog.records)


# -- the CLI ----------------------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, telegram_server: TelegramServer, llm: OpenAIServer) -> dict[str, str]:
    """The environment of a `pam telegram` command: Telegram at the fake server, the LLM at
    the local OpenAI-compatible server, a fresh SQLite file."""
    return {
        **os.environ,  # clean_environ removed the developer's own configuration
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_URL": telegram_server.base_url,
        "TELEGRAM_WEBHOOK_SECRET": SECRET,
        "DATABASE_URL": sqlite_url(tmp_path),
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "PAM_SHUTDOWN_WAIT_SECONDS": "5",
        "PYTHONPATH": str(ROOT),
    }


def folder_of(env: dict[str, str]) -> Path:
    """Where a `pam` command runs: the test's own folder (a `.env` in the repository, a
    developer's own, must not reach the tests), the one its SQLite file is in."""
    return Path(env["DATABASE_URL"].removeprefix("sqlite:///")).parent


@dataclass(frozen=True)
class Done:
    """How a `pam` command ended."""

    returncode: int
    stdout: str
    stderr: str


def pam(*args: str, env: dict[str, str]) -> Done:
    """`pam ARGS` run to its end in this process (tests/helpers/cli.py), in its folder."""
    return Done(*run_pam(*args, cwd=folder_of(env), env=env))


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


def test_set_webhook_registers_url_secret_update_types_and_commands(
    cli_env: dict[str, str], telegram_server: TelegramServer
) -> None:
    url = "https://example.test/telegram/webhook"

    done = pam("telegram", "set-webhook", url, env=cli_env)

    assert done.returncode == 0, done.stderr
    assert url in done.stdout
    [hook] = telegram_server.of("setWebhook")
    assert hook.params["url"] == url
    assert hook.params["secret_token"] == SECRET
    assert hook.params["allowed_updates"] == UPDATE_TYPES and "message" in UPDATE_TYPES
    menu, *translated = telegram_server.of("setMyCommands")
    assert "language_code" not in menu.params  # the default: English
    commands = menu.params["commands"]
    assert [c["command"] for c in commands] == [
        "start",
        "help",
        "language",
        "level",
        "profile",
        "review",
        "progress",
        "voice",
        "checkins",
        "forget",
    ]
    assert [(c["command"], c["description"]) for c in commands] == COMMANDS
    # The same menu for each app language Pam speaks, described in it.
    assert [call.params["language_code"] for call in translated] == list(LOCALES[1:])
    for call in translated:
        said = [(c["command"], c["description"]) for c in call.params["commands"]]
        assert said == menu_in(call.params["language_code"])
    german = next(call for call in translated if call.params["language_code"] == "de")
    hello = german.params["commands"][0]["description"]
    assert hello == "Hallo sagen und deine Einstellungen sehen"
    assert SECRET not in done.stdout + done.stderr  # never logged


def test_set_webhook_without_a_url_or_public_url_explains_what_is_missing(
    cli_env: dict[str, str], telegram_server: TelegramServer
) -> None:
    done = pam("telegram", "set-webhook", env=without(cli_env, "PAM_PUBLIC_URL"))

    assert done.returncode == 2
    assert "PAM_PUBLIC_URL" in done.stderr and "webhook URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert telegram_server.of("setWebhook") == []


@pytest.mark.parametrize("public_url", ["https://pam.example", "https://pam.example/"])
def test_set_webhook_defaults_to_the_public_url(
    cli_env: dict[str, str], telegram_server: TelegramServer, public_url: str
) -> None:
    done = pam("telegram", "set-webhook", env={**cli_env, "PAM_PUBLIC_URL": public_url})

    assert done.returncode == 0, done.stderr
    [hook] = telegram_server.of("setWebhook")
    assert hook.params["url"] == "https://pam.example/telegram/webhook"


def test_delete_webhook(cli_env: dict[str, str], telegram_server: TelegramServer) -> None:
    done = pam("telegram", "delete-webhook", env=cli_env)

    assert done.returncode == 0, done.stderr
    assert len(telegram_server.of("deleteWebhook")) == 1


def test_polling_while_a_webhook_is_set_exits_2_pointing_at_delete_webhook(
    cli_env: dict[str, str], telegram_server: TelegramServer
) -> None:
    telegram_server.fail_next(Failure("getUpdates", 409, CONFLICT))

    done = pam("telegram", env=cli_env)

    assert done.returncode == 2, done.stderr
    assert "delete-webhook" in done.stderr and "webhook is set" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["telegram"],
        ["telegram", "set-webhook", "https://example.test/telegram/webhook"],
        ["telegram", "delete-webhook"],
    ],
)
def test_without_a_bot_token_the_cli_explains_the_setup(
    cli_env: dict[str, str], telegram_server: TelegramServer, args: list[str]
) -> None:
    done = pam(*args, env=without(cli_env, "TELEGRAM_BOT_TOKEN"))

    assert done.returncode == 2
    assert "TELEGRAM_BOT_TOKEN" in done.stderr and "BotFather" in done.stderr
    assert "Traceback" not in done.stderr
    assert telegram_server.calls == []


@pytest.mark.slow
def test_polling_end_to_end_answers_each_message_once_in_order(
    cli_env: dict[str, str],
    telegram_server: TelegramServer,
    llm: OpenAIServer,
    tmp_path: Path,
) -> None:
    lena = u.learner()
    chat = lena["id"]
    # Each with the server's "yo es" mistake: a correction quotes the latest message.
    texts = ["Hola Pam, yo es Lena", "Ayer yo es en el mercado", "Mañana yo es en Madrid"]
    first, second, third = (u.text(lena, t) for t in texts)
    voice = u.voice(lena)
    # The voice note is downloaded from the fake and transcribed by the fake audio API.
    telegram_server.add_file(voice["message"]["voice"]["file_id"], sample("voice.ogg"))
    serve(telegram_server, first, second, second, third, voice)
    voice_answer = f"🎙 “{HEARD}”"
    # The first reply takes a while, as a real model's do: Pam shows "typing…" meanwhile.
    llm.fail_next(Fault(status=200, delay=4 * TYPING_AFTER_SECONDS))
    log = tmp_path / "pam-telegram.log"

    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhooks.cli", "telegram"],
            cwd=folder_of(cli_env),
            env=cli_env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:

            def answered() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"pam telegram exited early:\n{log.read_text()}")
                return any(s.startswith(voice_answer) for s in telegram_server.sent_texts(chat))

            wait_until(answered, "the replies to reach the fake Telegram", timeout=HANG_SECONDS)
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=HANG_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert code == 0, log.read_text()
    # Said once at start: polling needs no webhook secret.
    assert log.read_text().count("channels: telegram on (polling getUpdates);") == 1
    sent = telegram_server.sent_texts(chat)
    assert len(sent) == 4, sent
    for n, reply in enumerate(sent[:3], start=1):
        assert reply.startswith(f"Respuesta {n}:")
        assert "✏️ <s>yo es</s> → <b>yo soy</b>" in reply
    assert sent[3].startswith(voice_answer) and "Respuesta 4:" in sent[3]
    answered_texts = [
        next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        for body in llm.of("reply")
    ]
    assert answered_texts == [*texts, HEARD]
    assert any(str(c.params["chat_id"]) == str(chat) for c in telegram_server.of("sendChatAction"))

    engine = db.make_engine(cli_env["DATABASE_URL"])
    try:
        rows = stored(engine, address_of(lena))
        with Session(engine) as session:
            statuses = set(
                session.scalars(
                    select(InboxItem.status).where(InboxItem.address == address_of(lena))
                )
            )
    finally:
        engine.dispose()
    assert [(p, k) for p, k, _ in rows] == [
        (str(first["update_id"]), "text"),
        (str(second["update_id"]), "text"),
        (str(third["update_id"]), "text"),
        (str(voice["update_id"]), "voice"),
    ]
    assert statuses == {DONE}
