"""The `pam` command."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import ValidationError
from sqlalchemy.exc import OperationalError

from bot.settings import Settings
from memory import db

if TYPE_CHECKING:
    from bot.runtime import Pam
    from bot.worker import Worker

SETUP_HELP = """Pam needs a language model to talk to, and none is configured.

Use OpenAI:
    export OPENAI_API_KEY=sk-...            (PAM_MODEL defaults to gpt-4o-mini)

Or a local OpenAI-compatible server, e.g. Ollama (https://ollama.com):
    ollama pull llama3.1
    export OPENAI_BASE_URL=http://localhost:11434/v1
    export PAM_MODEL=llama3.1

(vLLM and LM Studio work the same way: point OPENAI_BASE_URL at their /v1 endpoint.)
Then run the pam command again."""


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise SystemExit(f"pam: invalid configuration: {problems}") from None


def _cannot_open(exc: OperationalError) -> str:
    return (
        f"pam: cannot open the database in DATABASE_URL: {exc.orig}. "
        "Check that the server is running, the credentials are right, or that a SQLite "
        "file's folder exists."
    )


def cmd_chat(args: argparse.Namespace) -> int:
    from bot.runtime import build
    from bot.terminal import chat

    settings = _settings()
    if not settings.llm_configured:
        print(SETUP_HELP, file=sys.stderr)
        return 2
    try:
        pam = build(settings, migrate=True)
    except db.DatabaseURLError as exc:
        print(f"pam: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(_cannot_open(exc), file=sys.stderr)
        return 2
    assert pam.scheduler is not None
    pam.scheduler.start()
    pam.runner.recover()
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")
    try:
        chat(pam, args.user)
    except KeyboardInterrupt:
        print(file=sys.stderr)
    finally:
        if not pam.close(settings.shutdown_wait_seconds):
            print(
                "pam: some memory updates did not finish in time; they resume next time.",
                file=sys.stderr,
            )
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    settings = _settings()
    try:
        engine = db.make_engine(settings.database_url)
        db.upgrade(engine)
    except db.DatabaseURLError as exc:
        print(f"pam: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(_cannot_open(exc), file=sys.stderr)
        return 2
    engine.dispose()
    print("pam: database is up to date")
    return 0


def _log_level(default: str) -> str:
    level = (os.environ.get("PAM_LOG_LEVEL") or default).strip().upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        print(
            f"pam: ignoring PAM_LOG_LEVEL={level!r}; use DEBUG, INFO, WARNING or ERROR",
            file=sys.stderr,
        )
        return default
    return level


def _service_logging() -> None:
    # Services log to stdout, one line per event, INFO by default (no bodies, no secrets).
    logging.basicConfig(
        level=_log_level("INFO"),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stdout,
        force=True,
    )
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _stop_on_sigterm() -> threading.Event:
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def _start_worker(settings: Settings, migrate: bool) -> tuple[Pam, Worker]:
    from bot.runtime import build
    from bot.worker import Worker
    from webhooks.outbound import senders

    pam = build(settings, migrate=migrate)
    worker = Worker(pam, senders(settings))
    assert pam.scheduler is not None
    worker.start(pam.scheduler, settings.worker_threads, settings.delivery_threads)
    pam.scheduler.start()
    pam.runner.recover()
    return pam, worker


def cmd_worker(args: argparse.Namespace) -> int:
    _service_logging()
    settings = _settings()
    if not settings.llm_configured:
        print(SETUP_HELP, file=sys.stderr)
        return 2
    stop = _stop_on_sigterm()
    try:
        pam, worker = _start_worker(settings, migrate=False)
    except db.DatabaseURLError as exc:
        print(f"pam: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(_cannot_open(exc), file=sys.stderr)
        return 2
    logging.getLogger("pam.worker").info(
        "worker started inbox_lanes=%d delivery_lanes=%d",
        settings.worker_threads,
        settings.delivery_threads,
    )
    stop.wait()
    logging.getLogger("pam.worker").info("worker stopping")
    worker.stop()
    pam.close(settings.shutdown_wait_seconds)
    worker.close_senders()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import waitress

    from webhooks import create_app

    _service_logging()
    settings = _settings()
    if not settings.llm_configured:
        print(SETUP_HELP, file=sys.stderr)
        return 2
    try:
        pam, worker = _start_worker(settings, migrate=True)
    except db.DatabaseURLError as exc:
        print(f"pam: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(_cannot_open(exc), file=sys.stderr)
        return 2
    app = create_app(settings, engine=pam.engine, on_inbound=worker.wake)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        waitress.serve(app, host=args.host, port=settings.port, threads=8, ident="pam")
    except KeyboardInterrupt:
        pass
    finally:
        worker.stop()
        pam.close(settings.shutdown_wait_seconds)
        worker.close_senders()
        app.extensions["pam"].close()
    return 0


TELEGRAM_SETUP = """Telegram needs TELEGRAM_BOT_TOKEN (from @BotFather).
For the webhook, also set TELEGRAM_WEBHOOK_SECRET (letters, digits, _ and -; e.g. the output
of `python3 -c "import secrets; print(secrets.token_urlsafe(32))"`)."""


def cmd_telegram(args: argparse.Namespace) -> int:
    from webhooks.telegram_bot import TelegramClient

    _service_logging()
    settings = _settings()
    if not settings.telegram_bot_token:
        print(TELEGRAM_SETUP, file=sys.stderr)
        return 2
    action = args.telegram_command
    if action == "set-webhook":
        url = args.url or (
            f"{settings.public_url.rstrip('/')}/telegram/webhook" if settings.public_url else None
        )
        if not url or not settings.telegram_webhook_secret:
            print(
                "pam: give the webhook URL (or set PAM_PUBLIC_URL) and set "
                "TELEGRAM_WEBHOOK_SECRET.\n" + TELEGRAM_SETUP,
                file=sys.stderr,
            )
            return 2
        client = TelegramClient(settings.telegram_bot_token, settings.telegram_api_url)
        try:
            client.set_webhook(url, settings.telegram_webhook_secret)
        except Exception as exc:
            print(f"pam: Telegram refused the webhook: {exc}", file=sys.stderr)
            return 1
        finally:
            client.close()
        print(f"pam: Telegram now sends updates to {url}")
        return 0
    if action == "delete-webhook":
        client = TelegramClient(settings.telegram_bot_token, settings.telegram_api_url)
        try:
            client.delete_webhook()
        except Exception as exc:
            print(f"pam: Telegram refused to remove the webhook: {exc}", file=sys.stderr)
            return 1
        finally:
            client.close()
        print("pam: webhook removed; `pam telegram` can poll now")
        return 0
    return _poll_telegram(settings)


def _poll_telegram(settings: Settings) -> int:
    from memory.queue import Inbox
    from webhooks.telegram_bot import TelegramClient, WebhookIsSet
    from webhooks.telegram_poll import poll

    if not settings.llm_configured:
        print(SETUP_HELP, file=sys.stderr)
        return 2
    stop = _stop_on_sigterm()
    try:
        pam, worker = _start_worker(settings, migrate=True)
    except db.DatabaseURLError as exc:
        print(f"pam: {exc}", file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(_cannot_open(exc), file=sys.stderr)
        return 2
    client = worker.senders["telegram"]
    assert isinstance(client, TelegramClient)
    inbox = Inbox(pam.engine, settings.inbox_lease_seconds)
    logging.getLogger("pam.telegram").info("polling Telegram for updates")
    code = 0
    try:
        poll(client, inbox, stop, worker.wake)
    except WebhookIsSet:
        print(
            "pam: Telegram refuses polling because a webhook is set for this bot (409 "
            "Conflict). Run `pam telegram delete-webhook` first, or keep the webhook and run "
            "the web app and `pam worker` instead.",
            file=sys.stderr,
        )
        code = 2
    finally:
        stop.set()
        worker.stop()
        pam.close(settings.shutdown_wait_seconds)
        worker.close_senders()
    return code


def parser() -> argparse.ArgumentParser:
    """The `pam` argument parser."""
    top = argparse.ArgumentParser(
        prog="pam", description="Pam, a friend who speaks the language you are learning."
    )
    commands = top.add_subparsers(dest="command", required=True)

    chat = commands.add_parser("chat", help="talk to Pam in the terminal (reads stdin)")
    chat.add_argument(
        "--user", default=getpass.getuser(), help="who you are (default: your login name)"
    )
    chat.set_defaults(func=cmd_chat)

    worker = commands.add_parser(
        "worker", help="answer the inbox, run memory jobs, deliver replies (production)"
    )
    worker.set_defaults(func=cmd_worker)

    serve = commands.add_parser(
        "serve", help="web app and worker in one process (small, single-machine deployments)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.set_defaults(func=cmd_serve)

    telegram = commands.add_parser(
        "telegram", help="Telegram: long polling (default), or set-webhook / delete-webhook"
    )
    telegram.set_defaults(func=cmd_telegram, telegram_command=None)
    telegram_commands = telegram.add_subparsers(dest="telegram_command")
    set_webhook = telegram_commands.add_parser(
        "set-webhook", help="register the webhook, its secret token and the command menu"
    )
    set_webhook.add_argument(
        "url", nargs="?", help="the public webhook URL (default: $PAM_PUBLIC_URL/telegram/webhook)"
    )
    telegram_commands.add_parser("delete-webhook", help="remove the webhook (to poll instead)")

    database = commands.add_parser("db", help="database maintenance")
    db_commands = database.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply migrations")
    upgrade.set_defaults(func=cmd_db_upgrade)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pam` console script."""
    logging.basicConfig(
        level=_log_level("WARNING"),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
