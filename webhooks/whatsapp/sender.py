"""WhatsApp replies through Twilio's REST API (buttons as quick replies from the Content API:
webhooks/whatsapp/buttons.py; a /progress chart or a spoken reply as media Twilio fetches from
its signed link), with Twilio's errors mapped onto Pam's transient/permanent send errors; and
the download of learners' voice notes (webhooks/whatsapp/media.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from bot.channels import Audio, Button, PermanentSendError, TransientSendError
from bot.worker.splitting import utf16_length
from memory.messages import Sent, VoiceNote
from webhooks.whatsapp.buttons import (
    MAX_BODY_CHARS,
    MAX_LISTED,
    QuickReplies,
    actions,
    variables,
)
from webhooks.whatsapp.media import TwilioMedia

log = logging.getLogger(__name__)

# Twilio error codes that no retry can fix: unsubscribed or blocked recipient, invalid or
# non-WhatsApp number, outside the 24-hour session window, sender not enabled.
PERMANENT_CODES = {21211, 21408, 21610, 21612, 21614, 63003, 63016, 63018, 63024, 63032}
# Connections to Twilio kept open for reuse: one for each lane that may send at once, above
# PAM_WORKER_THREADS' limit (512) and the delivery lanes'.
KEPT_CONNECTIONS = 600


class TwilioSender:
    """Sends WhatsApp replies through Twilio's REST API, from TWILIO_WHATSAPP_NUMBER (the
    worker's `Sender`, `ButtonSender`, `ChartSender`, `VoiceSender` and `TemplateSender`), and
    fetches voice notes' audio (`VoiceFetcher`)."""

    max_chars = 1600  # Twilio's limit for one WhatsApp message body
    voice_by_link = True  # Twilio fetches a spoken reply from its MediaUrl

    @staticmethod
    def length(text: str) -> int:
        """Twilio counts emoji and other astral characters double (UTF-16 code units)."""
        return utf16_length(text)

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        from_number: str,
        api_url: str | None = None,
        status_callback: str | None = None,
        timeout: float = 15.0,
        media_deadline: float = 30.0,
        checkin_template_sid: str | None = None,
    ) -> None:
        from requests.adapters import HTTPAdapter
        from twilio.http.http_client import TwilioHttpClient
        from twilio.rest import Client

        http = TwilioHttpClient(timeout=timeout)
        assert http.session is not None  # pool_connections: one session, its pool kept
        # Every lane of a worker may send at once: requests keeps 10 connections per host by
        # default (twilio's https adapter 4 more than the CPUs, at most 32) and closes each
        # one past that after its request, so lanes beyond them paid a new connection (a TLS
        # handshake) every send.
        pool = HTTPAdapter(pool_maxsize=KEPT_CONNECTIONS)
        http.session.mount("https://", pool)
        http.session.mount("http://", pool)  # TWILIO_API_URL: a local test server
        self.client = Client(account_sid, auth_token, http_client=http)
        if api_url:
            self.client.api.base_url = api_url.rstrip("/")
            self.client.content.base_url = api_url.rstrip("/")
        number = from_number.strip()
        self.from_number = number if number.startswith("whatsapp:") else f"whatsapp:{number}"
        self.status_callback = status_callback
        self.media = TwilioMedia(account_sid, auth_token, api_url, timeout, media_deadline)
        self.quick_replies = QuickReplies(self._create_content, self._listed_contents)
        # The operator's approved template for check-ins outside the 24-hour window.
        self.checkin_template_sid = checkin_template_sid

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send one WhatsApp message; raise TransientSendError or PermanentSendError."""
        return self._create(chat_id, body=text)

    def send_buttons(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, idempotency_key: str
    ) -> Sent:
        """Send `text` with `buttons` as WhatsApp quick replies (the first three): the button
        set's content template (made once) with the text as its variable. Plain text where
        that cannot be: no button fits, the text is over a quick reply's 1,024 characters, or
        the template could not be made. Raises TransientSendError or PermanentSendError."""
        chosen = actions(buttons)
        if not chosen or self.length(text) > MAX_BODY_CHARS:
            return self._create(chat_id, body=text)
        try:
            sid = self.quick_replies.sid(chosen)
        except Exception as exc:  # the Content API failed: the text goes without buttons
            log.warning("whatsapp buttons left out: no content template (%s)", _failure(exc))
            return self._create(chat_id, body=text)
        filled = json.dumps(variables(text, chosen), ensure_ascii=False)
        return self._create(chat_id, content_sid=sid, content_variables=filled)

    def send_template(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """Send a check-in outside the 24-hour window: the operator's approved content template
        (PAM_CHECKIN_WHATSAPP_TEMPLATE_SID), the check-in's text as its variable {{1}}. Without
        one, PermanentSendError: WhatsApp takes no free-form message there."""
        if not self.checkin_template_sid:
            raise PermanentSendError("no check-in template (PAM_CHECKIN_WHATSAPP_TEMPLATE_SID)")
        # Meta refuses a template variable with a line break, a tab or more than four spaces in
        # a row: the check-in's words, on one line.
        flat = " ".join(text.split())
        filled = json.dumps({"1": flat[:MAX_BODY_CHARS]}, ensure_ascii=False)
        return self._create(
            chat_id, content_sid=self.checkin_template_sid, content_variables=filled
        )

    def _create_content(self, request: dict[str, Any]) -> str:
        """Create a content template through the Content API; its sid (HX…)."""
        from twilio.rest.content.v1.content import ContentList

        content = self.client.content.v1.contents.create(ContentList.ContentCreateRequest(request))
        if not content.sid:
            raise ValueError("the Content API answered without a sid")
        return str(content.sid)

    def _listed_contents(self) -> list[tuple[str, str]]:
        """The account's content templates, (friendly name, sid) each, at most MAX_LISTED."""
        contents = self.client.content.v1.contents.list(limit=MAX_LISTED)
        return [(str(c.friendly_name or ""), str(c.sid)) for c in contents if c.sid]

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """Send a /progress chart as media: Twilio fetches it from its signed `url` under
        PAM_PUBLIC_URL. Without one, the caption goes alone."""
        if url is None:
            log.warning(
                "a /progress chart went to WhatsApp as text alone: set PAM_PUBLIC_URL (the web "
                "app's public address) so that Twilio can fetch the image"
            )
            return self._create(chat_id, body=caption)
        return self._create(chat_id, body=caption, media_url=[url])

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        """Send a spoken reply as media, no body: Twilio fetches the audio from its signed
        `url` under PAM_PUBLIC_URL. Without one there is nothing to send (the text reply
        went already): PermanentSendError."""
        if url is None:
            log.warning(
                "a spoken reply was not sent to WhatsApp: set PAM_PUBLIC_URL (the web app's "
                "public address) so that Twilio can fetch the audio"
            )
            raise PermanentSendError("no public address for Twilio to fetch the audio from")
        return self._create(chat_id, media_url=[url])

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        """The audio of `note` (its `ref` is Twilio's media URL), at most `max_bytes` long.
        Raises VoiceTooLarge, VoiceUnavailable or VoiceRefused (see TwilioMedia.fetch)."""
        return self.media.fetch(note.ref, note.content_type, max_bytes)

    def _create(self, chat_id: str, **fields: Any) -> Sent:
        """One message through Twilio with `fields` (body, media); Twilio's errors mapped."""
        from twilio.base.exceptions import TwilioException, TwilioRestException

        extra = {"status_callback": self.status_callback} if self.status_callback else {}
        try:
            message = self.client.messages.create(
                from_=self.from_number, to=chat_id, **fields, **extra
            )
        except TwilioRestException as exc:
            if exc.status == 429 or exc.status >= 500:
                raise TransientSendError(f"twilio answered {exc.status} ({exc.code})") from exc
            if exc.code in PERMANENT_CODES or 400 <= exc.status < 500:
                raise PermanentSendError(f"twilio refused: {exc.status} ({exc.code})") from exc
            raise TransientSendError(f"twilio error {exc.status} ({exc.code})") from exc
        except (TwilioException, OSError) as exc:  # connection errors, timeouts
            raise TransientSendError(f"twilio unreachable: {type(exc).__name__}") from exc
        return Sent(platform_id=message.sid)


def _failure(exc: Exception) -> str:
    """What went wrong, for the log: Twilio's status and code, or the error's type (never a
    message that might carry the reply's text)."""
    from twilio.base.exceptions import TwilioRestException

    if isinstance(exc, TwilioRestException):
        return f"twilio answered {exc.status} ({exc.code})"
    return type(exc).__name__
