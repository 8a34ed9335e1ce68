"""Where a Telegram reply goes, as the queues store it: the chat, and the forum topic in it.
Reading an update writes the address (payload); sending a reply reads it (sender)."""

from __future__ import annotations

TOPIC_SEPARATOR = ":"


def chat_address(chat_id: int | str, thread_id: int | None = None) -> str:
    """Where replies go, as one string: the chat, and the forum topic in it if any
    ("-1001234567890:42"). Carrying the topic here keeps the learner (the user) and the
    inbox's deduplication (the update id) as they are, with no column of its own."""
    return f"{chat_id}{TOPIC_SEPARATOR}{thread_id}" if thread_id is not None else str(chat_id)


def destination(address: str) -> tuple[str, int | None]:
    """The chat id and forum topic (or None) in a `chat_address`."""
    chat, _, thread = address.partition(TOPIC_SEPARATOR)
    return chat, int(thread) if thread.isdigit() else None
