"""The `pam` command as an operator meets it in the first hour: every --help, `.env.example`
copied to `.env`, a database nobody migrated, the channels `pam serve` reports, its --port,
and what `pam telegram set-webhook` checks before it calls Telegram. The commands run in this
process (tests/helpers/cli.py) but for the long-running ones' starts, which run the installed
`pam` for real."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import requests
from alembic.script import ScriptDirectory
from click.testing import CliRunner

from loopback.harness import (
    PAM_CMD,
    ROOT,
    free_port,
    postgres_schema,
    processes,
    service_env,
    wait_for,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from memory.database import db
from tests.conftest import PG_URL
from tests.helpers.cli import run_pam
from webhooks import cli, command_help
from webhooks import settings as pam_settings
from webhooks.services import webhook_url_problem

TIMEOUT = 60
SECRET = "pam-webhook_Secret-7f3a9c"
HELP_PATHS = [
    ["chat"],
    ["worker"],
    ["serve"],
    ["telegram"],
    ["telegram", "set-webhook"],
    ["telegram", "delete-webhook"],
    ["telegram", "status"],
    ["memory-jobs"],
    ["db"],
    ["db", "upgrade"],
    ["release"],
]


def env_names() -> set[str]:
    """Every environment variable Settings reads."""
    return set(pam_settings.env_names())


def help_text(path: list[str]) -> str:
    """What `pam PATH --help` prints, which exits 0."""
    result = CliRunner().invoke(cli.cli, [*path, "--help"], prog_name="pam")
    assert result.exit_code == 0, result.output
    return result.stdout


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The path after `pam` of every command and group under `group`."""
    for name, command in group.commands.items():
        yield [*path, name]
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


# -- --help ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", HELP_PATHS, ids=" ".join)
def test_every_subcommand_help_says_what_it_does_and_what_it_reads(path: list[str]) -> None:
    text = help_text(path)
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"Usage: pam {' '.join(path)}")
    description = rest.split("\n\n")[0]
    assert len(description) > 30, f"no description of what it does: {text}"
    assert "Reads" in text
    assert "DATABASE_URL" in text or path[0] == "telegram"
    read = {word.strip(",.") for word in text.split()} & env_names()
    assert read, f"no environment variable named: {text}"


def test_the_help_names_every_setting_and_nothing_that_is_not_one() -> None:
    listed = {name for names in command_help.READS.values() for name in names}
    assert listed - env_names() == set(), "a name in READS that no setting reads"
    assert env_names() - listed == set(), (
        "a setting no --help mentions: add it to webhooks/command_help.py"
    )


@pytest.mark.parametrize("command", ["chat", "worker", "serve", "telegram", "memory-jobs"])
def test_every_command_with_a_connection_pool_names_its_size(command: str) -> None:
    # Each of them builds Pam (bot/worker/runtime.py), whose pool PAM_DB_POOL_SIZE bounds: the
    # variable an operator sets to fit a small Postgres plan (docs/deploy/scaling.md).
    assert "PAM_DB_POOL_SIZE" in help_text([command])


def test_every_command_has_a_description_and_names_each_variable_it_reads() -> None:
    paths = list(commands(cli.cli))
    assert sorted(paths) == sorted(HELP_PATHS), "a command HELP_PATHS does not test"
    assert {" ".join(path) for path in paths} == set(command_help.READS) - {"web"}
    for path in paths:
        text = help_text(path)
        description = text.partition("\n\n")[2].split("\n\n")[0]
        assert len(description) > 30, f"no description of what it does: {text}"
        assert "Example" in text, f"no example: {text}"
        words = {word.strip(",.") for word in text.split()}
        assert set(command_help.READS[" ".join(path)]) <= words, (
            f"a variable it reads is not named: {text}"
        )
    for command in cli.cli.commands.values():
        assert command.short_help, f"pam --help lists {command.name} without a summary"


def test_serve_has_a_port_flag_beside_the_port_variable() -> None:
    assert cli.serve.make_context("serve", ["--port", "9001"]).params["port"] == 9001
    assert cli.serve.make_context("serve", []).params["port"] is None  # then $PORT, else 8000
    text = help_text(["serve"])
    assert "--port PORT" in text and "$PORT" in text and "--host HOST" in text


def test_the_top_level_help_lists_the_commands_and_the_web_process(tmp_path: Path) -> None:
    code, out, err = run_pam("--help", cwd=tmp_path, env=service_env("sqlite:///unused.db"))
    assert code == 0, err
    for command in ("chat", "worker", "serve", "telegram", "memory-jobs", "db"):
        assert re.search(rf"^  {command} +\S", out, re.M), f"{command} has no summary: {out}"
    assert "webhooks.app:create_app()" in out and "PAM_DB_POOL_SIZE" in out


# -- .env.example, copied as it is ---------------------------------------------------------


def test_env_example_lists_every_setting_an_operator_sets() -> None:
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.M))
    # The platforms set these on every process; .env.example names them in a comment.
    set_by_platforms = {"DYNO", "FLY_APP_NAME"}
    assert env_names() - set_by_platforms - listed == set()
    assert listed - env_names() == set()


@pytest.mark.slow
def test_env_example_copied_to_dotenv_loads_for_every_command(
    tmp_path: Path, llm: OpenAIServer
) -> None:
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    env = service_env("unused")
    del env["DATABASE_URL"]  # .env's sqlite:///pam.db, in the working directory
    env["OPENAI_BASE_URL"] = llm.base_url  # the one thing .env.example leaves to the operator

    def run(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        code, out, err = run_pam(*args, cwd=tmp_path, env=env, stdin=stdin)
        assert "invalid configuration" not in err, err
        assert "Traceback" not in err, err
        return code, out, err

    code, out, _ = run("db", "upgrade")
    assert code == 0 and "pam: applied" in out
    assert (tmp_path / "pam.db").is_file()

    code, out, _ = run("chat", "--user", "lena", stdin=b"Hola!\n")
    assert code == 0 and out.startswith("pam> Respuesta 1")

    for telegram in (["set-webhook"], ["delete-webhook"], []):  # [] polls
        code, _, err = run("telegram", *telegram)
        assert code == 2 and "TELEGRAM_BOT_TOKEN" in err, err  # the one thing it lacks

    port = free_port()
    long_running = {
        "worker": ("worker started", []),
        "memory-jobs": ("memory jobs started", []),
        "serve": ("channels: telegram off", ["--port", str(port)]),
    }
    with processes(tmp_path) as group:
        for name, (started, flags) in long_running.items():
            process = group.start(name, [*PAM_CMD, name, *flags], env)
            wait_for(lambda p=process, s=started: s in p.tail(200), TIMEOUT, f"{name} to start")
            if name == "serve":
                wait_for(lambda: healthy(port), TIMEOUT, "pam serve to listen")
            process.popen.send_signal(signal.SIGTERM)
            assert process.popen.wait(TIMEOUT) == 0, process.tail()
            assert "invalid configuration" not in process.tail(200)
            assert "Traceback" not in process.tail(200)


def healthy(port: int) -> bool:
    """Whether `pam serve` on `port` answers its health check (it logs its channels just
    before waitress starts listening)."""
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok
    except requests.ConnectionError:
        return False


# -- a database nobody migrated --------------------------------------------------------------


def older_schema(url: str) -> None:
    """Migrate `url` to the revision before the newest."""
    engine = db.make_engine(url)
    try:
        scripts = ScriptDirectory.from_config(db.alembic_config(engine))
        head = scripts.get_revision(scripts.get_current_head())
        assert head is not None and isinstance(head.down_revision, str)
        db.upgrade(engine, head.down_revision)
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", ["worker", "memory-jobs"])
@pytest.mark.parametrize("state", ["no file", "empty file", "older schema"])
def test_a_command_that_does_not_migrate_says_once_to_run_db_upgrade(
    tmp_path: Path, command: str, state: str
) -> None:
    path = tmp_path / "pam.db"
    if state == "empty file":
        sqlite3.connect(path).close()
    elif state == "older schema":
        older_schema(f"sqlite:///{path}")
    env = service_env(f"sqlite:///{path}", OPENAI_BASE_URL="http://127.0.0.1:9/v1")

    code, out, err = run_pam(command, cwd=tmp_path, env=env)

    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert (out + err).count("pam db upgrade") == 1, out + err
    assert err.startswith("pam: ")
    assert path.exists() is (state != "no file"), "no empty SQLite file is made on the way"


@pytest.mark.parametrize("command", [["worker"], ["memory-jobs"], ["db", "upgrade"], ["chat"]])
def test_a_file_that_is_no_database_is_said_in_one_line_and_left_alone(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "notes.txt"  # DATABASE_URL pointed at the wrong file
    path.write_text("not a database\n" * 100)
    env = service_env(f"sqlite:///{path}", OPENAI_BASE_URL="http://127.0.0.1:9/v1")

    code, out, err = run_pam(*command, cwd=tmp_path, env=env)

    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert "cannot open the database in DATABASE_URL: file is not a database" in err
    assert path.read_text() == "not a database\n" * 100


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_the_worker_on_an_empty_postgres_schema_says_to_run_db_upgrade(tmp_path: Path) -> None:
    assert PG_URL
    with postgres_schema(PG_URL) as url:
        env = service_env(url, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
        code, out, err = run_pam("worker", cwd=tmp_path, env=env)
    assert code == 2, out + err
    assert "no tables yet" in err and (out + err).count("pam db upgrade") == 1


# -- pam serve: the channels, the port -------------------------------------------------------


@pytest.mark.slow
def test_serve_reports_its_channels_and_listens_on_the_port_flag(
    tmp_path: Path, llm: OpenAIServer
) -> None:
    port, other = free_port(), free_port()
    env = service_env(
        f"sqlite:///{tmp_path / 'pam.db'}",
        OPENAI_BASE_URL=llm.base_url,
        PORT=str(other),
        TELEGRAM_BOT_TOKEN=TOKEN,
        PAM_API_TOKEN="test-api-token-9b0d",
        PAM_API_CALLBACK_URL="http://127.0.0.1:9/replies",
    )
    with processes(tmp_path) as group:
        serve = group.start("serve", [*PAM_CMD, "serve", "--port", str(port)], env)
        wait_for(lambda: "channels: " in serve.tail(200), TIMEOUT, "pam serve to start")
        wait_for(lambda: healthy(port), TIMEOUT, "pam serve to listen")
        log = serve.tail(200)
        serve.popen.send_signal(signal.SIGTERM)
        assert serve.popen.wait(TIMEOUT) == 0, serve.tail()
    assert "channels: telegram off (TELEGRAM_WEBHOOK_SECRET not set); " in log
    assert (
        "whatsapp off (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_WHATSAPP_NUMBER not set)"
        in log
    )
    assert "http api on (POST /api/messages); admin off (PAM_ADMIN_TOKEN not set)" in log
    assert log.count("channels: ") == 1
    assert "no channel is on" not in log
    assert TOKEN not in log and "api-token" not in log


def test_serve_refuses_a_port_that_is_no_port(tmp_path: Path) -> None:
    env = service_env(f"sqlite:///{tmp_path / 'pam.db'}", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    code, _, err = run_pam("serve", "--port", "70000", cwd=tmp_path, env=env)
    assert code == 2 and "--port 70000" in err and "Traceback" not in err
    assert not (tmp_path / "pam.db").exists()


# -- pam telegram set-webhook ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://pam.example/telegram/webhook", None),
        ("https://pam.example:8443/telegram/webhook", None),
        ("http://pam.example/telegram/webhook", "https only"),
        ("https://pam.example:8000/telegram/webhook", "ports 443, 80, 88 and 8443"),
        ("pam.example/telegram/webhook", "not a full URL"),
        ("https:///telegram/webhook", "not a full URL"),
        ("https://pam.example:99999/telegram/webhook", "not a URL"),
        ("https://pam example/telegram/webhook", "spaces"),
        ("ftp://pam.example/telegram/webhook", "not a full URL"),
    ],
)
def test_webhook_urls_telegram_would_refuse_are_caught_first(url: str, problem: str | None) -> None:
    found = webhook_url_problem(url, local_bot_api=False)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and url in found


def test_a_local_bot_api_server_takes_http_and_any_port() -> None:
    assert webhook_url_problem("http://127.0.0.1:8000/telegram/webhook", local_bot_api=True) is None
    assert webhook_url_problem("127.0.0.1/telegram/webhook", local_bot_api=True) is not None


def telegram_env(tmp_path: Path, **knobs: str) -> dict[str, str]:
    return service_env(f"sqlite:///{tmp_path / 'pam.db'}", **knobs)


@pytest.fixture
def bot_env(tmp_path: Path, telegram_server: TelegramServer) -> dict[str, str]:
    """A bot with its token and webhook secret, against the fake Bot API."""
    return telegram_env(
        tmp_path,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_URL=telegram_server.base_url,
    )


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in names}


def test_set_webhook_refuses_an_http_url_before_calling_telegram(
    tmp_path: Path, bot_env: dict[str, str]
) -> None:
    # No TELEGRAM_API_URL: this would go to the real Telegram, were it not refused first.
    env = without(bot_env, "TELEGRAM_API_URL")
    code, out, err = run_pam(
        "telegram", "set-webhook", "http://pam.example/telegram/webhook", cwd=tmp_path, env=env
    )
    assert code == 2, out + err
    assert "https only" in err and "Nothing was sent to Telegram" in err
    assert "Traceback" not in err


def test_set_webhook_refuses_a_malformed_url_and_sends_nothing(
    tmp_path: Path, telegram_server: TelegramServer, bot_env: dict[str, str]
) -> None:
    code, _, err = run_pam("telegram", "set-webhook", "pam.example/hook", cwd=tmp_path, env=bot_env)
    assert code == 2 and "not a full URL" in err
    assert telegram_server.calls == []


def test_set_webhook_names_only_what_is_missing(
    tmp_path: Path, telegram_server: TelegramServer, bot_env: dict[str, str]
) -> None:
    url = "https://pam.example/telegram/webhook"
    no_secret_env = without(bot_env, "TELEGRAM_WEBHOOK_SECRET")

    _, _, no_secret = run_pam("telegram", "set-webhook", url, cwd=tmp_path, env=no_secret_env)
    _, _, no_url = run_pam("telegram", "set-webhook", cwd=tmp_path, env=bot_env)
    _, _, nothing = run_pam("telegram", "set-webhook", cwd=tmp_path, env=telegram_env(tmp_path))
    _, _, polling = run_pam("telegram", cwd=tmp_path, env=telegram_env(tmp_path))

    assert "TELEGRAM_WEBHOOK_SECRET" in no_secret
    assert "TELEGRAM_BOT_TOKEN" not in no_secret and "PAM_PUBLIC_URL" not in no_secret
    assert "PAM_PUBLIC_URL" in no_url and "webhook URL" in no_url
    assert "TELEGRAM_BOT_TOKEN" not in no_url and "TELEGRAM_WEBHOOK_SECRET" not in no_url
    for name in ("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET", "PAM_PUBLIC_URL"):
        assert name in nothing
    assert "TELEGRAM_BOT_TOKEN" in polling and "BotFather" in polling
    assert "TELEGRAM_WEBHOOK_SECRET" not in polling, "polling needs no webhook secret"
    assert telegram_server.calls == []


def test_set_webhook_notes_a_path_that_is_not_pams_route(
    tmp_path: Path, telegram_server: TelegramServer, bot_env: dict[str, str]
) -> None:
    code, out, err = run_pam(
        "telegram", "set-webhook", "https://pam.example/tg", cwd=tmp_path, env=bot_env
    )
    assert code == 0, err
    assert "/telegram/webhook" in err and "https://pam.example/tg" in out
    [hook] = telegram_server.of("setWebhook")
    assert hook.params["url"] == "https://pam.example/tg"


@pytest.mark.slow
def test_serve_on_a_port_in_use_says_so_and_stops(tmp_path: Path, llm: OpenAIServer) -> None:
    # A real process: `pam serve` gets as far as starting its worker before it cannot listen,
    # and what it leaves for the interpreter's exit to close would outlive a test in-process.
    env = service_env(f"sqlite:///{tmp_path / 'pam.db'}", OPENAI_BASE_URL=llm.base_url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*PAM_CMD, "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=TIMEOUT,
        )
    code, err = done.returncode, done.stderr.decode()
    assert code == 2, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
