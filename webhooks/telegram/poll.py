"""`pam telegram`: long polling for development and small deployments (no public URL). Each
update takes the webhook's path — classified, stored in the inbox (deduplicated by update
id) — and the in-process worker answers it in order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memory.queue.inbox import Admission, Inbox
from webhooks.telegram.client import TelegramClient, WebhookIsSet
from webhooks.telegram.payload import NotAnUpdate, inbound_from_update, log_unreadable, parse_update

log = logging.getLogger(__name__)

MAX_PAUSE_SECONDS = 30.0


def poll(
    client: TelegramClient,
    inbox: Inbox,
    stop: threading.Event,
    on_inbound: Callable[[], None],
    timeout: int = 25,
    max_queued: int = 0,
) -> None:
    """Fetch updates until `stop` is set. Telegram forgets an update once a later offset is
    asked for, so the offset moves past an update only after it is stored. Raises
    WebhookIsSet when Telegram refuses polling because a webhook is set."""
    offset: int | None = None
    pause = 1.0
    while not stop.is_set():
        try:
            updates = client.get_updates(offset, timeout=timeout)
        except WebhookIsSet:
            raise
        except Exception as exc:
            log.warning(
                "telegram polling failed (%s); retrying in %.0fs", type(exc).__name__, pause
            )
            stop.wait(pause)
            pause = min(MAX_PAUSE_SECONDS, pause * 2)
            continue
        pause = 1.0
        for payload in updates:
            try:
                update = parse_update(payload)
            except NotAnUpdate:  # no update id: nothing Telegram sent, nothing to move past
                log.warning("telegram polling skipped a result that is no update")
                continue
            except ValueError as exc:  # one Pam cannot read: say which, and move past it
                log_unreadable(payload, exc)
                offset = payload["update_id"] + 1
                continue
            inbound = inbound_from_update(update, client.bot_id, client.username)
            admitted = inbox.admit(inbound, max_queued) if inbound is not None else None
            if admitted is not None and admitted is not Admission.DUPLICATE:
                on_inbound()
            if update.callback_query is not None:  # a tap: stop the button's spinner
                client.answer_tap(update.callback_query.id)
            offset = update.update_id + 1
