"""`pam db upgrade` and `pam release`, what a deploy's release phase runs (the Procfile's
`release:`, fly.toml's release_command): the database migrated, saying what was applied, then
Telegram told where the webhook is, so that the deploy ends with a channel that answers.

What fails a release is what a retry cannot fix: a database that cannot be migrated, a
webhook configuration Telegram would refuse, Telegram refusing the token. Telegram being
unreachable or busy only warns: the deploy goes on, and `pam telegram set-webhook` (or the
next release) registers the webhook, which Telegram keeps from the last time meanwhile."""

from __future__ import annotations

import sys

from sqlalchemy.exc import DatabaseError

from bot import logs
from memory.database import db
from webhooks.services import TELEGRAM_SECRET_HELP, webhook_url_problem
from webhooks.settings import Settings
from webhooks.startup import fail, load_settings

# Exit statuses: what the release phase reads.
REFUSED = 1  # Telegram refused what it was given (the token, the URL)
MISCONFIGURED = 2  # said before anything was sent, as every `pam` command does


def migrate(settings: Settings) -> str:
    """Bring the database to this Pam's newest migration; the line saying what was done."""
    try:
        engine = db.make_engine(settings.database_url)
        try:
            applied = db.upgrade(engine)
            current = db.current_migration(engine)
        finally:
            engine.dispose()
    except db.DatabaseURLError as exc:
        fail(f"pam: {exc}")
    except DatabaseError as exc:  # unreachable, refused, or a file that is no database
        fail(f"pam: cannot open the database in DATABASE_URL: {exc.orig}")
    if not applied:
        return f"pam: database is up to date (at {current})"
    count = f"{len(applied)} migration{'s' if len(applied) > 1 else ''}"
    span = applied[0] if len(applied) == 1 else f"{applied[0]} → {applied[-1]}"
    return f"pam: applied {count} ({span})"


def run_upgrade() -> int:
    """`pam db upgrade`: migrate and say what was applied, or that nothing was needed."""
    settings = load_settings()
    logs.configure(settings.log_level or logs.COMMAND_LEVEL, sys.stderr)
    print(migrate(settings))
    return 0


def register_webhook(settings: Settings) -> int:
    """Register $PAM_PUBLIC_URL/telegram/webhook with Telegram when the bot token and the
    public URL are set; say in one line why not otherwise. The exit status of the release."""
    from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError

    from webhooks.telegram.client import TelegramClient

    token, public_url = settings.telegram.bot_token, settings.web.public_url
    if not token or not public_url:
        unset = " and ".join(
            name
            for name, value in (("TELEGRAM_BOT_TOKEN", token), ("PAM_PUBLIC_URL", public_url))
            if not value
        )
        print(f"pam: Telegram webhook not registered: {unset} not set")
        return 0
    if not settings.telegram.webhook_secret:
        # The web app refuses every update without it: this Telegram could never answer.
        print(f"pam: the Telegram webhook needs {TELEGRAM_SECRET_HELP}.", file=sys.stderr)
        return MISCONFIGURED
    url = f"{public_url.rstrip('/')}/telegram/webhook"
    problem = webhook_url_problem(url, local_bot_api=bool(settings.telegram.api_url))
    if problem:
        print(
            f"pam: {problem} (from PAM_PUBLIC_URL). Nothing was sent to Telegram.", file=sys.stderr
        )
        return MISCONFIGURED
    client = TelegramClient(token, settings.telegram.api_url)
    try:
        client.set_webhook(url, settings.telegram.webhook_secret)
    except BadRequest as exc:  # a NetworkError to PTB, but Telegram's answer about the URL
        print(f"pam: Telegram refused the webhook {url}: {said(exc, token)}", file=sys.stderr)
        return REFUSED
    except (NetworkError, RetryAfter) as exc:  # unreachable, timed out, 5xx, flood control
        print(
            f"pam: warning: Telegram did not answer ({said(exc, token)}); the webhook "
            "stays as Telegram last had it. Run `pam telegram set-webhook` when it answers.",
            file=sys.stderr,
        )
        return 0
    except TelegramError as exc:  # InvalidToken (401, 404), Forbidden: the token is wrong
        print(f"pam: Telegram refused the bot token ({said(exc, token)})", file=sys.stderr)
        return REFUSED
    finally:
        client.close()
    print(f"pam: Telegram now sends updates to {url}")
    return 0


def said(exc: Exception, token: str) -> str:
    """What went wrong, never with the token (an HTTP error may quote the URL it is in)."""
    return f"{type(exc).__name__}: {exc}".replace(token, "<token>")


def run_release() -> int:
    """`pam release`: migrate, then register the Telegram webhook where it is configured."""
    settings = load_settings()
    logs.configure(settings.log_level or logs.COMMAND_LEVEL, sys.stderr)
    print(migrate(settings))
    return register_webhook(settings)
