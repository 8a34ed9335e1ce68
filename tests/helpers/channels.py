"""The Procfile's processes with both messaging channels, for the end-to-end media tests: a
real `gunicorn` web process and a `pam worker` against the fake OpenAI, Bot API and Twilio
servers, on the test's database, with Pam's public address set (media links point at the web
process)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loopback.harness import (
    PAM_CMD,
    Processes,
    free_port,
    gunicorn,
    processes,
    service_env,
    wait_for,
    wait_healthy,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer
from tests.support import migrate


@dataclass
class Running:
    """The running service: its public address and its processes."""

    base: str
    group: Processes


@contextmanager
def channel_services(
    tmp_path: Path,
    database: str,
    llm: OpenAIServer,
    telegram: TelegramServer,
    twilio: TwilioServer,
    webhook_secret: str,
    **knobs: str,
) -> Iterator[Running]:
    """Web and worker up and ready, talking to the fakes, with `knobs` added to their
    environment; stopped afterwards."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with processes(tmp_path) as group:
        env = service_env(
            database,
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test",
            PAM_POLL_SECONDS="0.05",
            PAM_PUBLIC_URL=base,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_URL=telegram.base_url,
            TELEGRAM_WEBHOOK_SECRET=webhook_secret,
            TWILIO_ACCOUNT_SID=ACCOUNT_SID,
            TWILIO_AUTH_TOKEN=AUTH_TOKEN,
            TWILIO_WHATSAPP_NUMBER=NUMBER,
            TWILIO_API_URL=twilio.base_url,
            **knobs,
        )
        migrate(env["DATABASE_URL"])
        group.start("web", gunicorn(port, workers=1, threads=2), env)
        worker = group.start("worker", [*PAM_CMD, "worker"], env)
        wait_healthy(base, group)
        wait_for(lambda: "worker started" in worker.tail(), 30, "the worker to start")
        yield Running(base, group)
