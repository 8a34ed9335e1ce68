"""Secrets and message bodies never reach the logs at INFO or above, through every channel,
with the logging configuration the services really use."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bot import logs
from bot.worker.worker import Worker
from loopback.local_server import Answer, LocalServer
from loopback.openai_server import Fault, OpenAIServer
from loopback.telegram_server import TOKEN as TELEGRAM_TOKEN
from loopback.telegram_server import TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer, sign
from webhooks.app import create_app
from webhooks.settings import Settings
from webhooks.wiring import build, senders

OPENAI_KEY = "sk-test-SECRET-openai-key-4b1d"
API_TOKEN = "api-SECRET-token-77ac"
ADMIN_TOKEN = "admin-SECRET-token-19fe"
TELEGRAM_SECRET = "tg-SECRET-webhook-5e2a"
BODY = "BODYMARKER-ORCHID-3141"  # in every message a learner sends
SECRETS = (OPENAI_KEY, API_TOKEN, ADMIN_TOKEN, TELEGRAM_SECRET, TELEGRAM_TOKEN, AUTH_TOKEN)


class Callback(LocalServer):
    """The operator's API callback: accepts every reply."""

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        return 200, {}, b"{}"


class Records(logging.Handler):
    """Keeps every record that passes the configured levels."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, self.format(record)))


@pytest.fixture
def captured() -> Iterator[Records]:
    """The services' own logging configuration, with every emitted line kept."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved = {name: logging.getLogger(name).level for name in logs.QUIET}
    logs.configure("INFO", sys.stdout)
    records = Records()
    root.addHandler(records)
    try:
        yield records
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_no_secret_or_message_text_is_logged_at_info(
    captured: Records, settings: Settings, engine: Engine
) -> None:
    with (
        OpenAIServer() as llm,
        TelegramServer() as telegram,
        TwilioServer() as twilio,
        Callback() as callback,
    ):
        config = settings.replace(
            llm={"api_key": OPENAI_KEY, "base_url": llm.base_url, "max_retries": 0},
            memory={"summary_trigger_tokens": 200, "fold_batch_messages": 2},
            web={"admin_token": ADMIN_TOKEN},
            api={"token": API_TOKEN, "callback_url": callback.origin + "/replies"},
            telegram={
                "bot_token": TELEGRAM_TOKEN,
                "webhook_secret": TELEGRAM_SECRET,
                "api_url": telegram.base_url,
            },
            whatsapp={
                "account_sid": ACCOUNT_SID,
                "auth_token": AUTH_TOKEN,
                "number": NUMBER,
                "api_url": twilio.base_url,
            },
        )
        pam = build(config, submit=lambda work: work(), engine=engine)
        worker = Worker(pam, senders(config))
        app = create_app(config, engine=engine)
        client = app.test_client()
        try:
            for n in range(6):
                text = f"Hola, {BODY} número {n}"
                assert client.post(
                    "/api/messages",
                    json={"id": f"log-{n}-{engine.url.database}", "user": "lena", "text": text},
                    headers={"Authorization": f"Bearer {API_TOKEN}"},
                ).status_code in (200, 202)
                update = {
                    "update_id": 900_000 + n,
                    "message": {
                        "message_id": n + 1,
                        "date": 1_790_000_000,
                        "chat": {"id": 4242, "type": "private", "first_name": "Kai"},
                        "from": {"id": 4242, "is_bot": False, "first_name": "Kai"},
                        "text": text,
                    },
                }
                assert (
                    client.post(
                        "/telegram/webhook",
                        json=update,
                        headers={"X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET},
                    ).status_code
                    == 200
                )
                form = {
                    # A Twilio sid (SM and 32 hex digits), one per message and database.
                    "MessageSid": "SM"
                    + hashlib.sha1(f"{engine.url}/{n}".encode()).hexdigest()[:32],
                    "From": "whatsapp:+34600111222",
                    "WaId": "34600111222",
                    "ProfileName": "Lucía",
                    "Body": text,
                    "NumMedia": "0",
                }
                signature = sign("http://localhost/whatsapp/webhook", form)
                assert (
                    client.post(
                        "/whatsapp/webhook", data=form, headers={"X-Twilio-Signature": signature}
                    ).status_code
                    == 200
                )
            llm.fail_next(Fault(status=500))  # one failing turn: its warning must be clean too
            worker.drain()
            learner = pam.store.learners.find_learner("api:lena")
            assert learner is not None
            memory = client.get(
                f"/admin/learners/{learner.id}/memory",
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            assert BODY in memory.get_data(as_text=True)  # operators see it; logs do not
        finally:
            worker.close_senders()
            app.extensions["pam"].close()

        assert telegram.sent_texts() and twilio.messages  # the replies really went out
        assert any(BODY in json.dumps(r) for r in llm.requests)

    info_and_above = [line for level, line in captured.lines if level >= logging.INFO]
    assert any("inbound accepted" in line for line in info_and_above)  # the logs do speak
    assert any("reply delivered" in line for line in info_and_above)
    for line in info_and_above:
        assert BODY not in line, line
        for secret in SECRETS:
            assert secret not in line, f"a secret reached the logs: {line}"


def test_pam_chat_at_a_terminal_logs_to_a_file_made_with_its_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved = {name: logging.getLogger(name).level for name in logs.QUIET}
    path = tmp_path / "pam-chat.log"
    try:
        logs.configure_file("WARNING", path)
        logging.getLogger("pam.test").info("not at WARNING")
        assert not path.exists(), "no empty log file before there is something to say"
        logging.getLogger("pam.test").warning("a memory job failed")
        logging.getLogger("httpx").info("GET https://api.telegram.org/bot123:secret/getMe")
        for handler in root.handlers:
            handler.flush()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)

    lines = path.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith("WARNING pam.test a memory job failed")
    assert capsys.readouterr() == ("", ""), "nothing reaches the terminal"
