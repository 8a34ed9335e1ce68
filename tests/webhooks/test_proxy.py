"""Behind a proxy, through the real servers: gunicorn (the Procfile's web process) and
waitress (`pam serve`) on 127.0.0.1 get a Twilio-signed webhook with the headers Heroku's
router adds (Host kept, X-Forwarded-Proto/-Port/-For, Via), from an address that is not
loopback, as the router's is not. Both trust one proxy on Heroku (DYNO set) and none
elsewhere, so a client's own X-Forwarded-* headers count for nothing there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loopback.harness import (
    PAM_CMD,
    free_port,
    gunicorn,
    processes,
    service_env,
    sqlite_url,
    wait_healthy,
)
from loopback.openai_server import OpenAIServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER
from tests.support import migrate
from tests.webhooks.whatsapp.conftest import new_wa_id, sign, text_form
from webhooks.settings import Settings

APP_HOST = "pam-tutor.herokuapp.com"
WEBHOOK = "/whatsapp/webhook"
# Heroku's router connects from its own address: not loopback, which gunicorn would trust by
# itself (its FORWARDED_ALLOW_IPS default), so the app's own rule is what gets tested.
ROUTER_ADDRESS = "127.0.0.2"


def heroku_headers(signature: str) -> dict[str, str]:
    """What Heroku's router sends on to a dyno for an https request from Twilio."""
    return {
        "Host": APP_HOST,
        "X-Forwarded-For": "54.172.60.1",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Port": "443",
        "Via": "1.1 vegur",
        "X-Request-Id": "5f4dd1a4-6d1e-4b8e-9d55-2a3c2d3e5f60",
        "X-Request-Start": "1733050000123",
        "X-Twilio-Signature": signature,
    }


def post_webhook(base: str, signed_over: str, source: str = ROUTER_ADDRESS) -> httpx.Response:
    """POST a WhatsApp text as Twilio does, signed over the URL `signed_over`, through the
    router's headers, from `source`."""
    form = text_form(new_wa_id(), "Hola")
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.post(
            base + WEBHOOK, data=form, headers=heroku_headers(sign(signed_over, form))
        )


SERVERS = ["gunicorn", "pam serve"]


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def start(server: str, tmp_path: Path, llm: OpenAIServer, **knobs: str) -> Iterator[str]:
    """Run `server` with WhatsApp configured (and `knobs`); yield its base URL."""
    env = service_env(
        sqlite_url(tmp_path),
        OPENAI_BASE_URL=llm.base_url,
        TWILIO_ACCOUNT_SID=ACCOUNT_SID,
        TWILIO_AUTH_TOKEN=AUTH_TOKEN,
        TWILIO_WHATSAPP_NUMBER=NUMBER,
        TWILIO_API_URL="http://127.0.0.1:9",  # replies go nowhere: only the webhook counts
        **knobs,
    )
    port = free_port()
    if server == "gunicorn":
        migrate(env["DATABASE_URL"])
        argv = gunicorn(port, workers=1, threads=2)
    else:
        argv = [*PAM_CMD, "serve", "--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with processes(tmp_path) as group:
        group.start(server.replace(" ", "-"), argv, env)
        wait_healthy(base, group, timeout=60)
        yield base


@pytest.fixture
def on_heroku(server: str, tmp_path: Path, llm: OpenAIServer) -> Iterator[str]:
    """The server as a Heroku web dyno runs it: DYNO set, no PAM_PUBLIC_URL."""
    yield from start(server, tmp_path, llm, DYNO="web.1")


@pytest.fixture
def without_proxy(server: str, tmp_path: Path, llm: OpenAIServer) -> Iterator[str]:
    """The server on a machine of its own: no proxy configured, none detected."""
    yield from start(server, tmp_path, llm)


@pytest.mark.slow
def test_behind_herokus_router_twilios_signature_holds(on_heroku: str) -> None:
    accepted = post_webhook(on_heroku, f"https://{APP_HOST}{WEBHOOK}")
    # The URL the dyno itself sees is not the one Twilio called.
    refused = post_webhook(on_heroku, f"http://{APP_HOST}{WEBHOOK}")

    assert accepted.status_code == 200, accepted.text
    assert "<Response></Response>" in accepted.text
    assert refused.status_code == 403


@pytest.mark.slow
def test_without_a_proxy_forwarded_headers_count_for_nothing(without_proxy: str) -> None:
    spoofed = post_webhook(without_proxy, f"https://{APP_HOST}{WEBHOOK}")
    as_called = post_webhook(without_proxy, f"http://{APP_HOST}{WEBHOOK}")

    assert spoofed.status_code == 403
    assert as_called.status_code == 200, as_called.text


@pytest.mark.slow
def test_without_a_proxy_not_even_loopbacks_forwarded_headers_count(without_proxy: str) -> None:
    # gunicorn on its own trusts X-Forwarded-Proto from 127.0.0.1; the web command tells it
    # to trust none, so that gunicorn and waitress follow PAM_PROXY_HOPS alone.
    spoofed = post_webhook(without_proxy, f"https://{APP_HOST}{WEBHOOK}", source="127.0.0.1")
    as_called = post_webhook(without_proxy, f"http://{APP_HOST}{WEBHOOK}", source="127.0.0.1")

    assert spoofed.status_code == 403
    assert as_called.status_code == 200, as_called.text


@pytest.mark.parametrize(
    ("environment", "hops"),
    [
        ({}, 0),
        ({"DYNO": "web.1"}, 1),
        ({"FLY_APP_NAME": "pam-tutor"}, 1),
        ({"DYNO": "web.1", "PAM_PROXY_HOPS": "0"}, 0),
        ({"PAM_PROXY_HOPS": "2"}, 2),
    ],
)
def test_how_many_proxies_are_trusted(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], hops: int
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert Settings().web.proxy_hops == hops
