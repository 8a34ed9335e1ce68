"""How every Pam process starts: the `.env` file, the settings, Pam built on a usable database,
and the clear exit when one of them is wrong. Shared by the `pam` commands (webhooks/cli.py,
webhooks/services.py) and the web process (webhooks/app.py), which all read their
configuration by the same rules."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from dotenv import dotenv_values

# pydantic, SQLAlchemy and the settings are imported where they are used: `pam --help` reads
# the .env file through this module and needs none of them (each costs a start its imports).
if TYPE_CHECKING:
    from bot.worker.runtime import Pam
    from webhooks.settings import Settings

SETUP_HELP = """Pam needs a language model to talk to, and none is configured.

Use OpenAI:
    export OPENAI_API_KEY=sk-...            (PAM_MODEL defaults to gpt-4o-mini)

Or a local OpenAI-compatible server, e.g. Ollama (https://ollama.com):
    ollama pull llama3.1
    export OPENAI_BASE_URL=http://localhost:11434/v1
    export PAM_MODEL=llama3.1

(vLLM and LM Studio work the same way: point OPENAI_BASE_URL at their /v1 endpoint.)
Then run the pam command again."""

DOTENV = Path(".env")
# A service (worker, memory jobs) that starts while its database server restarts or fails
# over waits this long for it, as a platform's restart would, instead of exiting at once and
# being counted a crash. One-off commands do not wait: their operator is watching.
SERVICE_DATABASE_WAIT_SECONDS = 60.0
DATABASE_RETRY_SECONDS = 2.0

log = logging.getLogger("pam.cli")


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
    from pydantic import ValidationError

    from webhooks.settings import Settings

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
    settings: Settings,
    *,
    migrate: bool,
    memory_process: bool = False,
    replayable: bool = False,
    wait_seconds: float = 0.0,
) -> Pam:
    """Pam assembled from `settings` (with its scheduler, or its memory process), or a clear
    exit when the database cannot be used. A database server that cannot be reached (down,
    restarting, failing over) is tried again every few seconds for `wait_seconds`, each
    failure logged; a wrong URL, a schema that is not current or a file that is no database
    exits at once."""
    # Imported here: the web process reads its settings through this module and never builds
    # Pam, so it need not load the composition root's clients (OpenAI, APScheduler, PTB); nor
    # does gunicorn's master, which reads them to say its channels, need SQLAlchemy's.
    from sqlalchemy.exc import DatabaseError, OperationalError

    from memory.database import db
    from webhooks.wiring import build

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            if not migrate:
                warning = db.require_current_schema(settings.database_url)
                if warning:
                    log.warning("%s", warning)
            return build(
                settings, migrate=migrate, memory_process=memory_process, replayable=replayable
            )
        except (db.DatabaseURLError, db.SchemaNotCurrent) as exc:
            fail(f"pam: {exc}")
        except DatabaseError as exc:  # unreachable, refused, or a file that is no database
            server = db.sqlite_file(settings.database_url) is None
            if server and isinstance(exc, OperationalError) and time.monotonic() < deadline:
                log.warning(
                    "database not reachable yet (%s); trying again in %.0fs",
                    str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__,
                    DATABASE_RETRY_SECONDS,
                )
                time.sleep(DATABASE_RETRY_SECONDS)
                continue
            fail(
                f"pam: cannot open the database in DATABASE_URL: {exc.orig}. Check that the "
                "server is running, the credentials are right, or that a SQLite file's folder "
                "exists and the file is a SQLite database."
            )
