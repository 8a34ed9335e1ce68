"""Messages as plain data, the way every layer sees them: what a learner sent on some channel
(stored in the inbox) and what a delivered reply came back as. Channel adapters translate to and
from these."""

from __future__ import annotations

from dataclasses import dataclass


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
