"""GET /charts/<token>.png and GET /voice/<token>.ogg: a /progress chart or a spoken reply,
served to whoever holds its signed link — the link is the credential (Twilio fetches WhatsApp
media without any of Pam's secrets). A link names one chart or clip by id and nonce, signed
with itsdangerous (a salt of each kind's own: a chart's link names no clip) and expiring after
PAM_CHART_LINK_SECONDS: a tampered or malformed link gets 403, an expired one 403 with a word
on what to do, one whose chart or clip is gone (pruned, or its learner forgotten) 404."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Response, current_app
from itsdangerous import BadData, SignatureExpired, TimestampSigner, URLSafeTimedSerializer

from bot.settings import ChartSettings
from memory.clock import Clock, utcnow
from memory.store.charts import Charts
from memory.store.voice_clips import VoiceClips

log = logging.getLogger(__name__)

SALT = "pam-chart"
VOICE_SALT = "pam-voice"
EXTENSION = "pam_chart_links"  # where the app keeps its SignedLinks
EXPIRED = "This chart link has expired. Send /progress for a fresh chart.\n"
INVALID = "This link is not valid.\n"
GONE = "This chart is no longer available.\n"
VOICE_EXPIRED = "This voice message's link has expired.\n"
VOICE_GONE = "This voice message is no longer available.\n"
# No page a chart is opened from learns its address, no browser guesses another type for it.
HEADERS = {"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}

blueprint = Blueprint("charts", __name__)


class ClockedSigner(TimestampSigner):
    """itsdangerous' timestamp signer on Pam's clock, so tests move time instead of sleeping."""

    def __init__(self, *args: Any, clock: Clock = utcnow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def get_timestamp(self) -> int:
        """Now, in seconds since the epoch, by the clock."""
        return int(self.clock().timestamp())


class SignedLinks:
    """Signed links to charts and spoken replies: made for delivery (`url`, `voice_url`: a
    `bot.channels.MediaLinks`), read by the routes (`read`). The key is PAM_LINK_SECRET, else
    the one kept in the database, read on first use (the web process may start before the
    database answers)."""

    def __init__(
        self,
        charts: Charts,
        settings: ChartSettings,
        public_url: str | None,
        clock: Clock = utcnow,
        clips: VoiceClips | None = None,
    ) -> None:
        self.charts = charts
        self.clips = clips or VoiceClips(charts.engine, clock)
        self.settings = settings
        self.public_url = public_url.rstrip("/") if public_url else None
        self.clock = clock
        self._serializers: dict[str, URLSafeTimedSerializer] = {}
        self._lock = threading.Lock()

    @property
    def public(self) -> bool:
        """Whether links can be made at all (PAM_PUBLIC_URL is set)."""
        return self.public_url is not None

    @property
    def seconds(self) -> int:
        """How long a link works after it was made."""
        return self.settings.chart_link_seconds

    def serializer(self, salt: str = SALT) -> URLSafeTimedSerializer:
        """The serializer for links of one kind (`salt`), its key fetched (or made) once."""
        with self._lock:
            if salt not in self._serializers:
                key = self.charts.signing_key(self.settings.link_secret)
                self._serializers[salt] = URLSafeTimedSerializer(
                    key, salt=salt, signer=ClockedSigner, signer_kwargs={"clock": self.clock}
                )
            return self._serializers[salt]

    def token(self, chart_id: int, nonce: str, salt: str = SALT) -> str:
        """The signed token naming the chart (or, with VOICE_SALT, the clip), stamped with
        the clock's time."""
        return str(self.serializer(salt).dumps([chart_id, nonce]))

    def url(self, chart_id: int, nonce: str) -> str | None:
        """The chart's public link, or None when PAM_PUBLIC_URL is unset."""
        if self.public_url is None:
            return None
        return f"{self.public_url}/charts/{self.token(chart_id, nonce)}.png"

    def voice_url(self, clip_id: int, nonce: str) -> str | None:
        """The spoken reply's public link, or None when PAM_PUBLIC_URL is unset."""
        if self.public_url is None:
            return None
        return f"{self.public_url}/voice/{self.token(clip_id, nonce, VOICE_SALT)}.ogg"

    def read(self, token: str, salt: str = SALT) -> tuple[int, str, float]:
        """The id and nonce a token of one kind (`salt`) names, and the seconds it has left.
        Raises SignatureExpired when it is too old, BadData when it was tampered with, is of
        another kind, or is not a token at all."""
        payload, signed_at = self.serializer(salt).loads(
            token, max_age=self.seconds, return_timestamp=True
        )
        if (
            not isinstance(payload, list)
            or len(payload) != 2
            or type(payload[0]) is not int
            or not isinstance(payload[1], str)
        ):
            raise BadData("not a chart link")
        left = self.seconds - (self.clock() - signed_at).total_seconds()
        return payload[0], payload[1], max(left, 0.0)


def links() -> SignedLinks:
    """The current app's chart links."""
    signed: SignedLinks = current_app.extensions[EXTENSION]
    return signed


def _text(body: str, status: int) -> Response:
    return Response(body, status, mimetype="text/plain", headers=HEADERS)


@dataclass(frozen=True)
class Kind:
    """What one kind of link serves: its salt, what to say when it has expired or its file is
    gone, and how to find the file (its bytes and type) by id and nonce."""

    name: str
    salt: str
    expired: str
    gone: str
    find: Callable[[SignedLinks, int, str], tuple[bytes, str] | None]


def _chart(signed: SignedLinks, chart_id: int, nonce: str) -> tuple[bytes, str] | None:
    found = signed.charts.get(chart_id, nonce)
    return (found[0], "image/png") if found is not None else None


def _clip(signed: SignedLinks, clip_id: int, nonce: str) -> tuple[bytes, str] | None:
    clip = signed.clips.get(clip_id, nonce)
    return (clip.audio, clip.content_type) if clip is not None else None


CHART = Kind("chart", SALT, EXPIRED, GONE, _chart)
VOICE = Kind("voice", VOICE_SALT, VOICE_EXPIRED, VOICE_GONE, _clip)


def _serve(token: str, kind: Kind) -> Response:
    """The file a link of `kind` names, to anyone who holds the link."""
    signed = links()
    try:
        item_id, nonce, left = signed.read(token, kind.salt)
    except SignatureExpired:
        return _text(kind.expired, 403)
    except BadData:
        log.info("%s link refused: bad signature", kind.name)
        return _text(INVALID, 403)
    found = kind.find(signed, item_id, nonce)
    if found is None:
        return _text(kind.gone, 404)
    data, mimetype = found
    headers = HEADERS | {"Cache-Control": f"private, max-age={int(left)}"}
    return Response(data, 200, mimetype=mimetype, headers=headers)


@blueprint.get("/charts/<token>.png")
def chart(token: str) -> Response:
    """The chart the link names, to anyone who holds the link."""
    return _serve(token, CHART)


@blueprint.get("/voice/<token>.ogg")
def voice(token: str) -> Response:
    """The spoken reply the link names, to anyone who holds the link (Twilio's media fetch)."""
    return _serve(token, VOICE)
