"""A WhatsApp voice note in Twilio's form is a VOICE message whose VoiceNote is the media URL
of the first audio item, with its type (Twilio tells no length or size)."""

from __future__ import annotations

from memory.messages import MEDIA, VOICE, Inbound, VoiceNote
from tests.webhooks.whatsapp.conftest import media_form, new_wa_id
from webhooks.whatsapp.payload import inbound_from_form


def inbound(form: dict[str, str]) -> Inbound:
    message = inbound_from_form(form)
    assert message is not None
    return message


def test_an_audio_item_is_a_voice_note_by_its_media_url() -> None:
    form = media_form(new_wa_id(), "audio/ogg", "audio")

    message = inbound(form)

    assert message.kind == VOICE and message.text == ""
    assert message.voice == VoiceNote(form["MediaUrl0"], "audio/ogg", None, None, "voice")


def test_the_first_audio_item_is_the_voice_note_and_the_caption_the_text() -> None:
    form = media_form(new_wa_id(), "image/jpeg", "image", body="Escucha esto")
    form.update(
        NumMedia="2",
        MediaContentType1="audio/mpeg",
        MediaUrl1=form["MediaUrl0"].rsplit("/", 1)[0] + "/ME" + "1" * 32,
    )

    message = inbound(form)

    assert (message.kind, message.text) == (VOICE, "Escucha esto")
    assert message.voice == VoiceNote(form["MediaUrl1"], "audio/mpeg", source="voice")


def test_an_audio_item_without_a_url_is_voice_with_nothing_to_fetch() -> None:
    form = media_form(new_wa_id(), "audio/ogg", "audio")
    del form["MediaUrl0"]

    message = inbound(form)

    assert message.kind == VOICE and message.voice is None


def test_an_image_carries_no_voice_note() -> None:
    message = inbound(media_form(new_wa_id(), "image/jpeg", "image"))

    assert message.kind == MEDIA and message.voice is None
