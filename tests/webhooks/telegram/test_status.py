"""`pam telegram status`, in-process through click's CliRunner with the real PTB Bot against
the loopback Bot API: where Telegram delivers, and what each delivery error means for Pam.
The error texts are Telegram's own, as getWebhookInfo reports them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from loopback.telegram_server import TOKEN, USERNAME, TelegramServer
from webhooks import cli
from webhooks.telegram.status import WebhookState, advice_for, report

PUBLIC = "https://pam.example"
HOOK = f"{PUBLIC}/telegram/webhook"


@pytest.fixture
def bot(monkeypatch: pytest.MonkeyPatch, telegram_server: TelegramServer, tmp_path: object) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/pam.db")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_URL", telegram_server.base_url)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "a-long-enough-webhook-secret")
    monkeypatch.setenv("PAM_PUBLIC_URL", PUBLIC)


def status() -> Result:
    return CliRunner().invoke(cli.cli, ["telegram", "status"], prog_name="pam")


@pytest.mark.usefixtures("bot")
def test_without_a_webhook_it_says_to_run_set_webhook(telegram_server: TelegramServer) -> None:
    result = status()
    assert result.exit_code == 1
    assert f"bot @{USERNAME}" in result.output
    assert "no webhook is set" in result.output and "set-webhook" in result.output


@pytest.mark.usefixtures("bot")
def test_after_set_webhook_updates_reach_pam(telegram_server: TelegramServer) -> None:
    set_up = CliRunner().invoke(cli.cli, ["telegram", "set-webhook"], prog_name="pam")
    assert set_up.exit_code == 0, set_up.output
    result = status()
    assert result.exit_code == 0, result.output
    assert f"webhook {HOOK}" in result.output
    assert "0 updates wait" in result.output


@pytest.mark.usefixtures("bot")
def test_a_refused_secret_is_named_with_what_to_do(telegram_server: TelegramServer) -> None:
    telegram_server.webhook_url = HOOK
    telegram_server.webhook_pending = 4
    telegram_server.webhook_error = "Wrong response from the webhook: 403 Forbidden"
    result = status()
    assert result.exit_code == 1
    assert "403 Forbidden" in result.output and "4 updates wait" in result.output
    assert "TELEGRAM_WEBHOOK_SECRET" in result.output
    assert "a-long-enough-webhook-secret" not in result.output, "never the secret itself"


@pytest.mark.usefixtures("bot")
def test_a_webhook_elsewhere_than_the_public_url_is_said(telegram_server: TelegramServer) -> None:
    telegram_server.webhook_url = "https://old-app.example/telegram/webhook"
    result = status()
    assert result.exit_code == 1
    assert f"PAM_PUBLIC_URL gives {HOOK}" in result.output


@pytest.mark.parametrize(
    ("error", "names"),
    [
        ("Wrong response from the webhook: 403 Forbidden", "TELEGRAM_WEBHOOK_SECRET"),
        ("Wrong response from the webhook: 404 Not Found", "TELEGRAM_BOT_TOKEN"),
        ("Wrong response from the webhook: 503 Service Unavailable", "/healthz"),
        ("Wrong response from the webhook: 502 Bad Gateway", "/healthz"),
        ("Connection refused", "PAM_PUBLIC_URL"),
        ("Connection timed out", "/healthz"),
        ("Read timeout expired", "/healthz"),
        ("Failed to resolve host: Name or service not known", "PAM_PUBLIC_URL"),
        ("SSL error {error:0A000086:SSL routines::certificate verify failed}", "certificate"),
    ],
)
def test_each_delivery_error_telegram_reports_gets_advice(error: str, names: str) -> None:
    advice = advice_for(error)
    assert advice is not None and names in advice


def test_an_unknown_error_is_shown_without_a_guess() -> None:
    state = WebhookState(HOOK, pending=2, last_error_at=None, last_error="Something new")
    lines, ok = report(state, "pam_bot", HOOK)
    assert not ok
    assert "last delivery error (lately): Something new" in lines
    assert not any(line.lstrip().startswith("→") for line in lines)


def test_an_old_error_with_nothing_waiting_is_no_problem() -> None:
    state = WebhookState(HOOK, pending=0, last_error_at=None, last_error="Connection refused")
    _, ok = report(state, "pam_bot", HOOK)
    assert ok
