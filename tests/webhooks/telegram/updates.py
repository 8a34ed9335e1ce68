"""Telegram updates as the Bot API delivers them (JSON), for each kind Pam meets."""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

from loopback.telegram_server import BOT_ID, USERNAME

Json = dict[str, Any]

# A random start keeps ids apart from any other run sharing a database.
_update_ids = itertools.count(random.randint(10_000_000, 900_000_000))
_message_ids = itertools.count(random.randint(1_000, 90_000))
DATE = 1_717_171_717  # 2024-05-31 16:08:37 UTC

PAM: Json = {"id": BOT_ID, "is_bot": True, "first_name": "Pam", "username": USERNAME}
OTHER_BOT: Json = {
    "id": 6_000_111_222,
    "is_bot": True,
    "first_name": "Quiz",
    "username": "OtherBot",
}


def learner(first_name: str = "Lena", language_code: str = "en") -> Json:
    """A Telegram user no other test uses (learners persist in a shared Postgres), their app
    set to `language_code` (Pam's guess at their native language: English, where the tests
    read Pam's own words in English)."""
    return {
        "id": 100_000_000 + uuid.uuid4().int % 6_000_000_000,
        "is_bot": False,
        "first_name": first_name,
        "last_name": "Schmidt",
        "username": f"{first_name.lower()}_{uuid.uuid4().hex[:6]}",
        "language_code": language_code,
    }


def private_chat(user: Json) -> Json:
    """The private chat between `user` and the bot (its id is the user's id)."""
    return {
        "id": user["id"],
        "first_name": user["first_name"],
        "last_name": user["last_name"],
        "username": user["username"],
        "type": "private",
    }


def group_chat(kind: str = "supergroup") -> Json:
    """A group Pam is a member of."""
    base = -1_001_000_000_000 if kind == "supergroup" else -4_000_000_000
    return {"id": base - random.randint(1, 999_999), "title": "Práctica de español", "type": kind}


def channel() -> Json:
    return {
        "id": -1_002_000_000_000 - random.randint(1, 999_999),
        "title": "Español cada día",
        "username": "espanol_cada_dia",
        "type": "channel",
    }


def utf16(text: str) -> int:
    """Length in UTF-16 code units: how the Bot API counts entity offsets and lengths."""
    return len(text.encode("utf-16-le")) // 2


def entity(text: str, piece: str, kind: str, **extra: Any) -> Json:
    """A MessageEntity of type `kind` covering the first `piece` in `text`."""
    start = text.index(piece)
    return {"offset": utf16(text[:start]), "length": utf16(piece), "type": kind, **extra}


def update(**body: Any) -> Json:
    """An update with a fresh update_id."""
    return {"update_id": next(_update_ids), **body}


def message(user: Json, chat: Json | None = None, **content: Any) -> Json:
    """A message from `user` (in their private chat unless `chat` is given)."""
    return {
        "message_id": next(_message_ids),
        "from": user,
        "chat": chat or private_chat(user),
        "date": DATE,
        **content,
    }


def text(user: Json, words: str, chat: Json | None = None, **extra: Any) -> Json:
    return update(message=message(user, chat, text=words, **extra))


def command(user: Json, words: str, chat: Json | None = None) -> Json:
    """A message starting with a command, with its bot_command entity."""
    head = words.split()[0]
    return text(user, words, chat, entities=[entity(words, head, "bot_command")])


def _file(prefix: str) -> Json:
    token = uuid.uuid4().hex
    return {"file_id": f"{prefix}ACAgQAAxkBAAI{token}", "file_unique_id": f"AgAD{token[:12]}"}


def _thumbnail() -> Json:
    return {**_file("AAMCBA"), "file_size": 5_432, "width": 240, "height": 240}


def voice(user: Json) -> Json:
    return update(
        message=message(
            user,
            voice={**_file("AwAC"), "duration": 4, "mime_type": "audio/ogg", "file_size": 14_012},
        )
    )


def audio(user: Json) -> Json:
    return update(
        message=message(
            user,
            audio={
                **_file("CQAC"),
                "duration": 187,
                "mime_type": "audio/mpeg",
                "file_name": "la_bamba.mp3",
                "performer": "Ritchie Valens",
                "title": "La Bamba",
                "file_size": 3_021_334,
            },
        )
    )


def video_note(user: Json) -> Json:
    return update(
        message=message(
            user,
            video_note={
                **_file("DQAC"),
                "duration": 9,
                "length": 384,
                "thumbnail": _thumbnail(),
                "file_size": 702_112,
            },
        )
    )


def _photo_sizes() -> list[Json]:
    return [
        {**_file("AgAC"), "file_size": 1_402, "width": 90, "height": 67},
        {**_file("AgAC"), "file_size": 19_874, "width": 320, "height": 240},
        {**_file("AgAC"), "file_size": 88_003, "width": 1280, "height": 960},
    ]


def photo(user: Json, caption: str | None = None, chat: Json | None = None) -> Json:
    extra: Json = {}
    if caption is not None:
        extra["caption"] = caption
        if f"@{USERNAME}" in caption:
            extra["caption_entities"] = [entity(caption, f"@{USERNAME}", "mention")]
    return update(message=message(user, chat, photo=_photo_sizes(), **extra))


def sticker(user: Json) -> Json:
    return update(
        message=message(
            user,
            sticker={
                **_file("CAACAgIAAx"),
                "width": 512,
                "height": 512,
                "emoji": "😂",
                "set_name": "HotCherry",
                "is_animated": True,
                "is_video": False,
                "type": "regular",
                "thumbnail": _thumbnail(),
                "file_size": 30_512,
            },
        )
    )


def document(user: Json) -> Json:
    return update(
        message=message(
            user,
            document={
                **_file("BQAC"),
                "file_name": "deberes_tema_3.pdf",
                "mime_type": "application/pdf",
                "file_size": 184_230,
            },
            caption="Mis deberes",
        )
    )


MADRID: Json = {"latitude": 40.416775, "longitude": -3.703790}


def location(user: Json) -> Json:
    return update(message=message(user, location={**MADRID, "horizontal_accuracy": 25.0}))


def venue(user: Json) -> Json:
    place = {"latitude": 40.413782, "longitude": -3.692127}
    return update(
        message=message(
            user,
            location=place,
            venue={
                "location": place,
                "title": "Museo del Prado",
                "address": "C. de Ruiz de Alarcón, 23, 28014 Madrid",
                "foursquare_id": "4adcda7ef964a520b04021e3",
            },
        )
    )


def contact(user: Json) -> Json:
    return update(
        message=message(
            user,
            contact={
                "phone_number": "+34600111222",
                "first_name": "Carlos",
                "last_name": "García",
                "user_id": 700_000_001,
            },
        )
    )


def poll(user: Json) -> Json:
    return update(
        message=message(
            user,
            poll={
                "id": str(random.randint(10**18, 10**19)),
                "question": "¿Café o té?",
                "options": [
                    {"persistent_id": "0", "text": "Café", "voter_count": 0},
                    {"persistent_id": "1", "text": "Té", "voter_count": 0},
                ],
                "total_voter_count": 0,
                "is_closed": False,
                "is_anonymous": True,
                "type": "regular",
                "allows_multiple_answers": False,
                "allows_revoting": True,
                "members_only": False,
            },
        )
    )


def dice(user: Json) -> Json:
    return update(message=message(user, dice={"emoji": "🎲", "value": 4}))


def edited_message(user: Json) -> Json:
    edited = message(user, text="Ayer fui al cine")
    return update(edited_message={**edited, "edit_date": DATE + 60})


def channel_post() -> Json:
    chat = channel()
    return update(
        channel_post={
            "message_id": next(_message_ids),
            "sender_chat": chat,
            "chat": chat,
            "date": DATE,
            "text": "Palabra del día: «madrugar»",
        }
    )


def edited_channel_post() -> Json:
    post = channel_post()["channel_post"]
    return update(edited_channel_post={**post, "edit_date": DATE + 120})


def my_chat_member(user: Json, old: str, new: str) -> Json:
    """The bot's membership in the learner's private chat changed: "member" → "kicked" is the
    learner blocking the bot; "kicked" → "member" unblocking it."""

    def member(status: str) -> Json:
        return {"user": PAM, "status": status, **({"until_date": 0} if status == "kicked" else {})}

    return update(
        my_chat_member={
            "chat": private_chat(user),
            "from": user,
            "date": DATE,
            "old_chat_member": member(old),
            "new_chat_member": member(new),
        }
    )


def from_other_bot(chat: Json) -> Json:
    """Another bot writing in a group, even mentioning Pam."""
    words = f"@{USERNAME} Pregunta 3: ¿cuál es la capital de Perú?"
    return text(OTHER_BOT, words, chat, entities=[entity(words, f"@{USERNAME}", "mention")])


# The stand-in user of messages a channel's posts make in its discussion group (Bot API:
# Message.from is "a fake sender user in non-channel chats" when sent on behalf of a chat).
TELEGRAM_SERVICE: Json = {"id": 777_000, "is_bot": False, "first_name": "Telegram"}


def automatic_forward(chat: Json) -> Json:
    """A channel's post forwarded by Telegram into the channel's discussion group `chat`,
    mentioning Pam: sent on behalf of the channel (`sender_chat`), not by a member."""
    words = f"@{USERNAME} Palabra del día: «madrugar»"
    return text(
        TELEGRAM_SERVICE,
        words,
        chat,
        entities=[entity(words, f"@{USERNAME}", "mention")],
        sender_chat=channel(),
        is_automatic_forward=True,
    )


def new_chat_members(user: Json, chat: Json) -> Json:
    """A service message: `user` added Pam and a friend to a group."""
    friend = learner("Marta")
    return update(
        message=message(
            user,
            chat,
            new_chat_participant=friend,
            new_chat_member=friend,
            new_chat_members=[PAM, friend],
        )
    )


def pinned_message(user: Json) -> Json:
    """A service message in the private chat: the learner pinned one of Pam's messages."""
    pinned = message(PAM, private_chat(user), text="¡Hasta mañana!")
    return update(message=message(user, pinned_message=pinned))


def mention(user: Json, chat: Json, words: str, name: str = USERNAME) -> Json:
    """A group message mentioning @`name` (Pam by default) somewhere in `words`."""
    return text(user, words, chat, entities=[entity(words, f"@{name}", "mention")])


def reply_to_pam(user: Json, chat: Json, words: str) -> Json:
    """A group message replying to one of Pam's messages."""
    replied = message(PAM, chat, text="¿Y qué hiciste el fin de semana?")
    return text(user, words, chat, reply_to_message=replied)


def text_mention(user: Json, chat: Json, words: str, name: str) -> Json:
    """A group message mentioning Pam by name (a text_mention entity carrying the user)."""
    return text(user, words, chat, entities=[entity(words, name, "text_mention", user=PAM)])


def forum_chat() -> Json:
    """A supergroup with topics turned on (Bot API: Chat.is_forum)."""
    return {**group_chat(), "is_forum": True}


def topic_created(creator: Json, chat: Json, name: str = "Deberes") -> Json:
    """The service message that opened a forum topic: its message_id is the topic's id."""
    topic = next(_message_ids)
    return {
        "message_id": topic,
        "from": creator,
        "chat": chat,
        "date": DATE,
        "message_thread_id": topic,
        "forum_topic_created": {"name": name, "icon_color": 7_322_096},
        "is_topic_message": True,
    }


def in_topic(user: Json, topic: Json, words: str, **extra: Any) -> Json:
    """A message in the forum topic `topic` opened, as the Bot API delivers it: with the
    topic's id, flagged as a topic message, "replying" to the topic's first message unless it
    replies to another one."""
    return update(
        message=message(
            user,
            topic["chat"],
            message_thread_id=topic["message_thread_id"],
            is_topic_message=True,
            text=words,
            **{"reply_to_message": topic, **extra},
        )
    )


def topic_mention(user: Json, topic: Json, words: str) -> Json:
    """A message mentioning Pam in the forum topic `topic` opened."""
    return in_topic(user, topic, words, entities=[entity(words, f"@{USERNAME}", "mention")])
