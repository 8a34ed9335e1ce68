"""`pam telegram status`: what Telegram says of the bot's webhook — where it delivers, how many
updates wait, the last delivery error — read as an operator needs it: what is wrong and what
to do. Telegram's own error texts are the ones its getWebhookInfo reports (Bot API,
"WebhookInfo": `last_error_message`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

# What a delivery error from Telegram means for Pam, by a pattern in Telegram's message
# (e.g. "Wrong response from the webhook: 403 Forbidden", "Connection refused").
ADVICE = (
    (
        r"\b403\b",
        "Pam refused Telegram's secret token: TELEGRAM_WEBHOOK_SECRET is not the secret "
        "set-webhook registered. Run `pam telegram set-webhook` again with the secret the web "
        "process has.",
    ),
    (
        r"\b404\b",
        "the web process does not serve /telegram/webhook: it needs TELEGRAM_BOT_TOKEN and "
        "TELEGRAM_WEBHOOK_SECRET in its own environment (its start-up line says which "
        "channels are on), or the URL's path is wrong.",
    ),
    (
        r"\b401\b",
        "something in front of Pam asked for credentials: Telegram sends none but the "
        "secret token header.",
    ),
    (
        r"\b5\d\d\b",
        "the web process answered with a server error or is not running: check that it is up "
        "(`GET /healthz`) and its log.",
    ),
    (
        r"connection refused",
        "nothing listens at that address: is the web process running, and is the URL the "
        "app's public one (PAM_PUBLIC_URL)?",
    ),
    (
        r"timed out|timeout",
        "the web process did not answer in time: check that it is up (`GET /healthz`).",
    ),
    (
        r"resolve host",
        "the URL's host name does not resolve: check PAM_PUBLIC_URL.",
    ),
    (
        r"\bssl\b|certificate",
        "Telegram could not verify the app's https certificate: it needs a certificate from a "
        "public authority (Heroku and Fly give one).",
    ),
)


@dataclass(frozen=True)
class WebhookState:
    """The fields of Telegram's WebhookInfo that say whether updates reach Pam."""

    url: str
    pending: int
    last_error_at: datetime | None
    last_error: str | None


def advice_for(error: str) -> str | None:
    """What Telegram's delivery error `error` means for Pam, or None when Pam cannot tell."""
    return next(
        (advice for pattern, advice in ADVICE if re.search(pattern, error, re.IGNORECASE)), None
    )


def report(state: WebhookState, username: str, expected_url: str | None) -> tuple[list[str], bool]:
    """The lines `pam telegram status` prints, and whether updates reach Pam's webhook (no
    webhook, another URL than PAM_PUBLIC_URL's, or updates waiting behind a delivery error
    are not)."""
    lines = [f"bot @{username}"]
    if not state.url:
        lines.append(
            "no webhook is set: Telegram keeps updates for polling (`pam telegram`). After a "
            "deploy, run `pam telegram set-webhook` (with PAM_PUBLIC_URL set)."
        )
        if state.pending:
            lines.append(f"{state.pending} updates wait at Telegram")
        return lines, False
    ok = True
    lines.append(f"webhook {state.url}")
    if expected_url and state.url != expected_url:
        ok = False
        lines.append(
            f"PAM_PUBLIC_URL gives {expected_url}: run `pam telegram set-webhook` to move the "
            "webhook there"
        )
    lines.append(f"{state.pending} updates wait at Telegram")
    if state.last_error:
        when = (
            state.last_error_at.strftime("%Y-%m-%d %H:%M UTC") if state.last_error_at else "lately"
        )
        lines.append(f"last delivery error ({when}): {state.last_error}")
        advice = advice_for(state.last_error)
        if advice:
            lines.append(f"  → {advice}")
        if state.pending:
            ok = False
    return lines, ok
