"""Shared fixtures: settings, databases (SQLite file, and Postgres when configured), store,
fake model, an assembled Pam with inline jobs, and an isolated environment."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from sqlalchemy import Engine, delete

from bot.worker.runtime import Pam
from loopback.harness import ROOT, postgres_schema, sqlite_url
from loopback.openai_server import OpenAIServer
from memory.database import db
from memory.database.models import Chart, VoiceClip
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LearnerInfo
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests.fakes import FakeChatModel
from tests.support import RecordingSender
from webhooks.settings import Settings
from webhooks.wiring import build

SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken-cache"
PG_URL = os.environ.get("PAM_TEST_DATABASE_URL")
# DYNO and FLY_APP_NAME: on Heroku and Fly, Pam trusts one proxy's X-Forwarded-* headers.
# PROMETHEUS_MULTIPROC_DIR: prometheus_client's multiprocess mode (webhooks/multiprocess.py).
ENV_PREFIXES = (
    *("PAM_", "OPENAI_", "DATABASE_URL", "TELEGRAM_", "TWILIO_", "DYNO", "FLY_APP_NAME"),
    "PROMETHEUS_MULTIPROC_DIR",
)


def pytest_configure(config: pytest.Config) -> None:
    # tiktoken cannot download here: use the shared, hash-verified copy when it is there.
    if "TIKTOKEN_CACHE_DIR" not in os.environ and SHARED_TIKTOKEN.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's own Pam, OpenAI or platform configuration, and whatever a
    test (or the code it runs: gunicorn's hooks name a metrics directory) writes into the
    environment is undone after it, so no later test's subprocess inherits it."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIXES) and name != "PAM_TEST_DATABASE_URL":
            monkeypatch.delenv(name)
    with mock.patch.dict(os.environ):
        yield


BACKENDS = ["sqlite"] + (["postgres"] if PG_URL else [])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The test Postgres, in a schema of this run's own, migrated once per session."""
    if not PG_URL:
        pytest.skip("PAM_TEST_DATABASE_URL is not set")
    with postgres_schema(PG_URL) as url:
        engine = db.make_engine(url)
        db.upgrade(engine)
        engine.dispose()
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the newest revision, once per session (per xdist worker):
    each test copies it rather than running every migration again (half a second a test)."""
    url = sqlite_url(tmp_path_factory.mktemp("template"))
    engine = db.make_engine(url)
    db.upgrade(engine)
    engine.dispose()
    path = db.sqlite_file(url)
    assert path is not None
    # The last connection closed checkpoints the WAL into the file: the file alone is whole.
    assert not path.with_name(f"{path.name}-wal").exists(), "the template's WAL is not merged"
    return path


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database: a new SQLite file (a copy of the session's template), or the
    session's Postgres."""
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    url = sqlite_url(tmp_path)
    path = db.sqlite_file(url)
    assert path is not None
    shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The test database, with the inbox and outbox emptied: a claim takes the oldest
    claimable item of any address, so an item another test left pending would be claimed
    here. The Postgres schema belongs to this session alone (each xdist worker is a session
    with a schema of its own), whose tests run one at a time, so emptying it is safe."""
    engine = db.make_engine(database_url)
    empty_queues(engine)
    yield engine
    engine.dispose()


def empty_queues(engine: Engine) -> Engine:
    """`engine` with the inbox and outbox emptied, and the charts and spoken replies they
    send: retention prunes media by age, so another test's chart would be counted here."""
    with engine.begin() as connection:
        connection.execute(delete(OutboxItem))
        connection.execute(delete(InboxItem))
        connection.execute(delete(Chart))
        connection.execute(delete(VoiceClip))
    return engine


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """A counter for the default model, with the real encoding loaded: real token counts."""
    counter = TokenCounter("gpt-4o-mini")
    assert not counter.approximate, "tiktoken's cache is not set up: set TIKTOKEN_CACHE_DIR"
    return counter


@pytest.fixture
def sender() -> RecordingSender:
    """A sender that records every reply it is asked to send."""
    return RecordingSender()


@pytest.fixture
def store(engine: Engine) -> Store:
    return Store(engine)


@pytest.fixture
def fake_model() -> FakeChatModel:
    return FakeChatModel()


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    """The local OpenAI-compatible server, for Pam processes to call (answers per task)."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Settings for tests: the test database, defaults otherwise."""
    return Settings(database_url=database_url, llm={"api_key": "test-key"})


@pytest.fixture
def pam(settings: Settings, engine: Engine, fake_model: FakeChatModel) -> Pam:
    """Pam with the fake model, running memory jobs inline (synchronously)."""
    return build(settings, model=fake_model, submit=lambda work: work(), engine=engine)


def unique_user(prefix: str = "user") -> str:
    """An external id no other test uses (Postgres is shared across tests)."""
    return f"test:{prefix}-{uuid.uuid4().hex[:10]}"


def learner_of(pam: Pam, user: str) -> LearnerInfo:
    """The learner Pam knows as `user` (who must have written already)."""
    found = pam.store.learners.find_learner(user)
    assert found is not None
    return found


def unread_by_profile(store: Store, learner_id: int) -> int:
    """How many learner messages the profile has not read yet."""
    return len(store.conversation.memory_backlog(learner_id, limit=10_000)[2])
