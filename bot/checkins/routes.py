"""Where a check-in can go, as each channel's rules allow: the port the check-in rounds ask and
the outer layer implements, knowing the platforms (webhooks/checkin_routes.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol


@dataclass(frozen=True)
class Route:
    """How a check-in reaches a learner: the `channel` and `chat_id` its outbox part goes to;
    `window`, the time since the learner's last message reached Pam (its inbox row's
    `received_at`) within which Pam may write freely
    (WhatsApp's 24 hours, less a margin; None: any time); `template`, whether an approved
    template carries a check-in outside it; `timezone`, the one the address suggests (a
    WhatsApp number's country), None when it suggests none; `window_closes`, when the
    platform's window itself closes (`window` is kept a margin inside it; None: at `window`):
    a free-form check-in still unsent by then is never sent."""

    channel: str
    chat_id: str
    window: timedelta | None = None
    template: bool = False
    timezone: str | None = None
    window_closes: timedelta | None = None


class Routes(Protocol):
    """The channels' rules for check-ins."""

    def route(self, address: str) -> Route | None:
        """How a check-in reaches the learner at `address`; None where none may go (a group
        chat others read, a channel without a sender, the HTTP API)."""
        ...
