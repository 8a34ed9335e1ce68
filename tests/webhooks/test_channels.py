"""The line every long-running process logs at start: which channels are on, and for each one
that is off, the variables that are not set. One function decides it for the web process,
`pam worker`, `pam serve` and `pam telegram`."""

from __future__ import annotations

import logging

import pytest

from loopback.telegram_server import TOKEN
from webhooks.channels import ChannelState, channel_report, channels_line, log_channels
from webhooks.settings import Settings

SECRET = "pam-webhook_Secret-7f3a9c"
ADMIN_TOKEN = "admin-token-5e1f"
API_TOKEN = "api-token-77d2ab"
AUTH_TOKEN = "twilio-auth-token-0123456789abcd"
EVERYTHING = Settings(
    web={"admin_token": ADMIN_TOKEN, "public_url": "https://pam.example"},
    api={"token": API_TOKEN, "callback_url": "https://front.example/replies"},
    telegram={"bot_token": TOKEN, "webhook_secret": SECRET},
    whatsapp={"account_sid": "AC123", "auth_token": AUTH_TOKEN, "number": "whatsapp:+14155238886"},
)


def test_with_nothing_configured_every_channel_is_off_naming_its_variables() -> None:
    assert channels_line(Settings(), "web") == (
        "channels: telegram off (TELEGRAM_BOT_TOKEN, TELEGRAM_WEBHOOK_SECRET not set); "
        "whatsapp off (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_WHATSAPP_NUMBER not set); "
        "http api off (PAM_API_TOKEN, PAM_API_CALLBACK_URL not set); "
        "admin off (PAM_ADMIN_TOKEN not set)"
    )


def test_a_half_configured_channel_names_only_what_is_missing() -> None:
    settings = Settings(
        api={"token": API_TOKEN},
        telegram={"bot_token": TOKEN},
        whatsapp={"account_sid": "AC123", "auth_token": AUTH_TOKEN},
    )
    assert channel_report(settings, "worker") == [
        ChannelState("telegram", False, "TELEGRAM_WEBHOOK_SECRET not set"),
        ChannelState("whatsapp", False, "TWILIO_WHATSAPP_NUMBER not set"),
        ChannelState("http api", False, "PAM_API_CALLBACK_URL not set"),
    ]


def test_configured_channels_are_on_with_their_routes() -> None:
    assert channel_report(EVERYTHING, "serve") == [
        ChannelState("telegram", True, "POST /telegram/webhook"),
        ChannelState(
            "whatsapp", True, "POST /whatsapp/webhook; signatures checked against PAM_PUBLIC_URL"
        ),
        ChannelState("http api", True, "POST /api/messages"),
        ChannelState("admin", True, "/admin/learners and GET /metrics"),
    ]
    no_public_url = EVERYTHING.replace(web={"public_url": None})
    assert "X-Forwarded-*" in channel_report(no_public_url, "serve")[1].detail


def test_the_operators_endpoints_are_the_web_process_s_alone() -> None:
    roles = ("web", "serve", "worker", "polling")
    names = {role: [s.name for s in channel_report(EVERYTHING, role)] for role in roles}
    assert names["web"] == names["serve"] == ["telegram", "whatsapp", "http api", "admin"]
    assert names["worker"] == names["polling"] == ["telegram", "whatsapp", "http api"]


def test_polling_telegram_needs_no_webhook_secret() -> None:
    settings = Settings(telegram={"bot_token": TOKEN})
    assert channel_report(settings, "polling")[0] == ChannelState(
        "telegram", True, "polling getUpdates"
    )
    assert channel_report(settings, "worker")[0].on is False  # its web refuses every update


def test_the_line_holds_no_secret() -> None:
    line = channels_line(EVERYTHING, "serve")
    for secret in (TOKEN, SECRET, API_TOKEN, ADMIN_TOKEN, AUTH_TOKEN, "AC123", "front.example"):
        assert secret not in line


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        (Settings(web={"admin_token": ADMIN_TOKEN}), True),  # only the operator's endpoints
        (Settings(api={"token": API_TOKEN, "callback_url": "https://front.example/r"}), False),
    ],
)
def test_a_process_no_learner_can_reach_says_so_once(
    caplog: pytest.LogCaptureFixture, settings: Settings, warned: bool
) -> None:
    with caplog.at_level(logging.INFO, logger="pam.test"):
        log_channels(settings, "web", logging.getLogger("pam.test"))
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0] == channels_line(settings, "web")
    assert any("no channel is on" in line for line in lines) is warned
    assert len(lines) == 1 + warned
