"""Which channels a process serves and why the others are off: the one line every long-running
Pam process logs at start (the web process, `pam worker`, `pam serve`, `pam telegram`), read
from the settings alone, so that all of them judge a channel by the same rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from webhooks.settings import Settings

# What a process does with the channels: the web process takes their webhooks (and the
# operator's endpoints); a worker answers and delivers; `pam serve` does both; `pam telegram`
# polls Telegram instead of taking its webhook, and delivers like a worker.
Role = Literal["web", "worker", "serve", "polling"]


class LineLog(Protocol):
    """Where the line goes: a `logging.Logger`, or gunicorn's own log in its master."""

    def info(self, msg: str, *args: object) -> None: ...

    def warning(self, msg: str, *args: object) -> None: ...


@dataclass(frozen=True)
class Channel:
    """A channel: the variables it needs to work end to end (on Heroku and Fly every process
    reads the same ones), and how its messages come in."""

    name: str
    needs: tuple[str, ...]
    route: str
    web_only: bool = False  # the operator's endpoints: no worker has anything to do with them


CHANNELS = (
    Channel(
        "telegram", ("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"), "POST /telegram/webhook"
    ),
    Channel(
        "whatsapp",
        ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_WHATSAPP_NUMBER"),
        "POST /whatsapp/webhook",
    ),
    Channel("http api", ("PAM_API_TOKEN", "PAM_API_CALLBACK_URL"), "POST /api/messages"),
    Channel(
        "admin",
        ("PAM_ADMIN_TOKEN",),
        "/admin/learners and GET /metrics",
        web_only=True,
    ),
)
# Polling needs no webhook secret: Pam asks Telegram for the updates itself.
POLLING_NEEDS = ("TELEGRAM_BOT_TOKEN",)


@dataclass(frozen=True)
class ChannelState:
    """One channel in one process: on, and how it works; or off, and what would turn it on."""

    name: str
    on: bool
    detail: str


def channel_report(settings: Settings, role: Role = "serve") -> list[ChannelState]:
    """Each channel a process in `role` has to do with, whether it is on, and its route or
    the variables that are not set."""
    report: list[ChannelState] = []
    for channel in CHANNELS:
        if channel.web_only and role in ("worker", "polling"):
            continue
        polled = channel.name == "telegram" and role == "polling"
        needs = POLLING_NEEDS if polled else channel.needs
        unset = [variable for variable in needs if not settings.value_of(variable)]
        if unset:
            report.append(ChannelState(channel.name, False, ", ".join(unset) + " not set"))
            continue
        detail = "polling getUpdates" if polled else channel.route
        if channel.name == "whatsapp":
            detail += (
                "; signatures checked against PAM_PUBLIC_URL"
                if settings.web.public_url
                else "; signatures checked against the Host and X-Forwarded-* headers (set "
                "PAM_PUBLIC_URL behind a proxy that rewrites them)"
            )
        report.append(ChannelState(channel.name, True, detail))
    return report


def channels_line(settings: Settings, role: Role) -> str:
    """The start-up line: `channels: telegram on (…); whatsapp off (… not set); …`."""
    states = channel_report(settings, role)
    return "channels: " + "; ".join(
        f"{state.name} {'on' if state.on else 'off'} ({state.detail})" for state in states
    )


def log_channels(settings: Settings, role: Role, log: LineLog) -> None:
    """Log the start-up line, and a warning when no learner can reach this Pam at all."""
    log.info("%s", channels_line(settings, role))
    if not any(state.on for state in channel_report(settings, role) if state.name != "admin"):
        log.warning(
            "no channel is on: nothing can reach this Pam (see docs/deploy/service.md; "
            "`pam chat` needs none)"
        )
