"""What the worker needs of a channel: a sender for replies and the errors it raises, and the
links media are served under. Channel adapters (webhooks/) implement `Sender` (and
`ChartSender` where the platform takes images); the messages themselves are
memory.messages."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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


@runtime_checkable
class ChartSender(Sender, Protocol):
    """A sender that can deliver a /progress chart with its caption; a sender without
    `send_chart` gets the caption alone."""

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """Send the chart `png` (or its public `url`, None when Pam has no public address)
        with `caption`; raise TransientSendError or PermanentSendError on failure."""
        ...


class ChartLinks(Protocol):
    """Signed, expiring links to stored charts, under the web app's public address."""

    def url(self, chart_id: int, nonce: str) -> str | None:
        """The link to the chart, or None when Pam has no public address (PAM_PUBLIC_URL)."""
        ...
