"""The `pam` command: argument parsing and help, the `.env` file, `pam chat` and
`pam db upgrade`. The service commands (worker, serve, telegram) live in webhooks/services.py."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
import textwrap
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from dotenv import dotenv_values
from pydantic import ValidationError
from sqlalchemy.exc import DatabaseError

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


# The log of `pam chat` in a terminal: beside its SQLite file, else in the working directory.
CHAT_LOG = "pam-chat.log"
DOTENV = Path(".env")

# What each command reads from the environment, for its --help (tests/test_cli.py checks
# that every setting is listed somewhere and that no name here is a typo).
# Every process that runs turns or jobs opens a pool of PAM_DB_POOL_SIZE (bot/runtime.py).
DATABASE = ("DATABASE_URL", "PAM_DB_POOL_SIZE", "PAM_LOG_LEVEL")
LLM = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PAM_MODEL",
    "PAM_MEMORY_MODEL",
    "PAM_LLM_TIMEOUT",
    "PAM_LLM_MAX_RETRIES",
    "PAM_REPLY_MAX_TOKENS",
    "PAM_STRUCTURED_OUTPUT",
    "PAM_REASONING_EFFORT",
    "PAM_MEMORY_REASONING_EFFORT",
)
MEMORY = (
    "PAM_WINDOW_MESSAGES",
    "PAM_SUMMARY_TRIGGER_TOKENS",
    "PAM_SUMMARY_MAX_TOKENS",
    "PAM_FOLD_BATCH_MESSAGES",
    "PAM_PROFILE_EVERY",
    "PAM_JOB_LEASE_SECONDS",
    "PAM_SHUTDOWN_WAIT_SECONDS",
)
LIMITS = ("PAM_RATE_LIMIT_PER_MINUTE", "PAM_LEARNER_DAILY_TOKENS", "PAM_DAILY_TOKENS")
LANES = (
    "PAM_WORKER_THREADS",
    "PAM_DELIVERY_THREADS",
    "PAM_POLL_SECONDS",
    "PAM_INBOX_LEASE_SECONDS",
    "PAM_DELIVERY_LEASE_SECONDS",
    "PAM_MAX_TURN_ATTEMPTS",
    "PAM_MAX_SEND_ATTEMPTS",
    "PAM_QUEUE_RETENTION_HOURS",
)
TELEGRAM = ("TELEGRAM_BOT_TOKEN", "TELEGRAM_API_URL")
SENDERS = (
    *TELEGRAM,
    "TWILIO_ACCOUNT_SID",
    "TWILIO_AUTH_TOKEN",
    "TWILIO_WHATSAPP_NUMBER",
    "TWILIO_API_URL",
    "PAM_API_TOKEN",
    "PAM_API_CALLBACK_URL",
    "PAM_PUBLIC_URL",
)
INBOUND = (
    "TELEGRAM_WEBHOOK_SECRET",
    "TWILIO_WEBHOOK_SHARED_KEY_SECRET",
    "PAM_ADMIN_TOKEN",
    # which proxies' X-Forwarded-* the web app trusts: set, or Heroku's and Fly's own
    "PAM_PROXY_HOPS",
    "DYNO",
    "FLY_APP_NAME",
)
WORKER = (*DATABASE, *LLM, *MEMORY, *LIMITS, *LANES, *SENDERS)
READS: dict[str, tuple[str, ...]] = {
    "chat": (*DATABASE, *LLM, *MEMORY, "PAM_LEARNER_DAILY_TOKENS", "PAM_DAILY_TOKENS"),
    "worker": WORKER,
    "serve": (*WORKER, "PORT", *INBOUND),
    "telegram": (*WORKER, "TELEGRAM_WEBHOOK_SECRET"),
    "memory-jobs": (*DATABASE, *LLM, *MEMORY),
    "db": ("DATABASE_URL", "PAM_LOG_LEVEL"),
    # Not a `pam` command: the web process on Heroku and Fly, gunicorn 'webhooks.app:create_app()'.
    "web": ("DATABASE_URL", "PAM_DB_POOL_SIZE", "PAM_INBOX_LEASE_SECONDS", *SENDERS, *INBOUND),
}


def fail(message: str) -> NoReturn:
    """Say what is wrong and what to do, on stderr, and exit with status 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def read_dotenv(path: Path = DOTENV, environ: MutableMapping[str, str] = os.environ) -> bool:
    """Fill in, from the `.env` file at `path` (in the working directory), the variables that
    the environment leaves unset or empty: the environment wins, and an empty value means
    unset in both. Done first, so that everything reads them alike — the settings, the log
    level and the processes a command starts. True if there was such a file."""
    if not path.is_file():
        return False
    for name, value in dotenv_values(path).items():
        if value and not environ.get(name):
            environ[name] = value
    return True


def load_settings(*, needs_llm: bool = False) -> Settings:
    """The settings from the environment, or a clear exit when they are unusable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        fail(f"pam: invalid configuration: {problems}")
    if needs_llm and not settings.llm.configured:
        fail(SETUP_HELP)
    return settings


def build_or_exit(
    settings: Settings, *, migrate: bool, memory_process: bool = False, replayable: bool = False
) -> Pam:
    """Pam assembled from `settings` (with its scheduler, or its memory process), or a clear
    exit when the database cannot be used."""
    from webhooks.wiring import build

    try:
        if not migrate:
            warning = db.require_current_schema(settings.database_url)
            if warning:
                logging.getLogger("pam.cli").warning("%s", warning)
        return build(
            settings, migrate=migrate, memory_process=memory_process, replayable=replayable
        )
    except (db.DatabaseURLError, db.SchemaNotCurrent) as exc:
        fail(f"pam: {exc}")
    except DatabaseError as exc:  # unreachable, refused, or a file that is no database
        fail(
            f"pam: cannot open the database in DATABASE_URL: {exc.orig}. Check that the "
            "server is running, the credentials are right, or that a SQLite file's folder "
            "exists and the file is a SQLite database."
        )


def chat_log_file(settings: Settings) -> Path | None:
    """Where `pam chat` in a terminal writes its logs: beside its SQLite file, else in the
    working directory (a log line in the middle of `you> ` would garble what is typed).
    None when neither folder can be written to: the logs stay on stderr then."""
    try:
        database = db.sqlite_file(settings.database_url)
    except db.DatabaseURLError:
        database = None
    folders = [database.parent] if database is not None else []
    for folder in (*folders, Path()):
        if folder.is_dir() and os.access(folder, os.W_OK):
            return folder.absolute() / CHAT_LOG
    return None


def cmd_chat(args: argparse.Namespace) -> int:
    """`pam chat`: the terminal channel, on an in-process scheduler."""
    from bot.terminal import chat

    # In the terminal the learner is the operator: no per-minute limit (scripts pipe fast).
    settings = load_settings(needs_llm=True).replace(limits={"rate_limit_per_minute": 0})
    log_file = chat_log_file(settings) if sys.stdin.isatty() else None
    level = settings.log_level or logs.COMMAND_LEVEL
    if log_file is not None:
        logs.configure_file(level, log_file)
    else:
        logs.configure(level, sys.stderr)
    pam = build_or_exit(settings, migrate=True)
    assert pam.scheduler is not None
    pam.scheduler.start()
    pam.runner.recover()
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")
    try:
        chat(pam.tutor, args.user, log_file=log_file)
    except KeyboardInterrupt:
        print(file=sys.stderr)
    finally:
        if not pam.close(settings.service.shutdown_wait_seconds):
            print(
                "pam: some memory updates did not finish in time; they resume next time.",
                file=sys.stderr,
            )
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    """`pam db upgrade`: create the tables, or migrate them to the newest revision."""
    settings = load_settings()
    logs.configure(settings.log_level or logs.COMMAND_LEVEL, sys.stderr)
    try:
        engine = db.make_engine(settings.database_url)
        db.upgrade(engine)
    except db.DatabaseURLError as exc:
        fail(f"pam: {exc}")
    except DatabaseError as exc:  # unreachable, refused, or a file that is no database
        fail(f"pam: cannot open the database in DATABASE_URL: {exc.orig}")
    engine.dispose()
    print("pam: database is up to date")
    return 0


def reads(command: str) -> str:
    """The --help epilog naming the environment variables `command` reads."""
    names = ", ".join(dict.fromkeys(READS[command]))
    return (
        f"Reads these environment variables (a .env file in the working directory fills in "
        f"those unset; see README.md, Configuration):\n  {names}"
    )


def _wrapped(text: str, width: int = 88) -> str:
    """`text` wrapped line by line (argparse's raw formatter keeps line breaks as given)."""
    return "\n".join(
        textwrap.fill(line, width, subsequent_indent="  " if line.startswith("  ") else "")
        for line in text.splitlines()
    )


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    description: str,
    reads_from: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does, its flags and the variables it reads."""
    return commands.add_parser(
        name,
        help=summary,
        description=_wrapped(description),
        epilog=_wrapped(reads(reads_from or name)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def parser() -> argparse.ArgumentParser:
    """The `pam` argument parser."""
    from webhooks import services

    top = argparse.ArgumentParser(
        prog="pam",
        description="Pam, a friend who speaks the language you are learning.",
        epilog=_wrapped(
            "Each command's --help says what it reads. The web process of a deployment "
            "(gunicorn 'webhooks.app:create_app()') is no pam command; "
            + reads("web").replace("Reads", "it reads", 1)
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    chat = _command(
        commands,
        "chat",
        "talk to Pam in the terminal (reads stdin)",
        "Talk to Pam in the terminal, on a SQLite file (./pam.db) unless DATABASE_URL says "
        "otherwise; migrates it first. One line is one message; /quit or Ctrl-D ends.\n"
        "In a terminal: line editing and history (~/.pam_history, cleared by /forget), "
        "corrections in colour (not with NO_COLOR), and logs in pam-chat.log beside the "
        "SQLite file. Piped or scripted: answers only, as 'pam> ...' blocks, logs on stderr.",
    )
    chat.add_argument(
        "--user", default=getpass.getuser(), help="who you are (default: your login name)"
    )
    chat.set_defaults(func=cmd_chat)

    worker = _command(
        commands,
        "worker",
        "answer the inbox, run memory jobs, deliver replies (production)",
        "Answer the messages the web process stored, deliver the replies on every channel "
        "configured, and run the memory jobs in a child process (pam memory-jobs). Runs "
        "until SIGTERM; logs to stdout. Needs a migrated database (pam db upgrade).",
    )
    worker.set_defaults(func=services.cmd_worker)

    serve = _command(
        commands,
        "serve",
        "web app and worker in one process (small, single-machine deployments)",
        "The web app (waitress) and a worker in one process, for a single machine: says at "
        "start which channels are on and which are off, and why. Migrates the database "
        "first. Runs until SIGTERM or Ctrl-C; logs to stdout.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: $PORT, else 8000)"
    )
    serve.set_defaults(func=services.cmd_serve)

    telegram = _command(
        commands,
        "telegram",
        "Telegram: long polling (default), or set-webhook / delete-webhook",
        "Without a subcommand: long-poll Telegram and answer in this process (development, "
        "no public URL needed; migrates the database). set-webhook and delete-webhook "
        "switch a bot to webhooks for production and back.",
    )
    telegram.set_defaults(func=services.cmd_telegram, telegram_command=None)
    telegram_commands = telegram.add_subparsers(dest="telegram_command", metavar="SUBCOMMAND")
    set_webhook = telegram_commands.add_parser(
        "set-webhook",
        help="register the webhook, its secret token and the command menu",
        description="Register the webhook URL with Telegram, with TELEGRAM_WEBHOOK_SECRET as "
        "its secret token, the update types Pam handles and the command menu. The URL must "
        "be https.",
        epilog="Reads TELEGRAM_BOT_TOKEN, TELEGRAM_WEBHOOK_SECRET, TELEGRAM_API_URL and "
        "PAM_PUBLIC_URL.",
    )
    set_webhook.add_argument(
        "url", nargs="?", help="the public webhook URL (default: $PAM_PUBLIC_URL/telegram/webhook)"
    )
    telegram_commands.add_parser(
        "delete-webhook",
        help="remove the webhook (to poll instead)",
        description="Remove the bot's webhook, so that `pam telegram` can poll.",
        epilog="Reads TELEGRAM_BOT_TOKEN and TELEGRAM_API_URL.",
    )

    memory_jobs = _command(
        commands,
        "memory-jobs",
        "run the memory jobs (summary, profile) due, until stopped; workers start their own",
        "Run the memory jobs (rolling summary, learned profile) marked in the database, at "
        "start and then every minute, until SIGTERM. `pam worker` starts one itself; run it "
        "alone only to catch up. Needs a migrated database (pam db upgrade).",
    )
    memory_jobs.add_argument(
        "--stdin",
        action="store_true",
        help="also run each job requested on stdin ('<learner id> <kind>' lines) at once, and "
        "stop at its end (how a worker runs it)",
    )
    memory_jobs.set_defaults(func=services.cmd_memory_jobs)

    database = _command(
        commands, "db", "database maintenance", "Database maintenance: `pam db upgrade`."
    )
    db_commands = database.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    upgrade = db_commands.add_parser(
        "upgrade",
        help="apply migrations",
        description="Create the tables, or bring them up to this Pam's newest migration. "
        "Safe to run again; Heroku's and Fly's release phase runs it on every deploy.",
        epilog="Reads DATABASE_URL.",
    )
    upgrade.set_defaults(func=cmd_db_upgrade)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pam` console script."""
    read_dotenv()
    # Until a command has read PAM_LOG_LEVEL with its settings.
    logs.configure(logs.COMMAND_LEVEL, sys.stderr)
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
