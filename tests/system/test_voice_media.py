"""Voice through the Procfile's processes: real `gunicorn` (web) and `pam worker` subprocesses
against the fake Bot API (getFile, the file download, sendVoice), Twilio's media (basic auth,
then a redirect to an unauthenticated CDN) and the fake OpenAI-compatible server's audio
endpoints. A voice note on each channel is transcribed and answered, its transcript is the
reply prompt's learner message; after /voice on the next reply arrives as an OGG voice message
on Telegram and as media on WhatsApp, which the web process serves from its signed link. The
Twilio credentials never reach the CDN, and a media URL on a foreign host is never fetched.
With a slow speech server the text arrives first and the voice message after it; a WAV-only
speech server's reply arrives as OGG/Opus."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from bot import phrases
from bot.voice.audio import inspect
from loopback.audio_samples import sample
from loopback.harness import (
    wait_for,
)
from loopback.local_server import Answer, LocalServer
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, MediaCDN, TwilioServer, sign
from tests.helpers.channels import channel_services
from tests.support import HANG_SECONDS, forged
from tests.webhooks.telegram import updates
from tests.webhooks.whatsapp.conftest import media_form, text_form

pytestmark = pytest.mark.slow

SECRET = "pam-voice-webhook-secret"
WAIT = HANG_SECONDS  # each wait ends on its event; the bound is a hang guard
HEARD = "Ayer yo es muy cansado después del trabajo"


class Elsewhere(LocalServer):
    """A host that is not Twilio's: records any request that reaches it (none should)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__()

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        self.paths.append(path)
        return 200, {"Content-Type": "audio/ogg"}, sample("voice.ogg")


def _telegram(base: str, body: dict[str, Any]) -> None:
    posted = requests.post(
        f"{base}/telegram/webhook",
        json=body,
        headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        timeout=10,
    )
    assert posted.status_code == 200, posted.text


def _whatsapp(base: str, form: dict[str, str]) -> None:
    url = f"{base}/whatsapp/webhook"
    posted = requests.post(
        url, data=form, headers={"X-Twilio-Signature": sign(url, form)}, timeout=10
    )
    assert posted.status_code == 200, posted.text


def _voice_update(user: dict[str, Any], file_id: str) -> dict[str, Any]:
    voice = {"file_id": file_id, "file_unique_id": file_id[-12:], "duration": 2}
    voice |= {"mime_type": "audio/ogg", "file_size": len(sample("voice.ogg"))}
    return updates.update(message=updates.message(user, voice=voice))


def _voice_form(wa_id: str, media_url: str) -> dict[str, str]:
    form = media_form(wa_id, "audio/ogg", "audio")
    form["MediaUrl0"] = media_url
    return form


def test_voice_notes_on_telegram_and_whatsapp_are_heard_answered_and_spoken_back(
    tmp_path: Path, database: str
) -> None:
    with (
        OpenAIServer() as llm,
        TelegramServer() as telegram,
        MediaCDN() as cdn,
        TwilioServer(cdn) as twilio,
        Elsewhere() as elsewhere,
        channel_services(tmp_path, database, llm, telegram, twilio, SECRET) as running,
    ):
        base, group = running.base, running.group
        llm.hear(HEARD)

        # Telegram: Lena practises Spanish and sends a voice note.
        lena = updates.learner("Lena")
        _telegram(base, updates.command(lena, "/language Spanish English"))
        wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 1, WAIT, "/language's answer")
        file_id = f"AwACAgQAAxkBAAI{uuid.uuid4().hex}"
        telegram.add_file(file_id, sample("voice.ogg"), path="voice/file_1.oga")
        _telegram(base, _voice_update(lena, file_id))
        wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 2, WAIT, "the voice reply")
        reply = telegram.sent_texts(lena["id"])[1]
        assert reply.startswith(f"🎙 “{HEARD}”"), reply
        # Downloaded through TELEGRAM_API_URL's file server, transcribed with the hint "es".
        assert [c.params["file_id"] for c in telegram.of("getFile")] == [file_id]
        assert telegram.downloads == [f"/file/bot{TOKEN}/voice/file_1.oga"]
        (heard,) = llm.audio_requests
        assert heard.fields["language"] == "es" and heard.file == sample("voice.ogg")
        # The transcript is the reply prompt's learner message.
        (asked,) = llm.of("reply")
        assert asked["messages"][-1] == {"role": "user", "content": HEARD}

        # getFile naming a file on the worker's disk, with no TELEGRAM_LOCAL_FILES_DIR: never
        # read, nor sent on to the transcription server; Lena hears why, in Spanish.
        local = tmp_path / "not-a-telegram-file.oga"
        local.write_bytes(sample("voice.ogg"))
        hostile = f"AwACAgQAAxkBAAI{uuid.uuid4().hex}"
        telegram.add_file(hostile, sample("voice.ogg"), path=str(local))
        _telegram(base, _voice_update(lena, hostile))
        wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 3, WAIT, "the refusal")
        assert telegram.sent_texts(lena["id"])[2] == phrases.VOICE_UNREADABLE
        assert len(llm.audio_requests) == 1

        # /voice on: the next reply comes as text, then as an OGG voice message.
        _telegram(base, updates.command(lena, "/voice on"))
        wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 4, WAIT, "/voice on's answer")
        assert telegram.sent_texts(lena["id"])[3] == phrases.VOICE_ON
        _telegram(base, updates.text(lena, "¿Y tú qué hiciste ayer?"))
        wait_for(lambda: bool(telegram.of("sendVoice")), WAIT, "the spoken reply on Telegram")
        (spoken,) = telegram.of("sendVoice")
        assert str(spoken.params["chat_id"]) == str(lena["id"])
        assert spoken.params["voice"].startswith(b"OggS")
        assert len(telegram.sent_texts(lena["id"])) == 5  # the text went too, first

        # WhatsApp: Lucía's voice note, fetched from Twilio with the account's credentials,
        # then from the CDN without them.
        wa_id = "34" + str(uuid.uuid4().int)[:10]
        lucia = f"whatsapp:+{wa_id}"
        _whatsapp(base, text_form(wa_id, "/language Spanish"))
        wait_for(lambda: len(twilio.bodies(lucia)) == 1, WAIT, "/language's answer on WhatsApp")
        _whatsapp(base, _voice_form(wa_id, twilio.add_media(sample("voice.ogg"))))
        wait_for(lambda: len(twilio.bodies(lucia)) == 2, WAIT, "the voice reply on WhatsApp")
        assert twilio.bodies(lucia)[1].startswith(f"🎙 “{HEARD}”")
        credentials = base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
        (asked_twilio,) = twilio.media_seen
        assert asked_twilio.headers["Authorization"] == f"Basic {credentials}"
        (fetched,) = cdn.seen
        assert "Authorization" not in fetched.headers
        assert AUTH_TOKEN not in repr(fetched) and credentials not in repr(fetched)

        # A media URL on a host that is not Twilio's is refused without a request.
        foreign = f"{elsewhere.origin}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1"
        _whatsapp(base, _voice_form(wa_id, foreign))
        wait_for(lambda: len(twilio.bodies(lucia)) == 3, WAIT, "the refusal on WhatsApp")
        # Lucía's +34 number guesses her native language: Pam's own words are Spanish.
        assert twilio.bodies(lucia)[2] == phrases.said(phrases.VOICE_UNREADABLE, "es")
        assert elsewhere.paths == []

        # /voice on: the next reply's voice is media Twilio fetches from Pam's signed link.
        _whatsapp(base, text_form(wa_id, "/voice on"))
        wait_for(lambda: len(twilio.bodies(lucia)) == 4, WAIT, "/voice on on WhatsApp")
        _whatsapp(base, text_form(wa_id, "Hola, ¿qué tal?"))
        wait_for(lambda: bool(twilio.media(lucia)), WAIT, "the spoken reply on WhatsApp")
        (link,) = twilio.media(lucia)
        assert link.startswith(f"{base}/voice/") and link.endswith(".ogg")
        served = requests.get(link, timeout=10)
        assert served.status_code == 200
        assert served.headers["Content-Type"] == "audio/ogg"
        assert served.content.startswith(b"OggS")
        # A chart's link cannot name a voice clip, nor a forged one anything.
        token = link.removeprefix(f"{base}/voice/").removesuffix(".ogg")
        assert requests.get(f"{base}/charts/{token}.png", timeout=10).status_code == 403
        assert requests.get(f"{base}/voice/{forged(token)}.ogg", timeout=10).status_code == 403
        group.assert_alive()


def test_the_text_goes_out_first_and_its_voice_follows_from_a_slow_or_wav_only_server(
    tmp_path: Path, database: str
) -> None:
    with (
        OpenAIServer() as llm,
        TelegramServer() as telegram,
        MediaCDN() as cdn,
        TwilioServer(cdn) as twilio,
        channel_services(tmp_path, database, llm, telegram, twilio, SECRET) as running,
    ):
        base, group = running.base, running.group
        lena = updates.learner("Lena")
        _telegram(base, updates.command(lena, "/language Spanish English"))
        _telegram(base, updates.command(lena, "/voice on"))
        wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 2, WAIT, "the commands' answers")

        # A CPU speech server: 30 s for a reply. The text arrives while it is still speaking
        # (the test ends the wait once it has seen that, instead of sleeping through it).
        llm.speak_slowly(30.0)
        try:
            _telegram(base, updates.text(lena, "Ayer fui al mercado"))
            wait_for(lambda: len(telegram.sent_texts(lena["id"])) == 3, WAIT, "the text reply")
            wait_for(lambda: len(llm.speech_requests()) == 1, WAIT, "the speech request")
            assert telegram.of("sendVoice") == []
        finally:
            llm.speech_done.set()
        wait_for(lambda: len(telegram.of("sendVoice")) == 1, WAIT, "the voice after the text")
        methods = [c.method for c in telegram.calls if c.method in ("sendMessage", "sendVoice")]
        assert methods == ["sendMessage"] * 3 + ["sendVoice"]
        (spoken,) = telegram.of("sendVoice")
        assert str(spoken.params["chat_id"]) == str(lena["id"])
        assert spoken.params["voice"] == sample("voice.ogg")
        (asked,) = llm.speech_requests()
        assert asked.fields["input"] and asked.fields["response_format"] == "opus"

        # A speech server that answers WAV whatever it is asked: the voice arrives as OGG/Opus.
        llm.speak_slowly(0.0)
        llm.speak_as(sample("voice.wav"), "audio/wav")
        _telegram(base, updates.text(lena, "Hoy estoy cansada"))
        wait_for(lambda: len(telegram.of("sendVoice")) == 2, WAIT, "the WAV reply's voice")
        methods = [c.method for c in telegram.calls if c.method in ("sendMessage", "sendVoice")]
        assert methods[-2:] == ["sendMessage", "sendVoice"]
        converted = telegram.of("sendVoice")[1].params["voice"]
        info = inspect(converted, None)
        assert (info.content_type, info.codec) == ("audio/ogg", "opus")
        assert info.seconds == pytest.approx(inspect(sample("voice.wav"), None).seconds, abs=0.1)
        group.assert_alive()
