"""What the core knows of a channel: an inbound message as plain data, and a sender for
replies. Channel adapters (webhooks/, the Telegram poller) translate to and from these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Inbound:
    """One message a learner sent on some channel, as the core sees it.

    `address` identifies the learner across the whole system (e.g. "telegram:12345"); it is
    the learner's external id. `chat_id` is where replies go on the channel. `platform_id`
    is the platform's own message id, unique per channel, used to recognise redeliveries.
    `kind` is "text", or what was sent instead (one of NOT_TEXT) for a friendly answer."""

    channel: str
    platform_id: str
    address: str
    chat_id: str
    text: str
    display_name: str | None = None
    kind: str = "text"


# What learners send that Pam cannot read yet: each gets a friendly answer in their language.
VOICE = "voice"
MEDIA = "media"
NOT_TEXT = (VOICE, MEDIA)


@dataclass(frozen=True)
class Sent:
    """A delivered reply: the platform's id for it, when it gives one."""

    platform_id: str | None = None


class TransientSendError(Exception):
    """Delivery failed but may succeed later (timeouts, 5xx, rate limits)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentSendError(Exception):
    """Delivery can never succeed (blocked bot, invalid recipient, outside the session
    window): recorded, not retried."""


class Sender(Protocol):
    """Delivers one reply text to one chat on one channel. `max_chars` is the platform's
    limit per message, as its `length` measures text: longer replies are split before they
    are queued."""

    max_chars: int

    def length(self, text: str) -> int:
        """The size of `text` as the platform counts it against `max_chars`."""
        ...

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send `text`; raise TransientSendError or PermanentSendError on failure."""
        ...
