"""WhatsApp voice through Twilio, with real httpx and the real twilio client against the
fakes: a voice note's media URL is fetched with the account's credentials only on Twilio's API
under this account, and Twilio's redirect to its CDN is followed without them (the CDN records
everything it got); foreign URLs are refused unasked; loops, caps and outages map onto the
voice errors. A spoken reply goes as media, no body; the API's callback carries `audio_url`."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.channels import (
    PermanentSendError,
    VoiceFetcher,
    VoiceRefused,
    VoiceSender,
    VoiceTooLarge,
    VoiceUnavailable,
)
from bot.logs import QUIET
from loopback.callback_server import CallbackServer
from loopback.local_server import Trickle
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, Item, MediaCDN, TwilioServer
from memory.messages import VoiceNote
from tests.support import API_TOKEN
from webhooks.api.sender import ApiCallbackSender
from webhooks.services import service_logging
from webhooks.settings import Settings
from webhooks.whatsapp.media import TwilioMedia, file_name
from webhooks.whatsapp.sender import TwilioSender

OGG = (Path(__file__).parent / "fixtures" / "hola.ogg").read_bytes()
CAP = 10 * 1024 * 1024
LEARNER = "whatsapp:+34600000009"
AUDIO_URL = "https://pam.example/audio/token.ogg"


@pytest.fixture
def cdn() -> Iterator[MediaCDN]:
    with MediaCDN() as server:
        yield server


@pytest.fixture
def twilio(cdn: MediaCDN) -> Iterator[TwilioServer]:
    with TwilioServer(cdn) as server:
        yield server


@pytest.fixture
def sender(twilio: TwilioServer) -> TwilioSender:
    return TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url, timeout=3.0)


def voice(url: str, content_type: str = "audio/ogg") -> VoiceNote:
    return VoiceNote(url, content_type, source="voice")


def test_the_twilio_sender_fetches_and_sends_voice(sender: TwilioSender) -> None:
    assert isinstance(sender, VoiceFetcher) and isinstance(sender, VoiceSender)


def test_a_voice_note_is_fetched_with_the_credentials_and_the_cdn_never_sees_them(
    sender: TwilioSender, twilio: TwilioServer, cdn: MediaCDN
) -> None:
    url = twilio.add_media(OGG, "audio/ogg")

    audio = sender.fetch_voice(voice(url), CAP)

    assert audio.data == OGG
    assert (audio.name, audio.content_type) == ("voice.ogg", "audio/ogg")
    (asked,) = twilio.media_seen
    assert asked.headers["Authorization"].startswith("Basic ")
    (fetched,) = cdn.seen
    assert "Authorization" not in fetched.headers and "Cookie" not in fetched.headers
    seen = json.dumps([fetched.path, fetched.headers])
    encoded = base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
    assert AUTH_TOKEN not in seen and encoded not in seen


def test_a_relative_redirect_is_followed_on_twilios_host(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    """A Location without a host stays on Twilio's API: it gets no credentials either."""
    target = twilio.add_media(OGG)
    url = twilio.add_media(b"", location=target.removeprefix(twilio.origin))

    with pytest.raises(VoiceRefused):  # Twilio asks for the credentials Pam keeps for hop 1
        sender.fetch_voice(voice(url), CAP)

    first, second = twilio.media_seen
    assert "Authorization" in first.headers and "Authorization" not in second.headers


@pytest.mark.parametrize(
    "url",
    [
        f"https://evil.example/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1",
        f"http://evil.example/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1",
        "{cdn}/2010-04-01/Accounts/" + ACCOUNT_SID + "/Messages/MM1/Media/ME1",
        "{twilio}/2010-04-01/Accounts/AC" + "9" * 32 + "/Messages/MM1/Media/ME1",
        "{twilio}/2010-04-01/Accounts/" + ACCOUNT_SID + "/../AC" + "9" * 32 + "/Media/ME1",
        "{twilio}/2010-04-01/Accounts/" + ACCOUNT_SID + "/%2e%2e/AC" + "9" * 32 + "/Media/ME1",
        "{twilio}/2010-04-01/Accounts/" + ACCOUNT_SID + "Z/Messages/MM1/Media/ME1",
        "{user}/2010-04-01/Accounts/" + ACCOUNT_SID + "/Messages/MM1/Media/ME1",
        "ftp://api.twilio.com/2010-04-01/Accounts/" + ACCOUNT_SID + "/Messages/MM1/Media/ME1",
        "not a url at all",
    ],
    ids=[
        "foreign https host",
        "foreign http host",
        "another local port",
        "another account",
        "dot segments",
        "encoded dot segments",
        "a longer sid",
        "userinfo",
        "another scheme",
        "no url",
    ],
)
def test_a_media_url_off_twilios_api_for_this_account_is_refused_unasked(
    sender: TwilioSender, twilio: TwilioServer, cdn: MediaCDN, url: str
) -> None:
    host = twilio.origin.removeprefix("http://")
    url = url.format(cdn=cdn.origin, twilio=twilio.origin, user=f"http://{ACCOUNT_SID}@{host}")

    with pytest.raises(VoiceRefused):
        sender.fetch_voice(voice(url), CAP)

    assert twilio.media_seen == [] and cdn.seen == []


def test_without_an_api_url_only_twilios_own_https_host_is_ours() -> None:
    media = TwilioMedia(ACCOUNT_SID, AUTH_TOKEN)
    path = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1"
    assert media.is_ours(f"https://api.twilio.com{path}")
    assert media.is_ours(f"https://API.twilio.com:443{path}")
    assert not media.is_ours(f"http://api.twilio.com{path}")
    assert not media.is_ours(f"https://api.twilio.com:8443{path}")
    assert not media.is_ours(f"https://api.twilio.com.evil.example{path}")


def test_a_redirect_loop_is_refused(
    sender: TwilioSender, twilio: TwilioServer, cdn: MediaCDN
) -> None:
    url = twilio.add_media(b"", location=cdn.loop())

    with pytest.raises(VoiceRefused, match="loop"):
        sender.fetch_voice(voice(url), CAP)

    assert len(twilio.media_seen) == 1 and len(cdn.seen) == 2


def test_a_redirect_to_a_malformed_address_is_refused(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    url = twilio.add_media(b"", location="https://[::1")

    with pytest.raises(VoiceRefused, match="malformed"):
        sender.fetch_voice(voice(url), CAP)


def test_a_redirect_back_to_the_media_url_is_a_loop(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    url = twilio.add_media(b"", location="placeholder")
    twilio.stored[url.removeprefix(twilio.origin)] = url

    with pytest.raises(VoiceRefused, match="loop"):
        sender.fetch_voice(voice(url), CAP)


def test_too_many_redirects_are_refused(
    sender: TwilioSender, twilio: TwilioServer, cdn: MediaCDN
) -> None:
    last = cdn.add(Item(OGG))
    middle = cdn.add(Item(status=302, location=last))
    first = cdn.add(Item(status=301, location=middle))
    url = twilio.add_media(b"", location=first)

    with pytest.raises(VoiceRefused, match="redirected more than"):
        sender.fetch_voice(voice(url), CAP)

    # Twilio's hop and two of the CDN's: the third redirect is not followed.
    assert [cdn.origin + s.path for s in cdn.seen] == [first, middle]


def test_a_content_length_over_the_cap_is_refused_before_reading(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    url = twilio.add_media(OGG)

    with pytest.raises(VoiceTooLarge):
        sender.fetch_voice(voice(url), len(OGG) - 1)


def test_a_body_without_a_length_is_cut_off_past_the_cap(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    url = twilio.add_media(b"\0" * 500_000, unsized=True)

    with pytest.raises(VoiceTooLarge, match="runs past"):
        sender.fetch_voice(voice(url), 100_000)

    small = twilio.add_media(OGG, unsized=True)
    assert sender.fetch_voice(voice(small), CAP).data == OGG


def test_a_lying_content_length_brings_no_more_than_it_told(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    """A Content-Length under the cap over a longer body: requests reads what it told, so
    nothing past the cap is read either way."""
    url = twilio.add_media(OGG * 4, unsized=True, headers={"Content-Length": str(len(OGG))})

    audio = sender.fetch_voice(voice(url), len(OGG) + 10)

    assert len(audio.data) <= len(OGG) + 10


@pytest.mark.parametrize("head", [False, True], ids=["body", "headers"])
def test_a_trickling_cdn_is_cut_off_at_the_deadline(
    twilio: TwilioServer, cdn: MediaCDN, head: bool
) -> None:
    """Twilio's redirect leads to a CDN that sends a byte every 50 ms, each read far inside
    the per-read timeout: without an overall deadline the fetch would take its 20 s."""
    trickle = Trickle(OGG[:400], every=0.05, head=head, content_type="audio/ogg")
    url = twilio.add_media(b"", location=cdn.add(Item(trickle=trickle)))
    sender = TwilioSender(
        ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url, media_deadline=0.5
    )

    with pytest.raises(VoiceUnavailable, match="deadline"):
        sender.fetch_voice(voice(url), CAP)

    assert trickle.hung_up.wait(10) and not trickle.done.is_set()
    assert trickle.sent < 400 and len(cdn.seen) == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_cdn_outage_is_worth_another_try(
    sender: TwilioSender, twilio: TwilioServer, status: int
) -> None:
    url = twilio.add_media(b"oops", "text/plain", status=status)

    with pytest.raises(VoiceUnavailable):
        sender.fetch_voice(voice(url), CAP)


@pytest.mark.parametrize("status", [403, 410])
def test_media_the_cdn_refuses_is_refused(
    sender: TwilioSender, twilio: TwilioServer, status: int
) -> None:
    url = twilio.add_media(b"no", "text/plain", status=status)

    with pytest.raises(VoiceRefused):
        sender.fetch_voice(voice(url), CAP)


def test_wrong_credentials_are_refused_and_unknown_media_tried_again(twilio: TwilioServer) -> None:
    wrong = TwilioSender(ACCOUNT_SID, "not-the-token", NUMBER, api_url=twilio.base_url)
    with pytest.raises(VoiceRefused, match="401"):
        wrong.fetch_voice(voice(twilio.add_media(OGG)), CAP)
    right = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url)
    unknown = f"{twilio.origin}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1"
    # Not there (yet): Twilio's media can answer 404 just after the webhook, so it is tried
    # again later from the inbox.
    with pytest.raises(VoiceUnavailable, match="404"):
        right.fetch_voice(voice(unknown), CAP)


def test_an_unreachable_twilio_is_worth_another_try() -> None:
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url="http://127.0.0.1:9")
    url = f"http://127.0.0.1:9/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1"

    with pytest.raises(VoiceUnavailable):
        sender.fetch_voice(voice(url), CAP)


@pytest.mark.parametrize(
    ("content_type", "name"),
    [
        ("audio/ogg", "voice.ogg"),
        ("audio/ogg; codecs=opus", "voice.ogg"),
        ("audio/mpeg", "voice.mp3"),
        ("audio/amr", "voice.amr"),
        ("audio/mp4", "voice.m4a"),
        ("audio/aac", "voice.aac"),
        ("audio/x-unknown", "voice"),
        (None, "voice"),
    ],
)
def test_the_audio_is_named_for_its_type(content_type: str | None, name: str) -> None:
    assert file_name(content_type) == name


def test_fetching_logs_no_url_and_no_credential(
    sender: TwilioSender,
    twilio: TwilioServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under the services' own logging: httpx names every URL at INFO, quieted there."""
    monkeypatch.setattr(logging, "basicConfig", lambda **_: None)  # keep pytest's handlers
    levels = {name: logging.getLogger(name).level for name in QUIET}
    url = twilio.add_media(OGG)
    try:
        service_logging(Settings())
        with caplog.at_level(logging.INFO):
            sender.fetch_voice(voice(url), CAP)
            with pytest.raises(VoiceTooLarge):
                sender.fetch_voice(voice(url), 10)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    logged = caplog.text
    assert AUTH_TOKEN not in logged and "Signature=" not in logged and "/Media/" not in logged


def test_a_spoken_reply_goes_as_media_without_a_body(
    sender: TwilioSender, twilio: TwilioServer
) -> None:
    sent = sender.send_voice(LEARNER, OGG, AUDIO_URL, idempotency_key="k")

    (message,) = twilio.messages
    assert message["MediaUrl"] == AUDIO_URL and message["To"] == LEARNER
    assert "Body" not in message
    assert sent.platform_id


def test_without_a_public_url_a_spoken_reply_is_not_sent_and_says_what_to_set(
    sender: TwilioSender, twilio: TwilioServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(PermanentSendError):
        sender.send_voice(LEARNER, OGG, None, idempotency_key="k")

    assert twilio.messages == []
    assert any("PAM_PUBLIC_URL" in r.getMessage() for r in caplog.records)


def test_the_api_callback_carries_the_audio_url(caplog: pytest.LogCaptureFixture) -> None:
    with CallbackServer() as callback:
        api = ApiCallbackSender(callback.url, API_TOKEN)
        try:
            assert isinstance(api, VoiceSender)
            api.send_voice("lena", OGG, AUDIO_URL, idempotency_key="pam-7")
            with caplog.at_level(logging.WARNING), pytest.raises(PermanentSendError):
                api.send_voice("lena", OGG, None, idempotency_key="pam-8")
        finally:
            api.close()
        (posted,) = (json.loads(r.body) for r in callback.received)
    assert posted == {"id": "pam-7", "user": "lena", "audio_url": AUDIO_URL}
    assert any("PAM_PUBLIC_URL" in r.getMessage() for r in caplog.records)
