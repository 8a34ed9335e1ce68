"""The `pam` command."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError
from sqlalchemy.exc import OperationalError

from bot.settings import Settings
from memory import db

SETUP_HELP = """Pam needs a language model to talk to, and none is configured.

Use OpenAI:
    export OPENAI_API_KEY=sk-...            (PAM_MODEL defaults to gpt-4o-mini)

Or a local OpenAI-compatible server, e.g. Ollama (https://ollama.com):
    ollama pull llama3.1
    export OPENAI_BASE_URL=http://localhost:11434/v1
    export PAM_MODEL=llama3.1

(vLLM and LM Studio work the same way: point OPENAI_BASE_URL at their /v1 endpoint.)
Then run `pam chat` again."""


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

    database = commands.add_parser("db", help="database maintenance")
    db_commands = database.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply migrations")
    upgrade.set_defaults(func=cmd_db_upgrade)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pam` console script."""
    logging.basicConfig(
        level=os.environ.get("PAM_LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
