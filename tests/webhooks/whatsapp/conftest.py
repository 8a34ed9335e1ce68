"""WhatsApp fixtures: a counting fake Twilio server, Twilio settings (the web app of
tests/webhooks/conftest.py is built with them), a Worker delivering through the real
TwilioSender, and Twilio's forms, signed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer, sign
from webhooks.settings import Settings
from webhooks.whatsapp.signature import SIGNATURE_HEADER
from webhooks.wiring import senders

WEBHOOK = "/whatsapp/webhook"
STATUS = "/whatsapp/status"
LOCAL = "http://localhost"  # where Flask's test client sends requests by default


class CountingTwilioServer(TwilioServer):
    """The fake Twilio server, also recording every request, the refused ones included."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, str]] = []

    def handle(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append(form)
        return super().handle(path, form)

    def calls(self) -> int:
        """How many times the Twilio client called, whatever the answer."""
        with self.lock:
            return len(self.requests)


@pytest.fixture
def twilio_server() -> Iterator[CountingTwilioServer]:
    """A fake Twilio REST API on 127.0.0.1 receiving the real twilio client's calls."""
    server = CountingTwilioServer()
    with server:
        yield server


def with_twilio(settings: Settings, server: TwilioServer, **knobs: object) -> Settings:
    """`settings` with WhatsApp through Twilio configured against `server`."""
    twilio = {
        "account_sid": ACCOUNT_SID,
        "auth_token": AUTH_TOKEN,
        "number": NUMBER,
        "api_url": server.base_url,
    }
    return settings.replace(whatsapp=twilio).replace(**knobs)


@pytest.fixture
def whatsapp_settings(settings: Settings, twilio_server: CountingTwilioServer) -> Settings:
    """The test settings with the WhatsApp channel configured against the fake server."""
    return with_twilio(settings, twilio_server)


@pytest.fixture
def app_settings(whatsapp_settings: Settings) -> Settings:
    """The web app of these tests has WhatsApp configured."""
    return whatsapp_settings


@pytest.fixture
def worker(pam: Pam, whatsapp_settings: Settings) -> Worker:
    """A worker delivering WhatsApp replies through the real TwilioSender; call .drain()."""
    return Worker(pam, senders(whatsapp_settings))


# -- Twilio's forms -------------------------------------------------------------------------


def new_wa_id(country: str = "1") -> str:
    """A WhatsApp id (the learner's number without "+") no other test uses, in `country`
    (a calling code: the learner's native language is guessed from it; +1's is English,
    where the tests read Pam's own words in English)."""
    return country + str(uuid.uuid4().int)[:10]


def new_sid(prefix: str = "SM") -> str:
    """A Twilio-style 34-character sid."""
    return prefix + uuid.uuid4().hex


def text_form(wa_id: str, body: str, profile_name: str = "Lucía", sid: str = "") -> dict[str, str]:
    """The form Twilio posts for a WhatsApp text message from `wa_id` to NUMBER."""
    sid = sid or new_sid()
    return {
        "SmsMessageSid": sid,
        "NumMedia": "0",
        "ProfileName": profile_name,
        "MessageType": "text",
        "SmsSid": sid,
        "WaId": wa_id,
        "SmsStatus": "received",
        "Body": body,
        "To": NUMBER,
        "NumSegments": "1",
        "ReferralNumMedia": "0",
        "MessageSid": sid,
        "AccountSid": ACCOUNT_SID,
        "From": f"whatsapp:+{wa_id}",
        "ApiVersion": "2010-04-01",
    }


def media_form(wa_id: str, content_type: str, message_type: str, body: str = "") -> dict[str, str]:
    """The form for one media item (a voice note, image, document or sticker)."""
    sid = new_sid("MM")
    form = text_form(wa_id, body, sid=sid)
    form.update(
        NumMedia="1",
        MessageType=message_type,
        MediaContentType0=content_type,
        MediaUrl0=(
            f"https://api.twilio.com/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}"
            f"/Media/{new_sid('ME')}"
        ),
    )
    return form


def location_form(wa_id: str) -> dict[str, str]:
    """The form for a shared location: no body, no media, coordinates instead."""
    form = text_form(wa_id, "")
    form.update(
        MessageType="location",
        Latitude="40.4167754",
        Longitude="-3.7037902",
        Address="Puerta del Sol, Madrid",
        Label="Puerta del Sol",
    )
    return form


def status_form(message_sid: str, to: str, status: str, error_code: str = "") -> dict[str, str]:
    """The form of Twilio's status callback for an outbound WhatsApp message."""
    form = {
        "ChannelPrefix": "whatsapp",
        "ApiVersion": "2010-04-01",
        "MessageStatus": status,
        "SmsSid": message_sid,
        "SmsStatus": status,
        "ChannelToAddress": "+" + to.removeprefix("whatsapp:+"),
        "To": to,
        "From": NUMBER,
        "MessageSid": message_sid,
        "StructuredMessage": "false",
        "AccountSid": ACCOUNT_SID,
    }
    if error_code:
        form.update(ErrorCode=error_code, ChannelStatusMessage="Message failed to send")
    return form


def post_form(
    client: FlaskClient,
    form: Mapping[str, str],
    *,
    path: str = WEBHOOK,
    signature: str | None = None,
    signed_url: str | None = None,
    headers: Mapping[str, str] | None = None,
    base_url: str = LOCAL,
) -> TestResponse:
    """POST `form` to `path` as Twilio does. Signed over `signed_url` (default: the URL the
    request goes to) unless `signature` is given; `signature=""` sends no signature."""
    if signature is None:
        signature = sign(signed_url or base_url + path, form)
    sent = dict(headers or {})
    if signature:
        sent[SIGNATURE_HEADER] = signature
    return client.post(path, data=dict(form), headers=sent, base_url=base_url)
