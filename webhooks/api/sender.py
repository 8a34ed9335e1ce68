"""Replies of the API channel, POSTed as JSON to the operator's callback URL, signed, with the
callback's answers mapped onto Pam's transient/permanent send errors. Charts and spoken replies
go as links (`image_url`, `audio_url`) under PAM_PUBLIC_URL; a reply's buttons as data
(`buttons`: each a label and the command to send back as the user's message)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import requests

from bot.channels import Button, PermanentSendError, TransientSendError
from memory.messages import Sent
from webhooks.api.payload import recipient
from webhooks.api.signing import signature, webhook_signature

log = logging.getLogger(__name__)


class ApiCallbackSender:
    """Delivers replies of the API channel to the operator's callback URL."""

    max_chars = 20000  # the callback takes whole replies; the same cap as inbound text
    voice_by_link = True  # a spoken reply is an `audio_url`
    repeat_confirms = True  # a program sends /forget again to confirm (bot.channels)

    @staticmethod
    def length(text: str) -> int:
        """Characters."""
        return len(text)

    def __init__(
        self,
        url: str,
        token: str,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.clock = clock
        self.session = requests.Session()

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """POST the reply, signed; raise TransientSendError or PermanentSendError."""
        return self._post(chat_id, {"text": text}, idempotency_key)

    def send_buttons(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, idempotency_key: str
    ) -> Sent:
        """POST the reply with its buttons as data, `buttons`: [{"label", "command"}, ...];
        the operator's client shows them as it likes, and a tap is the command sent back as
        the user's message."""
        shown = [{"label": b.label, "command": b.command} for b in buttons]
        return self._post(chat_id, {"text": text, "buttons": shown}, idempotency_key)

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        """POST a /progress chart's caption with the chart's signed link as `image_url`
        (without PAM_PUBLIC_URL, the caption alone)."""
        fields = {"text": caption} | ({"image_url": url} if url is not None else {})
        return self._post(chat_id, fields, idempotency_key)

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        """POST a spoken reply as its signed link, `audio_url` (the text reply went in a
        callback of its own). Without PAM_PUBLIC_URL there is no link, so nothing to send:
        PermanentSendError."""
        if url is None:
            log.warning(
                "a spoken reply was not sent to the API's callback: set PAM_PUBLIC_URL (the "
                "web app's public address) so that the callback gets a link to the audio"
            )
            raise PermanentSendError("no public address for the audio's link")
        return self._post(chat_id, {"audio_url": url}, idempotency_key)

    def _post(self, chat_id: str, fields: dict[str, Any], idempotency_key: str) -> Sent:
        """POST the reply's `fields` to the callback, signed; Pam's send errors on failure."""
        user, request_id = recipient(chat_id)
        reply: dict[str, str] = {"id": idempotency_key}
        if request_id is not None:
            reply["in_reply_to"] = request_id
        body = json.dumps({**reply, "user": user, **fields}, ensure_ascii=False).encode()
        # Each attempt is signed anew: the timestamp is when it was sent, so a receiver that
        # rejects old timestamps rejects replays, and the id lets it drop a retry it has seen.
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "webhook-id": idempotency_key,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": webhook_signature(
                self.token.encode(), idempotency_key, timestamp, body
            ),
            "X-Pam-Signature": signature(self.token, body),
            "Idempotency-Key": idempotency_key,
        }
        try:
            response = self.session.post(self.url, data=body, headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise TransientSendError(f"callback unreachable: {type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            retry_after = response.headers.get("Retry-After")
            raise TransientSendError(
                f"callback answered {response.status_code}",
                retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
            )
        if response.status_code >= 400:
            raise PermanentSendError(f"callback refused the reply: {response.status_code}")
        return Sent(platform_id=None)

    def close(self) -> None:
        """Close the pooled connections."""
        self.session.close()
