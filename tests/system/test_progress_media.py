"""/progress through the Procfile's processes: real `gunicorn` (web) and `pam worker`
subprocesses against the fake Telegram and Twilio servers. On Telegram the chart arrives as an
uploaded photo; on WhatsApp Twilio is given a media URL under PAM_PUBLIC_URL, which the web
process serves to an unauthenticated GET, while a tampered link is refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import requests

from loopback.harness import (
    wait_for,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TelegramServer
from loopback.twilio_server import TwilioServer, sign
from tests.helpers.channels import channel_services
from tests.support import HANG_SECONDS, forged
from tests.webhooks.telegram import updates
from tests.webhooks.whatsapp.conftest import text_form

pytestmark = pytest.mark.slow

SECRET = "pam-progress-webhook-secret"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WAIT = HANG_SECONDS  # each wait ends on its event; the bound is a hang guard


def test_progress_is_a_telegram_photo_and_a_whatsapp_media_link_the_web_serves(
    tmp_path: Path, llm: OpenAIServer, database: str
) -> None:
    with (
        TelegramServer() as telegram,
        TwilioServer() as twilio,
        channel_services(tmp_path, database, llm, telegram, twilio, SECRET) as running,
    ):
        base, group = running.base, running.group

        # Telegram: the learner's /progress through the webhook comes back as a photo.
        lena = updates.learner("Lena")
        posted = requests.post(
            f"{base}/telegram/webhook",
            json=updates.command(lena, "/progress"),
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            timeout=10,
        )
        assert posted.status_code == 200, posted.text
        wait_for(lambda: bool(telegram.of("sendPhoto")), WAIT, "the chart on Telegram")
        (photo,) = telegram.of("sendPhoto")
        assert str(photo.params["chat_id"]) == str(lena["id"])
        assert photo.params["photo"].startswith(PNG_SIGNATURE)
        assert photo.params["caption"].startswith("Nothing to show yet")

        # WhatsApp: Twilio gets a media URL under PAM_PUBLIC_URL.
        form = text_form("34" + str(uuid.uuid4().int)[:10], "/progress")
        url = f"{base}/whatsapp/webhook"
        posted = requests.post(
            url, data=form, headers={"X-Twilio-Signature": sign(url, form)}, timeout=10
        )
        assert posted.status_code == 200, posted.text
        wait_for(lambda: bool(twilio.media()), WAIT, "the chart's media on WhatsApp")
        (link,) = twilio.media()
        assert link.startswith(f"{base}/charts/") and link.endswith(".png")

        # Twilio fetches it without any credential; a tampered link gets nothing.
        served = requests.get(link, timeout=10)
        assert served.status_code == 200
        assert served.headers["Content-Type"] == "image/png"
        assert served.headers["Referrer-Policy"] == "no-referrer"
        assert served.content.startswith(PNG_SIGNATURE)
        token = link.removeprefix(f"{base}/charts/").removesuffix(".png")
        refused = requests.get(f"{base}/charts/{forged(token)}.png", timeout=10)
        assert refused.status_code == 403
        assert not refused.content.startswith(PNG_SIGNATURE)
        group.assert_alive()
