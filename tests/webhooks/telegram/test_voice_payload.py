"""Telegram voice notes, audio files and round video notes in an update become a VOICE message
whose VoiceNote says where the worker fetches the audio (the file_id) and what the update told
of it; read the same whether python-telegram-bot gives durations as timedeltas or not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loopback.telegram_server import BOT_ID, USERNAME
from memory.messages import MEDIA, VOICE, Inbound, VoiceNote
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.updates import Json
from webhooks.telegram.payload import inbound_from_update, parse_update


def inbound(update: Json) -> Inbound:
    """The inbound message Pam reads from `update` (the webhook's and polling's way)."""
    message = inbound_from_update(parse_update(update), BOT_ID, lambda: USERNAME)
    assert message is not None
    return message


@pytest.fixture(params=["timedelta", "int"])
def durations(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Either way python-telegram-bot may give durations (PTB_TIMEDELTA on or off)."""
    if request.param == "timedelta":
        monkeypatch.setenv("PTB_TIMEDELTA", "1")
    else:
        monkeypatch.delenv("PTB_TIMEDELTA", raising=False)


@pytest.mark.usefixtures("durations")
@pytest.mark.parametrize(
    ("make", "field", "expected"),
    [
        (u.voice, "voice", ("audio/ogg", 4.0, 14_012)),
        (u.audio, "audio", ("audio/mpeg", 187.0, 3_021_334)),
        # Telegram gives a video note no type: it is always MPEG-4.
        (u.video_note, "video_note", ("video/mp4", 9.0, 702_112)),
    ],
)
def test_a_voice_note_audio_or_video_note_is_a_voice_note_by_its_file_id(
    make: Callable[[Json], Json], field: str, expected: tuple[str, float, int]
) -> None:
    update = make(u.learner())

    message = inbound(update)

    content_type, seconds, size = expected
    file_id = update["message"][field]["file_id"]
    assert message.kind == VOICE and message.text == ""
    assert message.voice == VoiceNote(file_id, content_type, seconds, size, source=field)


def test_a_voice_note_keeps_its_caption_as_the_text() -> None:
    update = u.voice(u.learner())
    update["message"]["caption"] = "¿Lo digo bien?"

    message = inbound(update)

    assert (message.kind, message.text) == (VOICE, "¿Lo digo bien?")
    assert message.voice is not None and message.voice.ref.startswith("AwAC")


def test_a_voice_note_without_size_type_or_length_says_none() -> None:
    update = u.voice(u.learner())
    for name in ("mime_type", "file_size", "duration"):
        update["message"]["voice"].pop(name)
    update["message"]["voice"]["duration"] = 0  # the Bot API's field is required; 0 is legal

    message = inbound(update)

    assert message.voice == VoiceNote(
        update["message"]["voice"]["file_id"], None, 0.0, None, "voice"
    )


def test_a_photo_or_a_text_carries_no_voice_note() -> None:
    me = u.learner()
    assert inbound(u.photo(me)).kind == MEDIA and inbound(u.photo(me)).voice is None
    assert inbound(u.text(me, "Hola")).voice is None


def test_a_voice_note_in_a_forum_topic_keeps_the_topic() -> None:
    me, chat = u.learner(), u.forum_chat()
    topic = u.topic_created(me, chat)
    pams = {  # a group voice note is answered when it replies to Pam
        **u.message(u.PAM, chat, text="¿Y el fin de semana?"),
        "message_thread_id": topic["message_thread_id"],
        "is_topic_message": True,
    }
    update = u.in_topic(me, topic, "", reply_to_message=pams)
    update["message"].pop("text")
    update["message"]["voice"] = u.voice(me)["message"]["voice"]

    message = inbound(update)

    assert message.kind == VOICE and message.voice is not None
    assert message.chat_id == f"{chat['id']}:{topic['message_thread_id']}"
