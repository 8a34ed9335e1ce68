"""Where a Telegram reply goes, as the queues store it: the chat, and the forum topic in it.
Reading an update writes the address (payload); sending a reply reads it (sender). And who
the learner is: a user in their private chat, or a member of one group."""

from __future__ import annotations

from webhooks.telegram import CHANNEL

TOPIC_SEPARATOR = ":"
MEMBER_SEPARATOR = "@"


def chat_address(chat_id: int | str, thread_id: int | None = None) -> str:
    """Where replies go, as one string: the chat, and the forum topic in it if any
    ("-1001234567890:42"). Carrying the topic here keeps the learner (the user) and the
    inbox's deduplication (the update id) as they are, with no column of its own."""
    return f"{chat_id}{TOPIC_SEPARATOR}{thread_id}" if thread_id is not None else str(chat_id)


def destination(address: str) -> tuple[str, int | None]:
    """The chat id and forum topic (or None) in a `chat_address`."""
    chat, _, thread = address.partition(TOPIC_SEPARATOR)
    return chat, int(thread) if thread.isdigit() else None


def learner_address(user_id: int, chat_id: int, shared: bool) -> str:
    """The learner a message is from: the user in their private chat ("telegram:777001"), or
    the member of a group, one learner per user and group ("telegram:777001@-1001234567890"),
    whose memory holds only what they said in that group. So nothing a member told Pam in
    private (their profile, summary, recall, review items) is ever in a group's prompt."""
    if not shared:
        return f"{CHANNEL}:{user_id}"
    return f"{CHANNEL}:{user_id}{MEMBER_SEPARATOR}{chat_id}"


def in_group(address: str) -> bool:
    """Whether a `chat_address` is a chat others read: Telegram gives groups, supergroups and
    channels negative ids, and a private chat the user's own (positive) id."""
    return destination(address)[0].startswith("-")
