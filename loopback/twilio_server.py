"""A small fake Twilio REST API on 127.0.0.1: the real twilio `Client` (TWILIO_API_URL) sends
WhatsApp messages to it (text, or media by URL: MediaUrl, or a content template: ContentSid
with ContentVariables). It records every message and can answer with scripted errors. Its
Content API (content.twilio.com's /v1/Content: create with a POST, list with a GET) keeps
every template created, and can fail too. `sign` signs a webhook's form as Twilio does;
`tap_form` is the form Twilio posts when a learner taps a quick reply.

Inbound media (`add_media`) is served as Twilio serves it with HTTP basic auth on: the media
URL asks for the account's credentials and redirects (307) to a short-lived link on its media
CDN, here `MediaCDN`, a second server that records every request it gets, headers and all."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from twilio.request_validator import RequestValidator

from loopback.local_server import Answer, LocalServer, Trickle

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "test-auth-token-0123456789abcdef"
NUMBER = "whatsapp:+14155238886"


def sign(
    url: str, form: Mapping[str, str], token: str = AUTH_TOKEN, algorithm: str | None = None
) -> str:
    """X-Twilio-Signature as Twilio computes it for `form` posted to `url` (a werkzeug
    MultiDict's repeated keys count each value, as Twilio counts them)."""
    return str(RequestValidator(token).compute_signature(url, form, algorithm=algorithm))


CONTENT_PATH = "/v1/Content"


@dataclass
class Failure:
    """A scripted error answer for the next message: HTTP status and Twilio error code."""

    status: int
    code: int
    message: str = "scripted failure"


@dataclass
class Seen:
    """One request a fake server received: its path (with the query) and its headers."""

    path: str
    headers: dict[str, str]


@dataclass
class Item:
    """What the CDN answers at one path: `status`, with the bytes and their type, or a
    redirect to `location`; `unsized`: the body without a Content-Length, ended by closing
    the connection (as a streamed answer may come); `trickle`: that slow answer instead."""

    data: bytes = b""
    content_type: str = "audio/ogg"
    status: int = 200
    location: str | None = None
    unsized: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    trickle: Trickle | None = None


class MediaCDN(LocalServer):
    """A stand-in for Twilio's media CDN (mms.twiliocdn.com): unauthenticated GETs of signed,
    short-lived links, every request recorded (`seen`) so a test can tell what reached it."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        super().__init__()
        cdn = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                item = cdn.answer(self.path, dict(self.headers.items()))
                if item.trickle is not None:
                    item.trickle.send(self, cdn.closing)
                    return
                self.send_response(item.status)
                headers = {"Content-Type": item.content_type, **item.headers}
                if item.location is not None:
                    headers["Location"] = item.location
                if not item.unsized:
                    headers["Content-Length"] = str(len(item.data))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(item.data)
                self.close_connection = True  # an unsized body ends when the connection does

        self.httpd.RequestHandlerClass = Handler

    def add(self, item: Item) -> str:
        """Serve `item` at a new signed link; the link (an absolute URL)."""
        path = f"/{uuid.uuid4().hex}/{next(self._ids)}?Expires=1764417600&Signature=c2lnbmVk"
        with self.lock:
            self.items[path] = item
        return self.origin + path

    def loop(self) -> str:
        """A link that redirects to a second one that redirects back to it."""
        first = self.add(Item(status=302))
        second = self.add(Item(status=302, location=first))
        with self.lock:
            self.items[first.removeprefix(self.origin)].location = second
        return first

    def answer(self, path: str, headers: dict[str, str]) -> Item:
        """What to answer at `path` (404 for a link it does not know), the request recorded."""
        with self.lock:
            self.seen.append(Seen(path, headers))
            return self.items.get(path) or Item(b"Not Found", "text/plain", 404)

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        raise NotImplementedError("the CDN answers in its own handler")


class TwilioServer(LocalServer):
    """Serve Messages.json for ACCOUNT_SID until closed, and inbound media when given a
    `cdn`; use as a context manager."""

    def __init__(self, cdn: MediaCDN | None = None) -> None:
        self.messages: list[dict[str, str]] = []
        self.failures: deque[Failure] = deque()
        self.lock = threading.Lock()
        self.cdn = cdn
        self.stored: dict[str, str] = {}  # a media resource's path → where it redirects
        self.media_seen: list[Seen] = []  # every request for media, refused ones included
        self.contents: dict[str, dict[str, Any]] = {}  # content templates by sid, as created
        self.content_failures: deque[Failure] = deque()
        self.content_lists = 0  # how many times the templates were listed
        self.list_failures: deque[Failure] = deque()
        super().__init__()

    @property
    def base_url(self) -> str:
        """The value for TWILIO_API_URL."""
        return self.origin

    def add_media(
        self,
        data: bytes,
        content_type: str = "audio/ogg",
        *,
        location: str | None = None,
        **cdn: Any,
    ) -> str:
        """Keep `data` as the media of a new inbound message; its MediaUrl (on this server,
        TWILIO_API_URL's origin, as Twilio's own are on api.twilio.com). Fetched with the
        account's credentials it redirects to the CDN's link, or to `location` if given;
        `cdn` sets the CDN's answer (an `Item`'s status, unsized, headers)."""
        if location is None:
            if self.cdn is None:
                raise ValueError("serving media needs a MediaCDN")
            location = self.cdn.add(Item(data, content_type, **cdn))
        path = (
            f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM{uuid.uuid4().hex}"
            f"/Media/ME{uuid.uuid4().hex}"
        )
        with self.lock:
            self.stored[path] = location
        return self.origin + path

    def receive(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        if "/Media/" in path:
            return self.serve_media(path, headers)
        return self.respond(path, headers.get("Content-Type", ""), raw)

    def serve_media(self, path: str, headers: dict[str, str]) -> Answer:
        """A media resource: 401 without the account's credentials, else 307 to its link."""
        expected = base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
        with self.lock:
            self.media_seen.append(Seen(path, headers))
            location = self.stored.get(urlsplit(path).path)
        if headers.get("Authorization") != f"Basic {expected}":
            body = {"code": 20003, "message": "Authenticate", "status": 401}
            return 401, {"WWW-Authenticate": 'Basic realm="Twilio API"'}, json.dumps(body).encode()
        if location is None:
            body = {"code": 20404, "message": "not found", "status": 404}
            return 404, {}, json.dumps(body).encode()
        return 307, {"Location": location, "Content-Type": "text/html"}, b""

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        if urlsplit(path).path == CONTENT_PATH:
            # A create posts JSON; a list is a GET, with no body.
            status, body = self.create_content(json.loads(raw)) if raw else self.list_contents()
        else:
            status, body = self.handle(path, dict(parse_qsl(raw.decode())))
        return status, {}, json.dumps(body).encode()

    def create_content(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The Content API's create (POST /v1/Content, JSON): the template kept by a new HX
        sid, answered as Twilio's ContentInstance; or the next scripted failure."""
        with self.lock:
            failure = self.content_failures.popleft() if self.content_failures else None
            if failure is None:
                sid = f"HX{len(self.contents) + 1:032x}"
                self.contents[sid] = request
        if failure is not None:
            return failure.status, _error(failure)
        return 201, {
            "sid": sid,
            "account_sid": ACCOUNT_SID,
            "friendly_name": request.get("friendly_name"),
            "language": request.get("language"),
            "variables": request.get("variables"),
            "types": request.get("types"),
            "date_created": "2026-11-29T12:00:00Z",
            "date_updated": "2026-11-29T12:00:00Z",
            "url": f"https://content.twilio.com/v1/Content/{sid}",
            "links": {},
        }

    def list_contents(self) -> tuple[int, dict[str, Any]]:
        """The Content API's list (GET /v1/Content): every template, one page; or the next
        scripted failure."""
        with self.lock:
            failure = self.list_failures.popleft() if self.list_failures else None
            self.content_lists += 1
            contents = [
                {"sid": sid, "friendly_name": c.get("friendly_name"), "types": c.get("types")}
                for sid, c in self.contents.items()
            ]
        if failure is not None:
            return failure.status, _error(failure)
        url = f"https://content.twilio.com{CONTENT_PATH}?PageSize=50&Page=0"
        meta = {"page": 0, "page_size": 50, "first_page_url": url, "previous_page_url": None}
        meta |= {"url": url, "next_page_url": None, "key": "contents"}
        return 200, {"contents": contents, "meta": meta}

    def fail_content_next(self, *failures: Failure, listing: bool = False) -> None:
        """Fail the next template creations (with `listing`: the next lists) with these."""
        with self.lock:
            (self.list_failures if listing else self.content_failures).extend(failures)

    def quick_replies(self, to: str | None = None) -> list[tuple[str, list[dict[str, str]]]]:
        """Every accepted message sent with a content template (to `to`, if given), in order:
        its text (the variable {{1}}) and the template's quick-reply actions as the learner's
        WhatsApp gets them, their variables filled from the message's ContentVariables (a
        tap's ButtonPayload is the filled id)."""
        with self.lock:
            sent = [
                (json.loads(m["ContentVariables"]), self.contents[m["ContentSid"]])
                for m in self.messages
                if "ContentSid" in m and (to is None or m["To"] == to)
            ]
        return [
            (
                filled["1"],
                [
                    {key: _fill(value, filled) for key, value in action.items()}
                    for action in c["types"]["twilio/quick-reply"]["actions"]
                ],
            )
            for filled, c in sent
        ]

    def fail_next(self, *failures: Failure) -> None:
        with self.lock:
            self.failures.extend(failures)

    def media(self, to: str | None = None) -> list[str]:
        """The MediaUrl of every accepted message that had one (to `to`, if given), in order."""
        with self.lock:
            return [
                m["MediaUrl"]
                for m in self.messages
                if "MediaUrl" in m and (to is None or m["To"] == to)
            ]

    def bodies(self, to: str | None = None) -> list[str]:
        """The text the learner reads of every accepted message that had one (to `to`, if
        given), in order: its Body, or a quick-reply template's text (ContentVariables' 1)."""
        with self.lock:
            return [
                text
                for m in self.messages
                if (text := text_of(m)) is not None and (to is None or m["To"] == to)
            ]

    def handle(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if path != f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json":
            return 404, {"code": 20404, "message": "not found", "status": 404}
        with self.lock:
            failure = self.failures.popleft() if self.failures else None
            if failure is None:
                self.messages.append(form)
                sid = f"SM{len(self.messages):032d}"
        if failure is not None:
            return failure.status, _error(failure)
        return 201, {
            "sid": sid,
            "account_sid": ACCOUNT_SID,
            "from": form.get("From"),
            "to": form.get("To"),
            "body": form.get("Body"),
            "status": "queued",
            "num_segments": "1",
            "num_media": "1" if "MediaUrl" in form else "0",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
            "date_created": "Sun, 29 Nov 2026 12:00:00 +0000",
            "uri": f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json",
        }


def _fill(value: str, variables: dict[str, str]) -> str:
    """A template field with its {{n}} variables filled, as Twilio fills them."""
    return re.sub(r"\{\{(\d+)\}\}", lambda m: variables.get(m.group(1), m.group(0)), value)


def text_of(message: dict[str, str]) -> str | None:
    """The text a learner reads of a sent message's form: its Body, or a quick-reply
    template's text (ContentVariables' 1); None for media alone."""
    if "Body" in message:
        return message["Body"]
    if "ContentVariables" in message:
        text = json.loads(message["ContentVariables"]).get("1")
        return text if isinstance(text, str) else None
    return None


def _error(failure: Failure) -> dict[str, Any]:
    """Twilio's error body for a scripted failure."""
    return {
        "code": failure.code,
        "message": failure.message,
        "more_info": f"https://www.twilio.com/docs/errors/{failure.code}",
        "status": failure.status,
    }


def tap_form(sender: str, title: str, payload: str, **extra: str) -> dict[str, str]:
    """The form Twilio posts to the WhatsApp webhook when `sender` ("whatsapp:+49...") taps a
    quick reply titled `title` whose id is `payload` (Twilio's inbound WhatsApp parameters:
    ButtonText, ButtonPayload; the Body is the title, MessageType "button")."""
    sid = f"SM{uuid.uuid4().hex}"
    return {
        "SmsMessageSid": sid,
        "NumMedia": "0",
        "ProfileName": "Lena",
        "MessageType": "button",
        "SmsSid": sid,
        "WaId": sender.removeprefix("whatsapp:+"),
        "SmsStatus": "received",
        "Body": title,
        "ButtonText": title,
        "ButtonPayload": payload,
        "To": NUMBER,
        "NumSegments": "1",
        "ReferralNumMedia": "0",
        "MessageSid": sid,
        "AccountSid": ACCOUNT_SID,
        "From": sender,
        "ApiVersion": "2010-04-01",
        **extra,
    }
