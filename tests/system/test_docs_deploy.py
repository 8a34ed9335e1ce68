"""The docs' deploy pages, followed as written: the variables their `heroku config:set` /
`fly secrets set` lines set, the platform's release step, its web and worker processes, and
what the page tells the operator to do on Telegram's and Twilio's side — with the loopback
fakes standing in for the model, Telegram and Twilio. Each page must reach a first reply on
each channel. The page's variable names and the platform's commands are read from the docs
and the deploy files, so a page that forgets a variable fails here."""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from loopback.harness import (
    BIN,
    ROOT,
    free_port,
    processes,
    service_env,
    wait_for,
    wait_healthy,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer, sign
from tests.helpers.deploy_files import DeployCommand, fly, procfile
from tests.support import HANG_SECONDS
from tests.webhooks.telegram import updates
from tests.webhooks.whatsapp.conftest import new_wa_id, text_form

pytestmark = pytest.mark.slow

START = HANG_SECONDS  # each wait ends on its event; the bound is a hang guard
SECTIONS = {
    "heroku": (r"heroku config:set", procfile),
    "fly": (r"fly secrets set", fly),
}


def section(title: str) -> str:
    """The docs' deploy page `title` (docs/deploy/<title>.md)."""
    return (ROOT / "docs" / "deploy" / f"{title}.md").read_text()


def variables_set(text: str, command: str) -> set[str]:
    """Every NAME in `command NAME=value …` lines of the section's code blocks, continuation
    lines included — and in its prose's inline `command …` too (the WhatsApp step on Fly)."""
    names: set[str] = set()
    joined = re.sub(r"\\\n\s*", " ", text)
    value = r"(?:\$\([^)]*\)|\S+)"  # a word, or a command's output: $(openssl rand -hex 32)
    for found in re.finditer(rf"{command}((?:\s+[A-Z][A-Z0-9_]*={value})+)", joined):
        names |= set(re.findall(r"([A-Z][A-Z0-9_]*)=", found.group(1)))
    return names


def webhook_paths(text: str) -> set[str]:
    """The webhook paths the section tells the operator to enter in a console."""
    return set(re.findall(r"https://[^`\s]*?(/\w+/webhook)`", text))


def run_platform(command: DeployCommand) -> list[str]:
    return ["bash", "-c", command.shell] if command.shell is not None else list(command.argv)


@pytest.fixture
def fakes() -> Iterator[tuple[OpenAIServer, TelegramServer, TwilioServer]]:
    with OpenAIServer() as llm, TelegramServer() as telegram, TwilioServer() as twilio:
        yield llm, telegram, twilio


@pytest.mark.parametrize("title", list(SECTIONS))
def test_the_deploy_section_reaches_a_first_reply_on_each_channel(
    title: str,
    tmp_path: Path,
    database: str,
    fakes: tuple[OpenAIServer, TelegramServer, TwilioServer],
) -> None:
    llm, telegram, twilio = fakes
    text = section(title)
    command, commands_of = SECTIONS[title]
    named = variables_set(text, command)
    assert {
        "OPENAI_API_KEY",
        "PAM_PUBLIC_URL",
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_WEBHOOK_SECRET",
        "TWILIO_ACCOUNT_SID",
        "TWILIO_AUTH_TOKEN",
        "TWILIO_WHATSAPP_NUMBER",
    } <= named, f"{title} does not set every variable a channel needs: {sorted(named)}"
    assert webhook_paths(text) >= {"/whatsapp/webhook"}, "the Twilio console step"

    port = free_port()
    public = f"http://127.0.0.1:{port}"  # the app's URL, as the platform routes to it
    ours = {
        "OPENAI_API_KEY": "test",
        "PAM_DB_POOL_SIZE": "2",
        "PAM_SHUTDOWN_WAIT_SECONDS": "25",
        "PAM_PUBLIC_URL": public,
        "PAM_ADMIN_TOKEN": secrets.token_hex(32),
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": secrets.token_hex(32),
        "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
        "TWILIO_WHATSAPP_NUMBER": NUMBER,
    }
    assert named <= set(ours), f"a variable this test does not know: {named - set(ours)}"
    # Only what the section names, plus where the stand-ins listen.
    env = service_env(
        database,
        **{name: ours[name] for name in named},
        OPENAI_BASE_URL=llm.base_url,
        TELEGRAM_API_URL=telegram.base_url,
        TWILIO_API_URL=twilio.base_url,
        PAM_POLL_SECONDS="0.05",
    )
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    by_name = {c.name: c for c in commands_of()}
    release = by_name.get("release") or by_name["release_command"]

    done = subprocess.run(
        run_platform(release), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=START
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (registered,) = telegram.of("setWebhook")
    assert registered.params["url"] == f"{public}/telegram/webhook"

    with processes(tmp_path, "readme") as group:
        group.start("web", run_platform(by_name["web"]), dict(env, PORT=str(port)))
        group.start("worker", run_platform(by_name["worker"]), env)
        wait_healthy(public, group, timeout=START)

        # Telegram delivers to the URL the release registered, with its secret token.
        lena = updates.learner("Lena")
        posted = requests.post(
            registered.params["url"],
            json=updates.text(lena, "Hola, ayer yo va al cine"),
            headers={"X-Telegram-Bot-Api-Secret-Token": registered.params["secret_token"]},
            timeout=10,
        )
        assert posted.status_code == 200, posted.text
        wait_for(lambda: bool(telegram.sent_texts(lena["id"])), START, "a Telegram reply")

        # Twilio posts to the URL the console step names, signed with the account's token.
        wa_id = new_wa_id()
        form = text_form(wa_id, "Hola Pam")
        url = f"{public}/whatsapp/webhook"
        posted = requests.post(url, data=form, headers={"X-Twilio-Signature": sign(url, form)})
        assert posted.status_code == 200, posted.text
        wait_for(lambda: bool(twilio.bodies(f"whatsapp:+{wa_id}")), START, "a WhatsApp reply")
