"""The `pam` command on click: every command and its help (what it does, when to use it, its
options, an example and the environment variables it reads, from webhooks/command_help.py), and
the two short commands, `pam chat` and `pam db upgrade`. The long-running ones run in
webhooks/services.py; how a command reads its configuration and builds Pam is
webhooks/startup.py, shared with the web process."""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot import logs
from webhooks.command_help import epilog, reads
from webhooks.startup import read_dotenv

# Everything else a command needs is imported when it runs: `pam --help`, `pam db upgrade` and
# `pam telegram set-webhook` load neither SQLAlchemy's models, pydantic, the OpenAI and
# Telegram clients nor matplotlib, and with no bytecode cache every module loaded is compiled
# again (tests/webhooks/test_cold_start.py checks what --help loads).
if TYPE_CHECKING:
    from webhooks.settings import Settings

# The log of `pam chat` in a terminal: beside its SQLite file, else in the working directory.
CHAT_LOG = "pam-chat.log"

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 88}


@click.group(
    name="pam",
    context_settings=CONTEXT,
    epilog="\b\nExamples:\n  pam chat                    (or, in a fresh clone: python3 dev.py "
    "chat)\n  pam db upgrade && pam worker\n\nEach command's --help says what it does and "
    "what it reads. The web process of a deployment (gunicorn 'webhooks.app:create_app()') is "
    "no pam command; " + reads("web").replace("Reads", "it reads", 1),
)
def cli() -> None:
    """Pam, a friend who speaks the language you are learning.

    Try her with `pam chat`; deploy her as a web process and `pam worker`, or as one
    `pam serve` on a single machine.
    """


@cli.command(
    short_help="talk to Pam in the terminal (reads stdin)",
    epilog=epilog("chat", "pam chat --user lena", "echo 'Hola, me llamo Lena' | pam chat"),
)
@click.option(
    "--user",
    default=getpass.getuser,
    show_default=False,
    metavar="NAME",
    help="who you are (default: your login name)",
)
def chat(user: str) -> None:
    """Talk to Pam in the terminal, on a SQLite file (./pam.db) unless DATABASE_URL says
    otherwise; migrates it first. One line is one message; /quit or Ctrl-D ends.

    In a terminal: line editing and history (~/.pam_history-USER, emptied by a confirmed
    /forget, with USER's charts and spoken replies), corrections in colour (not with
    NO_COLOR), and logs in pam-chat.log beside the SQLite file. Piped or scripted: answers
    only, as 'pam> ...' blocks, logs on stderr.

    Use it to try Pam or a model out: it needs a language model and nothing else (no channel,
    no public URL, no worker). Memory jobs run in this process.
    """
    from bot.terminal import chat as talk  # readline and the terminal's colours: only here
    from webhooks.startup import build_or_exit, load_settings

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
    pam.store.scrubs.run()  # a /forget's scrub a reader kept an earlier chat from finishing
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(errors="replace")
    try:
        talk(
            pam.local_turns(),
            user,
            log_file=log_file,
            charts=pam.store.charts,
            chart_dir=settings.charts.chart_dir,
            clips=pam.store.voice_clips,
            clock=pam.clock,
        )
    except KeyboardInterrupt:
        print(file=sys.stderr)
    finally:
        if not pam.close(settings.service.shutdown_wait_seconds):
            print(
                "pam: some memory updates did not finish in time; they resume next time.",
                file=sys.stderr,
            )


def chat_log_file(settings: Settings) -> Path | None:
    """Where `pam chat` in a terminal writes its logs: beside its SQLite file, else in the
    working directory (a log line in the middle of `you> ` would garble what is typed).
    None when neither folder can be written to: the logs stay on stderr then."""
    from memory.database import db

    try:
        database = db.sqlite_file(settings.database_url)
    except db.DatabaseURLError:
        database = None
    folders = [database.parent] if database is not None else []
    for folder in (*folders, Path()):
        if folder.is_dir() and os.access(folder, os.W_OK):
            return folder.absolute() / CHAT_LOG
    return None


@cli.command(
    short_help="answer the inbox, run memory jobs, deliver replies (production)",
    epilog=epilog("worker", "pam db upgrade && pam worker     (a Procfile's worker: pam worker)"),
)
def worker() -> None:
    """Answer the messages the web process stored, deliver the replies on every channel
    configured, and run the memory jobs in a child process (pam memory-jobs). Runs until
    SIGTERM; logs to stdout. Needs a migrated database (pam db upgrade).

    Use it in a deployment, beside the web process (gunicorn 'webhooks.app:create_app()');
    run as many as you need on any number of machines: they share the work through the
    database.
    """
    from webhooks import services

    sys.exit(services.run_worker())


@cli.command(
    short_help="web app and worker in one process (a single machine)",
    epilog=epilog("serve", "pam serve --host 0.0.0.0 --port 8080"),
)
@click.option(
    "--host", default="127.0.0.1", metavar="HOST", help="address to bind (default 127.0.0.1)"
)
@click.option(
    "--port",
    type=int,
    default=None,
    metavar="PORT",
    help="port to listen on (default: $PORT, else 8000)",
)
def serve(host: str, port: int | None) -> None:
    """The web app (waitress) and a worker in one process, for a single machine: says at start
    which channels are on and which are off, and why. Migrates the database first. Runs until
    SIGTERM or Ctrl-C; logs to stdout.

    Use it for a small deployment on one machine (SQLite is enough), or to try the webhooks
    locally. Exits with status 2 when it cannot listen on HOST:PORT.
    """
    from webhooks import services

    sys.exit(services.run_serve(host, port))


@cli.group(
    invoke_without_command=True,
    subcommand_metavar="[SUBCOMMAND]",
    short_help="long-poll Telegram (default), or set or delete its webhook",
    epilog=epilog(
        "telegram",
        "pam telegram                       (develop: poll, no public URL)",
        "pam telegram set-webhook https://your-app.example/telegram/webhook",
    ),
)
@click.pass_context
def telegram(context: click.Context) -> None:
    """Without a subcommand: long-poll Telegram and answer in this process (development, no
    public URL needed; migrates the database). set-webhook and delete-webhook switch a bot
    to webhooks for production and back.

    Use polling while developing, or for a bot without a public https URL; Telegram refuses
    it while a webhook is set (delete-webhook first).
    """
    if context.invoked_subcommand is None:
        from webhooks import services

        sys.exit(services.run_telegram(None))


@telegram.command(
    "set-webhook",
    short_help="register the webhook, its secret token and the command menu",
    epilog=epilog(
        "telegram set-webhook",
        "pam telegram set-webhook https://your-app.example/telegram/webhook",
        "PAM_PUBLIC_URL=https://your-app.example pam telegram set-webhook",
    ),
)
@click.argument("url", required=False)
def set_webhook(url: str | None) -> None:
    """Register the webhook URL with Telegram, with TELEGRAM_WEBHOOK_SECRET as its secret
    token, the update types Pam handles and the command menu. The URL must be https.

    URL: the public webhook URL (default: $PAM_PUBLIC_URL/telegram/webhook). Use it once per
    deployment, after the web process is up. A URL Telegram would refuse is said before
    anything is sent (exit status 2); Telegram's own refusal exits with status 1.
    """
    from webhooks import services

    sys.exit(services.run_telegram("set-webhook", url))


@telegram.command(
    "delete-webhook",
    short_help="remove the webhook (to poll instead)",
    epilog=epilog("telegram delete-webhook", "pam telegram delete-webhook && pam telegram"),
)
def delete_webhook() -> None:
    """Remove the bot's webhook, so that `pam telegram` can poll.

    Use it to move a bot from a deployment back to development polling.
    """
    from webhooks import services

    sys.exit(services.run_telegram("delete-webhook"))


@telegram.command(
    "status",
    short_help="where Telegram delivers updates, and what is wrong if they do not arrive",
    epilog=epilog("telegram status", "pam telegram status", "heroku run pam telegram status"),
)
def status() -> None:
    """Ask Telegram where it delivers the bot's updates, how many wait, and its last delivery
    error, and say what that error means for Pam (a wrong secret, a web process that is down,
    no webhook set).

    Use it when the bot is silent after a deploy. Exits with status 0 when updates reach the
    webhook, 1 when they do not.
    """
    from webhooks import services

    sys.exit(services.run_telegram("status"))


@cli.command(
    "memory-jobs",
    short_help="run the memory jobs due (summary, profile); workers start one",
    epilog=epilog("memory-jobs", "pam memory-jobs            (catch up, e.g. after an outage)"),
)
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="also run each job requested on stdin ('<learner id> <kind>' lines) at once, and stop "
    "at its end (how a worker runs it)",
)
def memory_jobs(from_stdin: bool) -> None:
    """Run the memory jobs (rolling summary, learned profile) marked in the database, at start
    and then every minute, until SIGTERM. `pam worker` starts one itself; run it alone only
    to catch up. Needs a migrated database (pam db upgrade).

    Runs at a lower CPU priority (nice +10): its Python work would otherwise slow the
    replies of the processes beside it.
    """
    from webhooks import services

    sys.exit(services.run_memory_jobs(from_stdin))


@cli.group(
    "db",
    subcommand_metavar="SUBCOMMAND",
    short_help="database maintenance",
    epilog=epilog("db", "pam db upgrade"),
)
def database() -> None:
    """Database maintenance: `pam db upgrade`, which the commands that do not migrate by
    themselves (pam worker, pam memory-jobs and the web process) need before they start."""


@database.command(short_help="apply migrations", epilog=epilog("db upgrade", "pam db upgrade"))
def upgrade() -> None:
    """Create the tables, or bring them up to this Pam's newest migration; says which it
    applied. Safe to run again. Use it before the first `pam worker` or web process, and after
    each upgrade of Pam (a deploy's release phase, `pam release`, does it first)."""
    from webhooks.release import run_upgrade

    sys.exit(run_upgrade())


@cli.command(short_help="a deploy's release phase", epilog=epilog("release", "pam release"))
def release() -> None:
    """Migrate (as pam db upgrade), then register $PAM_PUBLIC_URL/telegram/webhook with Telegram
    when TELEGRAM_BOT_TOKEN and PAM_PUBLIC_URL are set (as pam telegram set-webhook).

    Heroku's release phase and Fly's release_command run it on every deploy. It fails the
    deploy when the database cannot be migrated or Telegram refuses the token or the URL; when
    Telegram does not answer it warns, and the deploy goes on.
    """
    from webhooks.release import run_release

    sys.exit(run_release())


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `pam` console script: `.env` first, then the command; exits with
    the command's status (2 for a usage error)."""
    read_dotenv()
    # Until a command has read PAM_LOG_LEVEL with its settings.
    logs.configure(logs.COMMAND_LEVEL, sys.stderr)
    cli.main(args=argv, prog_name="pam")


if __name__ == "__main__":
    main()
