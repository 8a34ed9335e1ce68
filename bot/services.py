"""The long-running `pam` commands: `pam worker`, `pam serve`, `pam telegram` and the memory
process they start, `pam memory-jobs`. Each logs to stdout, one line per event, and stops
cleanly on SIGTERM (what Heroku and Fly send)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from bot import logs
from bot.cli import SETUP_HELP, build_or_exit, fail, load_settings
from bot.memory_process import HAND_BACK_SECONDS, JobRequests, lower_priority
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.runtime import Pam
    from bot.worker import Worker

log = logging.getLogger("pam.services")
# How long a thread computing in Python keeps others waiting for the GIL (Python's default
# is 5 ms). A worker's reply lanes mostly wait on sockets; each time one comes back while
# another thread computes (a turn building its prompt, the web app parsing a request), it waits
# up to this long to go on. Memory jobs compute in a process of their own.
GIL_SWITCH_SECONDS = 0.001

TELEGRAM_SETUP = """Telegram needs TELEGRAM_BOT_TOKEN (from @BotFather).
For the webhook, also set TELEGRAM_WEBHOOK_SECRET (letters, digits, _ and -; e.g. the output
of `python3 -c "import secrets; print(secrets.token_urlsafe(32))"`)."""


def service_logging() -> None:
    """Services log to stdout, INFO by default (no message bodies, no secrets)."""
    logs.configure("INFO", sys.stdout)


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def start_worker(
    settings: Settings, *, migrate: bool, replayable: bool = False
) -> tuple[Pam, Worker]:
    """Pam with a running worker: its lanes, and its memory process (bot/memory_process.py),
    which runs the memory jobs, those asked for while no worker ran included. `replayable`:
    this process stores no inbound message itself (see `db.make_engine`)."""
    from bot.worker import Worker
    from webhooks.outbound import senders

    pam = build_or_exit(settings, migrate=migrate, memory_process=True, replayable=replayable)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    worker = Worker(pam, senders(settings))
    assert pam.memory_process is not None
    worker.start(settings.worker_threads, settings.delivery_threads)
    pam.memory_process.start()  # after build migrated: the child expects the current schema
    log.info(
        "worker started inbox_lanes=%d delivery_lanes=%d",
        settings.worker_threads,
        settings.delivery_threads,
    )
    return pam, worker


def stop_worker(pam: Pam, worker: Worker) -> None:
    """Stop taking work, let what runs finish within PAM_SHUTDOWN_WAIT_SECONDS in all, close
    the senders."""
    deadline = time.monotonic() + pam.settings.shutdown_wait_seconds
    if pam.memory_process is not None:
        # The memory process winds down alongside the lanes, towards the same deadline. Jobs
        # that the last turns ask for meanwhile stay marked and run at the next start.
        pam.memory_process.terminate()
    if not worker.stop(pam.settings.shutdown_wait_seconds):
        log.warning("stopped with a turn unfinished; its message is answered after the lease")
    pam.close(max(0.0, deadline - time.monotonic()))
    worker.close_senders()


def cmd_worker(args: argparse.Namespace) -> int:
    service_logging()
    settings = load_settings(needs_llm=True)
    stop = stop_on_sigterm()
    pam, worker = start_worker(settings, migrate=False, replayable=True)
    stop.wait()
    log.info("worker stopping")
    stop_worker(pam, worker)
    return 0


def cmd_memory_jobs(args: argparse.Namespace) -> int:
    """The memory process: runs marked memory jobs (all of them at start, then in a sweep every
    RECOVER_EVERY_SECONDS), with `--stdin` also each job its worker hands over, until SIGTERM
    or the end of stdin (its worker is gone)."""
    stop = stop_on_sigterm()
    service_logging()
    settings = load_settings(needs_llm=True)
    niceness = lower_priority()
    # Its writes need not wait for the disk either: a job whose last commits a database crash
    # loses is left running under its lease, and the sweep runs it again (see db.make_engine).
    pam = build_or_exit(settings, migrate=False, replayable=True)
    assert pam.scheduler is not None
    pam.scheduler.start()
    try:
        recovered = pam.runner.recover()
    except Exception as exc:  # the database is away: the next sweep runs them
        log.warning("memory jobs could not sweep at start: %s", type(exc).__name__)
        recovered = 0
    requests = JobRequests(pam.runner, sys.stdin.fileno(), stop) if args.stdin else None
    if requests is not None:
        requests.start()
    log.info("memory jobs started pid=%d nice=%s recovered=%d", os.getpid(), niceness, recovered)
    stop.wait()
    log.info("memory jobs stopping")
    # Stopping already: a second signal (the worker's, after the platform's to the whole
    # group) must not kill the process as it exits (the interpreter drops Python handlers).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if requests is not None:
        requests.close()
    finished = pam.close(max(0.0, settings.shutdown_wait_seconds - HAND_BACK_SECONDS))
    log.info("memory jobs stopped")
    if not finished:
        # Its jobs were handed back; a job thread still inside an LLM call would only hold up
        # the interpreter's exit (the pool joins its threads), past the worker's deadline.
        logging.shutdown()
        os._exit(0)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import waitress

    from webhooks import create_app

    service_logging()
    settings = load_settings(needs_llm=True)
    pam, worker = start_worker(settings, migrate=True)
    app = create_app(settings, engine=pam.engine, on_inbound=worker.wake_inbox)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        waitress.serve(app, host=args.host, port=settings.port, threads=8, ident="pam")
    except KeyboardInterrupt:
        pass
    finally:
        stop_worker(pam, worker)
        app.extensions["pam"].close()
    return 0


def cmd_telegram(args: argparse.Namespace) -> int:
    from webhooks.telegram_bot import TelegramClient

    service_logging()
    settings = load_settings()
    if not settings.telegram_bot_token:
        fail(TELEGRAM_SETUP)
    action = args.telegram_command
    if action is None:
        return poll_telegram(settings)
    client = TelegramClient(settings.telegram_bot_token, settings.telegram_api_url)
    try:
        if action == "set-webhook":
            url = args.url or (
                f"{settings.public_url.rstrip('/')}/telegram/webhook"
                if settings.public_url
                else None
            )
            if not url or not settings.telegram_webhook_secret:
                fail(
                    "pam: give the webhook URL (or set PAM_PUBLIC_URL) and set "
                    "TELEGRAM_WEBHOOK_SECRET.\n" + TELEGRAM_SETUP
                )
            client.set_webhook(url, settings.telegram_webhook_secret)
            print(f"pam: Telegram now sends updates to {url}")
        else:
            client.delete_webhook()
            print("pam: webhook removed; `pam telegram` can poll now")
    except SystemExit:
        raise
    except Exception as exc:
        print(f"pam: Telegram refused: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


def poll_telegram(settings: Settings) -> int:
    """Long-poll Telegram with an in-process worker, until SIGTERM."""
    from memory.queue import Inbox
    from webhooks.telegram_bot import TelegramClient, WebhookIsSet
    from webhooks.telegram_poll import poll

    if not settings.llm_configured:
        fail(SETUP_HELP)
    stop = stop_on_sigterm()
    pam, worker = start_worker(settings, migrate=True)
    client = worker.senders["telegram"]
    assert isinstance(client, TelegramClient)
    log.info("polling Telegram for updates")
    try:
        poll(client, Inbox(pam.engine, settings.inbox_lease_seconds), stop, worker.wake_inbox)
    except WebhookIsSet:
        print(
            "pam: Telegram refuses polling because a webhook is set for this bot (409 "
            "Conflict). Run `pam telegram delete-webhook` first, or keep the webhook and run "
            "the web app and `pam worker` instead.",
            file=sys.stderr,
        )
        return 2
    finally:
        stop.set()
        stop_worker(pam, worker)
    return 0
