"""The long-running `pam` commands: `pam worker`, `pam serve`, `pam telegram` and the memory
process they start, `pam memory-jobs`. Each logs to stdout, one line per event, and stops
cleanly on SIGTERM (what Heroku and Fly send)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bot import logs
from bot.worker.memory_process import (
    HAND_BACK_SECONDS,
    STDIN,
    ForkedChild,
    JobRequests,
    fork_child,
    lower_priority,
)
from webhooks.channels import log_channels
from webhooks.settings import Settings
from webhooks.startup import (
    SERVICE_DATABASE_WAIT_SECONDS,
    SETUP_HELP,
    build_or_exit,
    fail,
    load_settings,
)

if TYPE_CHECKING:
    from bot.worker.runtime import Pam
    from bot.worker.worker import Worker
    from webhooks.telegram.client import TelegramClient

log = logging.getLogger("pam.services")

TELEGRAM_TOKEN_HELP = "TELEGRAM_BOT_TOKEN (the bot's token from @BotFather)"
TELEGRAM_SECRET_HELP = (
    "TELEGRAM_WEBHOOK_SECRET (letters, digits, _ and -; e.g. the output of "
    '`python3 -c "import secrets; print(secrets.token_urlsafe(32))"`)'
)
TELEGRAM_URL_HELP = (
    "the webhook URL: give it (`pam telegram set-webhook https://your-app.example/telegram/"
    "webhook`) or set PAM_PUBLIC_URL"
)
# Telegram delivers webhooks to these ports only (Bot API, setWebhook).
TELEGRAM_WEBHOOK_PORTS = (443, 80, 88, 8443)
# How often a service's main thread looks whether a signal asked it to stop.
STOP_CHECK_SECONDS = 0.2


def service_logging(settings: Settings) -> None:
    """Services log to stdout, at PAM_LOG_LEVEL, else INFO (no message bodies, no secrets)."""
    logs.configure(settings.log_level or logs.SERVICE_LEVEL, sys.stdout)


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def wait_until_stopped(stop: threading.Event) -> None:
    """Block the main thread until a signal sets `stop`, looking every STOP_CHECK_SECONDS.
    Not `stop.wait()`: CPython runs a signal's handler in the main thread only, and a main
    thread blocked in Event.wait neither wakes for a signal the kernel handed to another
    thread (a worker's SIGTERM went unanswered so, under load) nor can run a handler that
    sets that same Event while it holds the Event's lock."""
    while not stop.is_set():
        time.sleep(STOP_CHECK_SECONDS)


def start_worker(
    settings: Settings, *, migrate: bool, replayable: bool = False
) -> tuple[Pam, Worker]:
    """Pam with a running worker: its lanes, and its memory process (bot/worker/memory_process.py),
    which runs the memory jobs, those asked for while no worker ran included. `replayable`:
    this process stores no inbound message itself (see `db.make_engine`)."""
    from bot.review.progress import warm_in_background
    from bot.worker.worker import Worker
    from memory.database.backends import backend_for
    from webhooks.wiring import checkin_rounds, senders

    in_child = settings.service.memory_process
    forked = fork_memory_process(settings) if in_child else None
    pam = build_or_exit(
        settings,
        migrate=migrate,
        memory_process=in_child,
        replayable=replayable,
        wait_seconds=SERVICE_DATABASE_WAIT_SECONDS,
    )
    built = senders(settings)
    worker = Worker(pam, built, checkins=checkin_rounds(pam, settings, built))
    lanes = settings.service.worker_threads or backend_for(pam.engine).inbox_lanes
    worker.start(lanes, settings.service.delivery_threads)
    # matplotlib loads beside the lanes, so the first /progress finds it ready; only here:
    # the web process and the memory-jobs child never draw a chart.
    warm_in_background()
    if pam.memory_process is not None:
        pam.memory_process.start(forked)  # after build migrated: the child expects the schema
    else:  # PAM_MEMORY_PROCESS=off: the worker's own scheduler runs them, as the child would
        assert pam.scheduler is not None
        pam.scheduler.start()
        sweep_memory_jobs(pam)
    log.info(
        "worker started inbox_lanes=%d delivery_lanes=%d memory_jobs=%s",
        lanes,
        settings.service.delivery_threads,
        "child process" if in_child else "threads",
    )
    return pam, worker


PRELOAD_ENCODING_SECONDS = 10.0


def fork_memory_process(settings: Settings) -> ForkedChild | None:
    """The memory process, forked before this process builds anything or starts a thread, so
    that it shares what both load (see bot/worker/memory_process.py); None: spawn it."""
    return fork_child(
        lambda: preload_memory_jobs(settings), lambda: run_memory_jobs(from_stdin=True)
    )


def preload_memory_jobs(settings: Settings) -> None:
    """Import what the memory process imports, and load its token encoding, without connecting
    to anything or starting a thread: what a forked child shares with its worker."""
    from sqlalchemy.engine import make_url

    import memory.metric_snapshots  # noqa: F401  (the memory process's, and the worker's)
    import webhooks.wiring  # noqa: F401  (build's parts)
    from memory.tokens import TokenCounter

    with suppress(Exception):  # a URL it cannot read: build says so, in its own words
        make_url(settings.database_url).get_dialect().import_dbapi()
    # tiktoken downloads an encoding it has not cached, with no timeout of its own: the worker
    # waits for it PRELOAD_ENCODING_SECONDS at most, and spawns its child if it is still out.
    loading = threading.Thread(
        target=lambda: TokenCounter(settings.llm.model).approximate,
        name="token-encoding",
        daemon=True,
    )
    loading.start()
    loading.join(PRELOAD_ENCODING_SECONDS)


def sweep_memory_jobs(pam: Pam) -> int:
    """Start every memory job marked in the database (those asked for while no process ran
    them included); how many. A database away at start is no reason to stop: the scheduler's
    sweep every RECOVER_EVERY_SECONDS runs them later."""
    try:
        return pam.runner.recover()
    except Exception as exc:
        log.warning("memory jobs could not sweep at start: %s", type(exc).__name__)
        return 0


def stop_worker(pam: Pam, worker: Worker) -> None:
    """Stop taking work, let what runs finish within PAM_SHUTDOWN_WAIT_SECONDS in all, close
    the senders."""
    deadline = time.monotonic() + pam.settings.service.shutdown_wait_seconds
    if pam.memory_process is not None:
        # The memory process winds down alongside the lanes, towards the same deadline. Jobs
        # that the last turns ask for meanwhile stay marked and run at the next start.
        pam.memory_process.terminate()
    if not worker.stop(pam.settings.service.shutdown_wait_seconds):
        log.warning("stopped with a turn unfinished; its message is answered after the lease")
    finished = pam.close(max(0.0, deadline - time.monotonic()))
    worker.close_senders()
    if not finished and pam.memory_process is None:
        # Memory jobs on this process's threads (PAM_MEMORY_PROCESS=off) were handed back to
        # the database; a job thread still inside an LLM call would hold up the interpreter's
        # exit (APScheduler's pool joins its threads) past the platform's kill, and go on
        # writing a job another worker may take up. Leave now, as `pam memory-jobs` does.
        logging.shutdown()
        os._exit(0)


def webhook_url_problem(url: str, *, local_bot_api: bool) -> str | None:
    """Why Telegram would refuse `url` as a webhook, said before asking it; None if it looks
    right. A local Bot API server (TELEGRAM_API_URL) also takes http and any port."""
    if any(ch.isspace() for ch in url):
        return f"the webhook URL {url!r} contains spaces"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"the webhook URL {url!r} is not a URL ({exc})"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return (
            f"the webhook URL {url!r} is not a full URL; give one like "
            "https://your-app.example/telegram/webhook"
        )
    if local_bot_api:
        return None
    if parts.scheme != "https":
        return f"Telegram sends webhooks over https only; {url!r} is {parts.scheme}"
    if port is not None and port not in TELEGRAM_WEBHOOK_PORTS:
        return f"Telegram sends webhooks to ports 443, 80, 88 and 8443 only; {url!r} uses {port}"
    return None


def run_worker() -> int:
    """`pam worker`: answer the inbox, deliver the outbox and run the memory process, on a
    database already migrated, until SIGTERM."""
    settings = load_settings(needs_llm=True)
    service_logging(settings)
    stop = stop_on_sigterm()
    pam, worker = start_worker(settings, migrate=False, replayable=True)
    log_channels(settings, "worker", log)
    wait_until_stopped(stop)
    log.info("worker stopping")
    stop_worker(pam, worker)
    return 0


def run_memory_jobs(from_stdin: bool) -> int:
    """`pam memory-jobs`, the memory process: runs marked memory jobs (all of them at start,
    then in a sweep every RECOVER_EVERY_SECONDS), `from_stdin` (`--stdin`) also each job its
    worker hands over, until SIGTERM or the end of stdin (its worker is gone)."""
    from memory.metric_snapshots import Snapshots, Snapshotter  # not for `pam --help`

    stop = stop_on_sigterm()
    settings = load_settings(needs_llm=True)
    service_logging(settings)
    niceness = lower_priority()
    # Its writes need not wait for the disk either: a job whose last commits a database crash
    # loses is left running under its lease, and the sweep runs it again (see db.make_engine).
    pam = build_or_exit(
        settings, migrate=False, replayable=True, wait_seconds=SERVICE_DATABASE_WAIT_SECONDS
    )
    assert pam.scheduler is not None
    pam.scheduler.start()
    recovered = sweep_memory_jobs(pam)
    requests = JobRequests(pam.runner, STDIN, stop) if from_stdin else None
    if requests is not None:
        requests.start()
    # Its counts (memory-job runs, LLM calls), copied to the database for the web's /metrics.
    copies = Snapshotter(Snapshots(pam.engine, pam.clock), "memory-jobs").start()
    log.info("memory jobs started pid=%d nice=%s recovered=%d", os.getpid(), niceness, recovered)
    wait_until_stopped(stop)
    log.info("memory jobs stopping")
    # Stopping already: a second signal (the worker's, after the platform's to the whole
    # group) must not kill the process as it exits (the interpreter drops Python handlers).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if requests is not None:
        requests.close()
    finished = pam.close(max(0.0, settings.service.shutdown_wait_seconds - HAND_BACK_SECONDS))
    copies.stop()
    log.info("memory jobs stopped")
    if not finished:
        # Its jobs were handed back; a job thread still inside an LLM call would only hold up
        # the interpreter's exit (the pool joins its threads), past the worker's deadline.
        logging.shutdown()
        os._exit(0)
    return 0


def run_serve(host: str, port: int | None) -> int:
    """`pam serve`: the web app (waitress) on `host` and `port` (None: $PORT, else 8000) and
    a worker in one process, until SIGTERM or Ctrl-C; exit 2 when it cannot listen."""
    import waitress

    from webhooks.app import create_app

    settings = load_settings(needs_llm=True)
    service_logging(settings)
    port = port if port is not None else settings.web.port
    if not 1 <= port <= 65535:
        fail(f"pam: --port {port} is not a TCP port (1-65535)")
    pam, worker = start_worker(settings, migrate=True)
    app = create_app(settings, engine=pam.engine, on_inbound=worker.wake_inbox)
    log_channels(settings, "serve", log)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        # waitress would drop X-Forwarded-* before the app sees them; the app decides which to
        # trust (PAM_PROXY_HOPS), as it does under gunicorn, which passes them on.
        waitress.serve(
            app,
            host=host,
            port=port,
            threads=8,
            ident="pam",
            clear_untrusted_proxy_headers=False,
        )
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # the port is taken, or the address is not this machine's
        print(f"pam: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    finally:
        stop_worker(pam, worker)
        app.extensions["pam"].close()
    return 0


def run_telegram(action: str | None, url: str | None = None) -> int:
    """`pam telegram`: long polling (`action` None), or `set-webhook` (to `url`, else
    $PAM_PUBLIC_URL/telegram/webhook), `delete-webhook` or `status`; exit 2 naming only what
    is missing or wrong, before anything is sent to Telegram."""
    from webhooks.telegram.client import TelegramClient

    settings = load_settings()
    service_logging(settings)
    if action == "set-webhook":
        url = url or (
            f"{settings.web.public_url.rstrip('/')}/telegram/webhook"
            if settings.web.public_url
            else None
        )
    else:
        url = None  # only set-webhook sends a URL
    needed = [
        TELEGRAM_TOKEN_HELP if not settings.telegram.bot_token else None,
        TELEGRAM_SECRET_HELP
        if action == "set-webhook" and not settings.telegram.webhook_secret
        else None,
        TELEGRAM_URL_HELP if action == "set-webhook" and not url else None,
    ]
    missing = [item for item in needed if item]
    if missing:
        fail("pam: Telegram needs " + "; and ".join(missing) + ".")
    assert settings.telegram.bot_token is not None
    if action is None:
        return poll_telegram(settings)
    if url is not None:
        problem = webhook_url_problem(url, local_bot_api=bool(settings.telegram.api_url))
        if problem:
            fail(f"pam: {problem}. Nothing was sent to Telegram.")
        if not urlsplit(url).path.rstrip("/").endswith("/telegram/webhook"):
            print(
                f"pam: note: Pam's webhook route is /telegram/webhook; Telegram will POST to "
                f"{urlsplit(url).path or '/'} (fine only if a proxy maps it)",
                file=sys.stderr,
            )
    client = TelegramClient(settings.telegram.bot_token, settings.telegram.api_url)
    try:
        if action == "status":
            return telegram_status(client, settings)
        if url is not None:
            assert settings.telegram.webhook_secret is not None
            client.set_webhook(url, settings.telegram.webhook_secret)
            print(f"pam: Telegram now sends updates to {url}")
        else:
            client.delete_webhook()
            print("pam: webhook removed; `pam telegram` can poll now")
    except Exception as exc:
        print(f"pam: Telegram refused: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


def telegram_status(client: TelegramClient, settings: Settings) -> int:
    """Print what Telegram says of the bot's webhook and what to do about it; 0 when updates
    reach the webhook, 1 when they do not."""
    from webhooks.telegram.status import report

    public = settings.web.public_url
    expected = f"{public.rstrip('/')}/telegram/webhook" if public else None
    lines, ok = report(client.webhook_state(), client.username(), expected)
    for line in lines:
        print(f"pam: {line}")
    return 0 if ok else 1


def poll_telegram(settings: Settings) -> int:
    """Long-poll Telegram with an in-process worker, until SIGTERM."""
    from memory.queue.inbox import Inbox
    from webhooks.telegram.client import TelegramClient, WebhookIsSet
    from webhooks.telegram.poll import poll

    if not settings.llm.configured:
        fail(SETUP_HELP)
    stop = stop_on_sigterm()
    pam, worker = start_worker(settings, migrate=True)
    client = worker.senders["telegram"]
    assert isinstance(client, TelegramClient)
    log_channels(settings, "polling", log)
    log.info("polling Telegram for updates")
    try:
        inbox = Inbox(pam.engine, settings.service.inbox_lease_seconds)
        max_queued = settings.limits.max_queued_per_address
        poll(client, inbox, stop, worker.wake_inbox, max_queued=max_queued)
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
