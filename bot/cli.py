"""The `pam` command: argument parsing, `pam chat` and `pam db upgrade`. The service commands
(worker, serve, telegram) live in bot/services.py."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from pydantic import ValidationError
from sqlalchemy.exc import OperationalError

from bot import logs
from bot.settings import Settings
from memory import db

if TYPE_CHECKING:
    from bot.runtime import Pam

SETUP_HELP = """Pam needs a language model to talk to, and none is configured.

Use OpenAI:
    export OPENAI_API_KEY=sk-...            (PAM_MODEL defaults to gpt-4o-mini)

Or a local OpenAI-compatible server, e.g. Ollama (https://ollama.com):
    ollama pull llama3.1
    export OPENAI_BASE_URL=http://localhost:11434/v1
    export PAM_MODEL=llama3.1

(vLLM and LM Studio work the same way: point OPENAI_BASE_URL at their /v1 endpoint.)
Then run the pam command again."""


def fail(message: str) -> NoReturn:
    """Say what is wrong and what to do, on stderr, and exit with status 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def load_settings(*, needs_llm: bool = False) -> Settings:
    """The settings from the environment, or a clear exit when they are unusable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        fail(f"pam: invalid configuration: {problems}")
    if needs_llm and not settings.llm_configured:
        fail(SETUP_HELP)
    return settings


def build_or_exit(
    settings: Settings, *, migrate: bool, memory_process: bool = False, replayable: bool = False
) -> Pam:
    """Pam assembled from `settings` (with its scheduler, or its memory process), or a clear
    exit when the database cannot be used."""
    from bot.runtime import build

    try:
        return build(
            settings, migrate=migrate, memory_process=memory_process, replayable=replayable
        )
    except db.DatabaseURLError as exc:
        fail(f"pam: {exc}")
    except OperationalError as exc:
        fail(
            f"pam: cannot open the database in DATABASE_URL: {exc.orig}. Check that the "
            "server is running, the credentials are right, or that a SQLite file's folder "
            "exists."
        )


def cmd_chat(args: argparse.Namespace) -> int:
    from bot.terminal import chat

    # In the terminal the learner is the operator: no per-minute limit (scripts pipe fast).
    settings = load_settings(needs_llm=True).model_copy(update={"rate_limit_per_minute": 0})
    pam = build_or_exit(settings, migrate=True)
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
    settings = load_settings()
    try:
        engine = db.make_engine(settings.database_url)
        db.upgrade(engine)
    except db.DatabaseURLError as exc:
        fail(f"pam: {exc}")
    except OperationalError as exc:
        fail(f"pam: cannot open the database in DATABASE_URL: {exc.orig}")
    engine.dispose()
    print("pam: database is up to date")
    return 0


def parser() -> argparse.ArgumentParser:
    """The `pam` argument parser."""
    from bot import services

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
    worker.set_defaults(func=services.cmd_worker)

    serve = commands.add_parser(
        "serve", help="web app and worker in one process (small, single-machine deployments)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.set_defaults(func=services.cmd_serve)

    telegram = commands.add_parser(
        "telegram", help="Telegram: long polling (default), or set-webhook / delete-webhook"
    )
    telegram.set_defaults(func=services.cmd_telegram, telegram_command=None)
    telegram_commands = telegram.add_subparsers(dest="telegram_command")
    set_webhook = telegram_commands.add_parser(
        "set-webhook", help="register the webhook, its secret token and the command menu"
    )
    set_webhook.add_argument(
        "url", nargs="?", help="the public webhook URL (default: $PAM_PUBLIC_URL/telegram/webhook)"
    )
    telegram_commands.add_parser("delete-webhook", help="remove the webhook (to poll instead)")

    memory_jobs = commands.add_parser(
        "memory-jobs",
        help="run the memory jobs (summary, profile) due, until stopped; workers start their own",
    )
    memory_jobs.add_argument(
        "--stdin",
        action="store_true",
        help="also run each job requested on stdin ('<learner id> <kind>' lines) at once, and "
        "stop at its end (how a worker runs it)",
    )
    memory_jobs.set_defaults(func=services.cmd_memory_jobs)

    database = commands.add_parser("db", help="database maintenance")
    db_commands = database.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply migrations")
    upgrade.set_defaults(func=cmd_db_upgrade)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pam` console script."""
    logs.configure("WARNING", sys.stderr)
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
