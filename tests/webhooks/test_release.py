"""`pam db upgrade` says which migrations it applied; `pam release`, a deploy's release phase,
migrates and then registers the Telegram webhook against the fake Bot API. What a retry
cannot fix fails the release (exit status non-zero); Telegram not answering only warns."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner, Result

from loopback.harness import free_port
from loopback.telegram_server import TOKEN, Failure, TelegramServer
from memory.database import db
from webhooks import cli

SECRET = "pam-release_Secret-42"
PUBLIC_URL = "https://pam.example"
WEBHOOK = f"{PUBLIC_URL}/telegram/webhook"


@pytest.fixture(autouse=True)
def own_logging() -> Iterator[None]:
    """The commands point the root logger at the runner's stderr: put it back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pam.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    return path


@pytest.fixture
def telegram(
    telegram_server: TelegramServer, monkeypatch: pytest.MonkeyPatch, database: Path
) -> TelegramServer:
    """A bot configured for webhooks, with the fake Bot API standing in for Telegram."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("TELEGRAM_API_URL", telegram_server.base_url)
    monkeypatch.setenv("PAM_PUBLIC_URL", PUBLIC_URL)
    return telegram_server


def pam(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), prog_name="pam")


def migrations() -> list[str]:
    """Every migration as `pam db upgrade` names it, oldest first."""
    scripts = ScriptDirectory.from_config(db.alembic_config(db.make_engine("sqlite://")))
    found = [db.migration_name(s.revision, s.doc) for s in scripts.walk_revisions()]
    return found[::-1]


# -- pam db upgrade ---------------------------------------------------------------------------


def test_db_upgrade_says_which_migrations_it_applied_then_that_none_were_needed(
    database: Path,
) -> None:
    names = migrations()
    assert names[0] == "0001 initial schema"

    first, again = pam("db", "upgrade"), pam("db", "upgrade")

    assert first.exit_code == 0, first.output
    assert f"pam: applied {len(names)} migrations ({names[0]} → {names[-1]})\n" in first.stdout
    assert again.exit_code == 0, again.output
    assert again.stdout == f"pam: database is up to date (at {names[-1]})\n"


def test_db_upgrade_from_the_previous_schema_names_the_one_migration(database: Path) -> None:
    names = migrations()
    engine = db.make_engine(f"sqlite:///{database}")
    db.upgrade(engine, names[-2].split()[0])
    engine.dispose()

    result = pam("db", "upgrade")

    assert result.exit_code == 0, result.output
    assert result.stdout == f"pam: applied 1 migration ({names[-1]})\n"


# -- pam release ------------------------------------------------------------------------------


def test_release_without_telegram_migrates_and_says_why_no_webhook(database: Path) -> None:
    result = pam("release")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("pam: applied ")
    assert (
        "pam: Telegram webhook not registered: TELEGRAM_BOT_TOKEN and PAM_PUBLIC_URL not set\n"
        in result.stdout
    )


def test_release_registers_the_webhook_with_its_secret(telegram: TelegramServer) -> None:
    result = pam("release")

    assert result.exit_code == 0, result.output
    assert f"pam: Telegram now sends updates to {WEBHOOK}\n" in result.stdout
    (call,) = telegram.of("setWebhook")
    assert call.params["url"] == WEBHOOK
    assert call.params["secret_token"] == SECRET
    assert telegram.of("setMyCommands")
    assert TOKEN not in result.output and SECRET not in result.output


def test_release_with_a_token_but_no_public_url_skips_the_webhook(
    telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAM_PUBLIC_URL")

    result = pam("release")

    assert result.exit_code == 0, result.output
    assert "webhook not registered: PAM_PUBLIC_URL not set" in result.stdout
    assert not telegram.calls


def test_release_without_the_webhook_secret_fails_before_calling_telegram(
    telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The web app would refuse every update: this deploy's Telegram could never answer.
    monkeypatch.delenv("TELEGRAM_WEBHOOK_SECRET")

    result = pam("release")

    assert result.exit_code == 2, result.output
    assert "TELEGRAM_WEBHOOK_SECRET" in result.stderr
    assert not telegram.calls


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (Failure("setWebhook", 401, "Unauthorized"), "refused the bot token (InvalidToken"),
        (Failure("setWebhook", 404, "Not Found"), "refused the bot token (InvalidToken"),
        (
            Failure("setWebhook", 400, "Bad Request: bad webhook: Failed to resolve host"),
            f"refused the webhook {WEBHOOK}: BadRequest: Bad webhook",
        ),
    ],
)
def test_telegram_refusing_the_token_or_the_url_fails_the_release(
    telegram: TelegramServer, failure: Failure, said: str
) -> None:
    telegram.fail_next(failure)

    result = pam("release")

    assert result.exit_code == 1, result.output
    assert said in result.stderr
    assert result.stdout.startswith("pam: applied ")  # the database was migrated first
    assert TOKEN not in result.output


@pytest.mark.parametrize(
    "failure",
    [
        Failure("setWebhook", 502, "Bad Gateway"),
        Failure("setWebhook", 500, "Internal Server Error"),
        Failure(
            "setWebhook", 429, "Too Many Requests: retry after 5", parameters={"retry_after": 5}
        ),
    ],
)
def test_telegram_in_trouble_only_warns_and_the_deploy_goes_on(
    telegram: TelegramServer, failure: Failure
) -> None:
    telegram.fail_next(failure)

    result = pam("release")

    assert result.exit_code == 0, result.output
    assert "pam: warning: Telegram did not answer" in result.stderr
    assert "Run `pam telegram set-webhook` when it answers" in result.stderr
    assert not telegram.of("setWebhook")


def test_telegram_unreachable_only_warns(
    telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_API_URL", f"http://127.0.0.1:{free_port()}/bot")  # nobody

    result = pam("release")

    assert result.exit_code == 0, result.output
    assert "pam: warning: Telegram did not answer (NetworkError" in result.stderr
    assert TOKEN not in result.output


def test_a_database_that_cannot_be_migrated_fails_the_release_before_telegram(
    telegram: TelegramServer, database: Path
) -> None:
    database.write_text("not a database\n" * 100)

    result = pam("release")

    assert result.exit_code == 2, result.output
    assert "cannot open the database in DATABASE_URL" in result.stderr
    assert not telegram.calls


def test_a_public_url_telegram_would_refuse_fails_the_release_before_calling_it(
    telegram: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without TELEGRAM_API_URL this would go to the real Telegram, were it not refused first.
    monkeypatch.delenv("TELEGRAM_API_URL")
    monkeypatch.setenv("PAM_PUBLIC_URL", "http://pam.example")

    result = pam("release")

    assert result.exit_code == 2, result.output
    assert "Telegram sends webhooks over https only" in result.stderr
    assert "(from PAM_PUBLIC_URL). Nothing was sent to Telegram." in result.stderr
