"""What every route of the web app shares: the per-app context (settings, the inbox, the hook
that wakes an in-process worker), reading a JSON body, and accepting an inbound message."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app, request
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import Engine
from werkzeug.middleware.proxy_fix import ProxyFix

from memory.messages import Inbound
from memory.queue.inbox import Admission, Inbox
from memory.queue.outbox import Outbox
from webhooks.settings import Settings
from webhooks.telegram.client import TelegramClient

log = logging.getLogger(__name__)

# The web processes' own metrics (GET /metrics: webhooks/metrics.py). Under gunicorn
# (PROMETHEUS_MULTIPROC_DIR set before prometheus_client is imported) their values live in the
# workers' shared directory; otherwise in this registry.
WEB_METRICS = CollectorRegistry()
MESSAGES_RECEIVED = Counter(
    "pam_messages_received",
    "Messages received from a channel and stored in the inbox (redeliveries not counted).",
    ["channel"],
    registry=WEB_METRICS,
)
MESSAGES_TURNED_AWAY = Counter(
    "pam_messages_turned_away",
    "Messages not stored: their learner had PAM_MAX_QUEUED_PER_ADDRESS waiting already.",
    ["channel"],
    registry=WEB_METRICS,
)

# How often a channel's refused webhook requests are said in the log, at most.
REFUSAL_LOG_SECONDS = 60.0


@dataclass
class WebContext:
    """What the request handlers need: settings, the inbox, the outbox (for delivery
    reports), and a hook to wake a worker that shares this process (`pam serve`)."""

    settings: Settings
    engine: Engine
    inbox: Inbox
    outbox: Outbox
    on_inbound: Callable[[], None]
    _telegram: TelegramClient | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _refusals_said: dict[str, float] = field(default_factory=dict)

    def telegram(self) -> TelegramClient:
        """The Telegram client of this process, made on first use (only its identity is
        needed here: the bot id, and the username for mentions in groups)."""
        with self._lock:
            if self._telegram is None:
                assert self.settings.telegram.bot_token
                self._telegram = TelegramClient(
                    self.settings.telegram.bot_token, self.settings.telegram.api_url
                )
            return self._telegram

    def refused(self, channel: str, why: str, advice: str) -> None:
        """Warn that a channel's webhook refused a request as not the platform's own, at most
        once a minute per channel: after a changed secret every delivery is refused, and the
        operator needs one line saying which setting to look at, not one per retry (nor a
        full log when someone probes the route)."""
        now = time.monotonic()
        with self._lock:
            last = self._refusals_said.get(channel)
            if last is not None and now - last < REFUSAL_LOG_SECONDS:
                return
            self._refusals_said[channel] = now
        log.warning("%s webhook refused a request (%s): %s", channel, why, advice)

    def close(self) -> None:
        """Release what this process opened (the Telegram client: connections, event loops)."""
        with self._lock:
            if self._telegram is not None:
                self._telegram.close()
                self._telegram = None


def web() -> WebContext:
    """The current app's WebContext."""
    context: WebContext = current_app.extensions["pam"]
    return context


def json_body() -> Any:
    """The request's JSON, or None when it is not JSON — including JSON nested so deeply that
    the parser gives up (a 4xx for the caller, never a 500)."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        return None


def accept(inbound: Inbound, started: float) -> Admission:
    """Persist an inbound message in the inbox, wake an in-process worker, and log the event
    (channel, kind, timing; never the text). Not stored when it is a redelivery, or when its
    learner has PAM_MAX_QUEUED_PER_ADDRESS messages waiting already (turned away: the
    platform is still told it arrived, and the learner is told once to slow down)."""
    context = web()
    admission = context.inbox.admit(inbound, context.settings.limits.max_queued_per_address)
    if admission is Admission.ACCEPTED:
        MESSAGES_RECEIVED.labels(inbound.channel).inc()
    if admission is Admission.TURNED_AWAY:
        MESSAGES_TURNED_AWAY.labels(inbound.channel).inc()
    if admission is not Admission.DUPLICATE:  # a note of it may be waiting too
        context.on_inbound()
    log.info(
        "inbound %s channel=%s kind=%s ms=%d",
        admission.value,
        inbound.channel,
        inbound.kind,
        (time.monotonic() - started) * 1000,
    )
    return admission


def trust_proxies(app: Flask, hops: int) -> None:
    """Read the scheme and client address from the X-Forwarded-Proto and -For headers of
    `hops` proxies (the nearest ones; values further out are a client's own), the same
    under gunicorn and waitress. With 0 they are ignored. The Host header is kept as the
    client sent it, as Heroku's router and Fly's proxy pass it on: X-Forwarded-Host, which
    neither sets, would be whatever a client wrote."""
    if hops:
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=0, x_port=0, x_prefix=0
        )
