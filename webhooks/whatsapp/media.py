"""Downloading a WhatsApp voice note from Twilio: the media URL of the webhook's form is fetched
with the account's credentials only when it is Twilio's own (api.twilio.com over https, or the
TWILIO_API_URL tests set, under this account's path); Twilio's redirect to its media CDN is
followed without them. The body is streamed and stopped at the cap, and the whole (every hop)
at PAM_MEDIA_DEADLINE (`webhooks.deadline`): httpx, as for Telegram's files, since a
per-read timeout alone lets a trickling server hold the lane.

The URL came in a form anyone could post were the signature check ever off, so it is checked
before any request: the account's token must never go to a host an attacker names."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

import httpx

from bot.channels import Audio, VoiceRefused, VoiceTooLarge, VoiceUnavailable
from webhooks import deadline

log = logging.getLogger(__name__)

TWILIO_API = "https://api.twilio.com"
REDIRECTS = (301, 302, 303, 307, 308)
MAX_HOPS = 3  # Twilio's media URL, its CDN, and one more redirect at most
CONNECT_TIMEOUT_SECONDS = 5.0
CHUNK_BYTES = 64 * 1024

_NAMES = {
    "audio/ogg": "voice.ogg",
    "audio/mpeg": "voice.mp3",
    "audio/amr": "voice.amr",
    "audio/mp4": "voice.m4a",
    "audio/aac": "voice.aac",
}


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    """Scheme, host and port of a URL, the port spelled out where the scheme implies it."""
    default = {"https": 443, "http": 80}.get(parts.scheme.lower())
    try:
        port = parts.port or default
    except ValueError:  # a port that is no number
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


@dataclass(frozen=True)
class TwilioMedia:
    """Where this account's media may be fetched from with its credentials: the API's origin
    (`api_url`, TWILIO_API_URL, or Twilio's own) and the account's path under it."""

    account_sid: str
    auth_token: str
    api_url: str | None = None
    timeout: float = 15.0
    media_deadline: float = 30.0  # seconds for the whole fetch, every hop

    def fetch(self, url: str, content_type: str | None, max_bytes: int) -> Audio:
        """The media at Twilio's `url`, at most `max_bytes` long. Raises VoiceRefused (a URL
        that is not this account's on Twilio's API, made no request; a redirect loop; 4xx),
        VoiceTooLarge or VoiceUnavailable (5xx, 429, timeouts, connection errors, the
        deadline passed)."""
        if not self.is_ours(url):
            raise VoiceRefused("the media URL is not on Twilio's API for this account")
        seen = {url}
        auth: httpx.Auth | None = httpx.BasicAuth(self.account_sid, self.auth_token)
        with deadline.deadline(self.media_deadline) as within, self._client() as client:
            for _ in range(MAX_HOPS):
                with self._get(client, within, url, auth) as response:
                    if response.status_code not in REDIRECTS:
                        served = response.headers.get("Content-Type")
                        data = _capped_body(response, max_bytes, within)
                        kind = _bare(served) or _bare(content_type)
                        return Audio(data=data, content_type=kind, name=file_name(content_type))
                    location = response.headers.get("Location")
                if not location:
                    raise VoiceRefused(f"twilio redirected ({response.status_code}) to nowhere")
                url = self._next_hop(url, location)
                if url in seen:
                    raise VoiceRefused("twilio's media redirects loop")
                seen.add(url)
                # The CDN's link is signed: the account's credentials stay with Twilio's API.
                auth = None
        raise VoiceRefused(f"twilio's media redirected more than {MAX_HOPS - 1} times")

    def is_ours(self, url: str) -> bool:
        """Whether `url` is a resource of this account on Twilio's API (the origin and the
        /2010-04-01/Accounts/<sid>/ path), the only place the credentials may go."""
        parts, api = urlsplit(url), urlsplit(self.api_url or TWILIO_API)
        if parts.username is not None or parts.password is not None:
            return False
        if _origin(parts) != _origin(api) or _origin(parts)[2] is None:
            return False
        path = unquote(parts.path)
        # Dot segments or a backslash could climb out of the account's path on the way.
        if "\\" in path or any(seg in (".", "..") for seg in path.split("/")):
            return False
        return path.startswith(f"/2010-04-01/Accounts/{self.account_sid}/")

    @staticmethod
    def _next_hop(url: str, location: str) -> str:
        """The redirect's target (a relative Location resolved); only http(s), and never from
        https down to plain http."""
        try:
            target = urljoin(url, location)
            scheme = urlsplit(target).scheme.lower()
        except ValueError as exc:  # "https://[::1": no URL at all
            raise VoiceRefused("twilio redirected to a malformed address") from exc
        if scheme not in ("http", "https") or (
            urlsplit(url).scheme.lower() == "https" and scheme != "https"
        ):
            raise VoiceRefused("twilio redirected the media off https")
        return target

    def _client(self) -> httpx.Client:
        """A client for one fetch: its hops' sockets keep the deadline (`DeadlineTransport`),
        it follows no redirect itself, and reads no credentials from a ~/.netrc."""
        return httpx.Client(
            timeout=httpx.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT_SECONDS, self.timeout)),
            follow_redirects=False,
            transport=deadline.DeadlineTransport(),
            event_hooks={"response": [_readable_location]},
        )

    @contextmanager
    def _get(
        self,
        client: httpx.Client,
        within: deadline.Deadline,
        url: str,
        auth: httpx.Auth | None,
    ) -> Iterator[httpx.Response]:
        """One streamed GET, no cookies kept from an earlier hop, the errors mapped."""
        client.cookies.clear()
        try:
            response = client.send(client.build_request("GET", url), auth=auth, stream=True)
        except httpx.HTTPError as exc:  # timeouts, connection errors
            raise _unreachable(exc, within) from exc
        except httpx.InvalidURL as exc:
            raise VoiceRefused("the media URL is malformed") from exc
        try:
            _check_status(response.status_code)
            yield response
        finally:
            response.close()


def _readable_location(response: httpx.Response) -> None:
    """Refuse a redirect to a malformed address (httpx would read it as its own protocol
    error, which reads like an outage)."""
    location = response.headers.get("Location")
    if response.status_code in REDIRECTS and location:
        try:
            httpx.URL(location)
        except httpx.InvalidURL as exc:
            raise VoiceRefused("twilio redirected to a malformed address") from exc


def _unreachable(exc: httpx.HTTPError, within: deadline.Deadline) -> VoiceUnavailable:
    if within.passed():
        return VoiceUnavailable(f"twilio's media passed its {within.seconds:g} s deadline")
    return VoiceUnavailable(f"twilio's media unreachable: {type(exc).__name__}")


def _check_status(status: int) -> None:
    """Raise the voice error an error status means (redirects pass: they are followed)."""
    # Twilio's media can answer 404 for a moment after the webhook arrives (its support
    # article "Media URL returns 404"): tried again from the inbox, then apologised for.
    if status in (404, 429) or status >= 500:
        raise VoiceUnavailable(f"twilio's media answered {status}")
    if status >= 400:  # 401/403: not this account's; 410: gone
        raise VoiceRefused(f"twilio's media answered {status}")


def _capped_body(response: httpx.Response, max_bytes: int, within: deadline.Deadline) -> bytes:
    """The body, read only while it stays within `max_bytes` (a Content-Length over it is
    refused unread; a body that runs past it, told or not, is cut off)."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise VoiceTooLarge(f"the media is {length} bytes, over {max_bytes}")
    data = bytearray()
    try:
        for chunk in response.iter_bytes(CHUNK_BYTES):
            deadline.check()
            data += chunk
            if len(data) > max_bytes:
                raise VoiceTooLarge(f"the media runs past {max_bytes} bytes")
    except httpx.HTTPError as exc:
        if within.passed():
            raise _unreachable(exc, within) from exc
        raise VoiceUnavailable(f"twilio's media broke off: {type(exc).__name__}") from exc
    return bytes(data)


def _bare(content_type: str | None) -> str | None:
    """A content type without its parameters ("audio/ogg; codecs=opus" → "audio/ogg")."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind or None


def file_name(content_type: str | None) -> str:
    """A file name whose extension says the format, for the transcription request."""
    return _NAMES.get(_bare(content_type) or "", "voice")
