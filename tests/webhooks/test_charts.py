"""GET /charts/<token>.png: the link is the credential. A good link serves the PNG privately
and leaks no referrer; a tampered or malformed one is refused (403), an expired one too with a
word on what to do, and the chart of a forgotten learner is gone (404). The web process and the
workers agree on the key without any being configured."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot.settings import ChartSettings
from memory.clock import ManualClock
from memory.store.charts import Charts
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.support import forged
from webhooks.app import create_app
from webhooks.charts import EXPIRED, SignedLinks
from webhooks.settings import Settings

PUBLIC = "https://pam.example/"
PNG = b"\x89PNG\r\n\x1a\n a chart"


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    return settings.replace(web={"public_url": PUBLIC}, charts={"chart_link_seconds": 3600})


def chart_of_someone(store: Store) -> tuple[int, int, str]:
    """A stored chart: its learner's id, its id and nonce."""
    learner = store.learners.learner(unique_user())
    chart_id, nonce = store.charts.save(learner.id, PNG, "two lines")
    return learner.id, chart_id, nonce


def path_of(url: str | None) -> str:
    assert url is not None and url.startswith("https://pam.example/charts/")
    return url.removeprefix("https://pam.example")


def test_a_signed_link_serves_the_png_to_anyone_who_has_it(
    client: FlaskClient, store: Store, app_settings: Settings, engine: Engine
) -> None:
    _, chart_id, nonce = chart_of_someone(store)
    # Signed by a worker's links (no PAM_LINK_SECRET: the key both read from the database).
    worker = SignedLinks(Charts(engine), app_settings.charts, app_settings.web.public_url)
    response = client.get(path_of(worker.url(chart_id, nonce)))
    assert response.status_code == 200
    assert response.mimetype == "image/png"
    assert response.data == PNG
    cache = response.headers["Cache-Control"]
    assert cache.startswith("private, max-age=")
    assert 3590 <= int(cache.rsplit("=", 1)[1]) <= 3600
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "tamper",
    [
        forged,  # the signature
        lambda token: "W1swLCJ4Il0" + token[token.index(".") :],  # the payload
        lambda token: "not-a-token",
        lambda token: "",
    ],
    ids=["signature", "payload", "garbage", "empty"],
)
def test_a_tampered_link_is_refused(
    client: FlaskClient, store: Store, app_settings: Settings, engine: Engine, tamper: object
) -> None:
    _, chart_id, nonce = chart_of_someone(store)
    links = SignedLinks(Charts(engine), app_settings.charts, PUBLIC)
    token = links.token(chart_id, nonce)
    assert callable(tamper)
    response = client.get(f"/charts/{tamper(token)}.png")
    assert response.status_code in (403, 404)  # an empty token matches no route
    assert response.mimetype != "image/png"
    assert PNG not in response.data


def test_a_link_signed_with_another_key_is_refused(
    client: FlaskClient, store: Store, engine: Engine
) -> None:
    _, chart_id, nonce = chart_of_someone(store)
    elsewhere = SignedLinks(
        Charts(engine), ChartSettings(link_secret="another key, as long"), PUBLIC
    )
    response = client.get(path_of(elsewhere.url(chart_id, nonce)))
    assert response.status_code == 403


def test_an_expired_link_is_refused_with_what_to_do(
    app_settings: Settings, store: Store, engine: Engine
) -> None:
    clock = ManualClock()
    app = create_app(app_settings, engine=engine)
    web_links = app.extensions["pam_chart_links"]
    web_links.clock = clock  # the web app's own links, on a clock the test moves
    worker = SignedLinks(Charts(engine), app_settings.charts, PUBLIC, clock)
    _, chart_id, nonce = chart_of_someone(store)
    path = path_of(worker.url(chart_id, nonce))
    client = app.test_client()
    clock.advance(timedelta(seconds=3599))
    assert client.get(path).status_code == 200
    clock.advance(timedelta(seconds=2))
    response = client.get(path)
    assert response.status_code == 403
    assert response.mimetype == "text/plain"
    assert response.get_data(as_text=True) == EXPIRED
    assert "/progress" in EXPIRED


def test_the_chart_of_a_forgotten_learner_is_gone(
    client: FlaskClient, store: Store, app_settings: Settings, engine: Engine
) -> None:
    learner_id, chart_id, nonce = chart_of_someone(store)
    links = SignedLinks(Charts(engine), app_settings.charts, PUBLIC)
    path = path_of(links.url(chart_id, nonce))
    assert client.get(path).status_code == 200
    store.learners.forget(learner_id)
    response = client.get(path)
    assert response.status_code == 404
    assert PNG not in response.data


def test_a_link_names_the_nonce_too(
    client: FlaskClient, store: Store, app_settings: Settings, engine: Engine
) -> None:
    """Even with the key, a chart id alone opens nothing: the nonce is the chart's own."""
    _, chart_id, _ = chart_of_someone(store)
    links = SignedLinks(Charts(engine), app_settings.charts, PUBLIC)
    assert client.get(path_of(links.url(chart_id, "guessed-nonce"))).status_code == 404


def test_no_public_url_no_link(engine: Engine) -> None:
    assert SignedLinks(Charts(engine), ChartSettings(), None).url(1, "nonce") is None


# -- spoken replies: GET /voice/<token>.ogg, the same links with a salt of their own ----------

OGG = b"OggS\x00\x02 a spoken reply"


def test_a_voice_link_serves_the_clip_and_expires_like_a_chart_link(
    app_settings: Settings, store: Store, engine: Engine
) -> None:
    clock = ManualClock()
    app = create_app(app_settings, engine=engine)
    app.extensions["pam_chart_links"].clock = clock
    worker = SignedLinks(Charts(engine), app_settings.charts, PUBLIC, clock)
    learner = store.learners.learner(unique_user())
    clip_id, nonce = store.voice_clips.save(learner.id, OGG, "audio/ogg")
    url = worker.voice_url(clip_id, nonce)
    assert url is not None and url.startswith("https://pam.example/voice/") and url.endswith(".ogg")
    path = url.removeprefix("https://pam.example")
    client = app.test_client()

    served = client.get(path)
    assert served.status_code == 200 and served.mimetype == "audio/ogg" and served.data == OGG
    assert served.headers["Referrer-Policy"] == "no-referrer"
    # A chart's route does not take a voice link, nor does a forged one name anything.
    token = path.removeprefix("/voice/").removesuffix(".ogg")
    assert client.get(f"/charts/{token}.png").status_code == 403
    assert client.get(f"/voice/{forged(token)}.ogg").status_code == 403
    chart_token = worker.token(clip_id, nonce)  # the same id and nonce, signed as a chart
    assert client.get(f"/voice/{chart_token}.ogg").status_code == 403

    clock.advance(timedelta(seconds=3601))
    expired = client.get(path)
    assert expired.status_code == 403 and b"expired" in expired.data


def test_a_forgotten_learners_voice_link_is_gone(
    client: FlaskClient, store: Store, app_settings: Settings, engine: Engine
) -> None:
    learner = store.learners.learner(unique_user())
    clip_id, nonce = store.voice_clips.save(learner.id, OGG, "audio/ogg")
    url = SignedLinks(Charts(engine), app_settings.charts, PUBLIC).voice_url(clip_id, nonce)
    assert url is not None
    store.learners.forget(learner.id)
    response = client.get(url.removeprefix("https://pam.example"))
    assert response.status_code == 404 and OGG not in response.data


def test_without_a_public_url_there_are_no_voice_links(engine: Engine) -> None:
    links = SignedLinks(Charts(engine), ChartSettings(), None)
    assert links.voice_url(1, "nonce") is None and not links.public
