"""What the worker needs of a channel: a sender for replies and the errors it raises. Channel
adapters (webhooks/) implement `Sender`; the messages themselves are memory.messages."""

from __future__ import annotations

from typing import Protocol

from memory.messages import Sent


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
