"""The API channel's inbound JSON, validated (`ApiMessage`) and read into a plain inbound
message, and the chat address that carries the user and the request's id to the reply."""

from __future__ import annotations

import unicodedata

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memory.messages import Inbound
from webhooks.api import CHANNEL

# The chat address carries the user and the request's id, apart by a character neither may
# hold (no control characters), so the reply can name the request it answers.
REQUEST_SEPARATOR = "\x1f"
MAX_CHAT_CHARS = 100  # the width of the queues' chat_id columns


def chat_address(user: str, request_id: str) -> str:
    """Where the reply to `request_id` from `user` goes, as the queues store it."""
    return f"{user}{REQUEST_SEPARATOR}{request_id}"


def recipient(address: str) -> tuple[str, str | None]:
    """The user and the request id in a `chat_address` (no request id in replies queued
    before the callback carried one)."""
    user, _, request_id = address.partition(REQUEST_SEPARATOR)
    return user, request_id or None


class ApiMessage(BaseModel):
    """The inbound JSON body."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    id: str = Field(min_length=1, max_length=100)
    user: str = Field(min_length=1, max_length=100)
    text: str = Field(min_length=1, max_length=20000)
    name: str | None = Field(default=None, max_length=100)

    @field_validator("id", "user", "name")
    @classmethod
    def printable(cls, value: str | None) -> str | None:
        """Identifiers and names are printable text: no control characters."""
        if value is not None and any(unicodedata.category(ch) == "Cc" for ch in value):
            raise ValueError("must not contain control characters")
        return value

    @model_validator(mode="after")
    def fits_the_chat_address(self) -> ApiMessage:
        """`user` and `id` travel together with the reply, in one column."""
        if len(chat_address(self.user, self.id)) > MAX_CHAT_CHARS:
            raise ValueError(
                f"user and id together must be at most {MAX_CHAT_CHARS - 1} characters"
            )
        return self


def invalid(exc: ValidationError) -> str:
    """What is wrong with a body `ApiMessage` refused, for the 400's detail: the fields, or
    the rule that spans several."""
    errors = exc.errors()
    fields = sorted({".".join(map(str, e["loc"])) for e in errors if e["loc"]})
    # A rule over several fields has no field of its own: its message says what is wrong.
    rules = [e["msg"].removeprefix("Value error, ") for e in errors if not e["loc"]]
    return f"invalid fields: {', '.join(fields)}" if fields else "; ".join(rules)


def inbound_from_message(message: ApiMessage) -> Inbound:
    """The inbound message an accepted body carries."""
    return Inbound(
        channel=CHANNEL,
        # Deduplicated per user and id: each front-end user numbers their own messages. The
        # separator no id holds keeps these keys apart from the bare ids stored before.
        platform_id=chat_address(message.user, message.id),
        address=f"{CHANNEL}:{message.user}",
        chat_id=chat_address(message.user, message.id),
        text=message.text,
        display_name=message.name,
    )
