"""GET /metrics through Flask's test client: the admin token, the web's counters, the workers'
counters as copied to the database, and the gauges read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory import metrics
from memory.clock import ManualClock
from memory.database import db
from memory.database.models import MetricSnapshot
from memory.jobs.coordinator import PROFILE, Coordinator, JobRunner
from memory.metric_snapshots import Snapshots, Snapshotter, read_registry
from memory.prices import PRICES
from memory.queue.inbox import Inbox
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import RecordingSender, handle, inbound
from tests.webhooks.test_admin import ADMIN, bearer
from webhooks.app import create_app
from webhooks.metrics import ServiceCollector
from webhooks.settings import Settings
from webhooks.wiring import build

API_TOKEN = "api-token-metrics"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def clean(engine: Engine) -> Engine:
    """The database without other tests' copies (the Postgres schema is shared)."""
    with engine.begin() as connection:
        connection.execute(MetricSnapshot.__table__.delete())
    return engine


@pytest.fixture
def client(settings: Settings, clean: Engine) -> Iterator[FlaskClient]:
    app = create_app(
        settings.replace(web={"admin_token": ADMIN}, api={"token": API_TOKEN}), engine=clean
    )
    yield app.test_client()
    app.extensions["pam"].close()


def parse(text: str) -> Samples:
    """Every sample of a scrape, read by prometheus_client's own parser (which also proves the
    text is well-formed)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client: FlaskClient) -> Samples:
    response = client.get("/metrics", headers=bearer())
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    return parse(response.get_data(as_text=True))


def at(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def registry_value(name: str, **labels: str) -> float:
    """This process's worker-side value now (shared by every test of the session)."""
    family = read_registry(metrics.REGISTRY).get(name.removesuffix("_total"))
    if family is None:
        return 0.0
    return family.values.get((name, tuple(sorted(labels.items()))), 0.0)


def copy_to_database(engine: Engine) -> None:
    """What a worker's snapshot thread does every 15 s."""
    Snapshotter(Snapshots(engine), "worker").tick()


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN}]
)
def test_metrics_need_the_admin_token(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert "pam_" not in response.get_data(as_text=True)


def test_metrics_do_not_exist_without_an_admin_token(settings: Settings, engine: Engine) -> None:
    client = create_app(settings, engine=engine).test_client()
    assert client.get("/metrics", headers=bearer()).status_code == 404


def test_messages_received_are_counted_by_channel(client: FlaskClient) -> None:
    before = at(scrape(client), "pam_messages_received_total", channel="api")
    user = unique_user()
    api = {"Authorization": f"Bearer {API_TOKEN}"}
    for n in range(3):
        body = {"user": user, "id": f"m{n}", "text": "hola"}
        assert client.post("/api/messages", json=body, headers=api).status_code == 202
    duplicate = {"user": user, "id": "m0", "text": "hola"}
    assert client.post("/api/messages", json=duplicate, headers=api).status_code == 200

    after = scrape(client)

    assert at(after, "pam_messages_received_total", channel="api") == before + 3
    assert at(after, "pam_database_up") == 1


def test_a_turn_counts_llm_calls_tokens_and_estimated_dollars(
    client: FlaskClient, pam: Pam, clean: Engine, fake_model: FakeChatModel
) -> None:
    model = pam.settings.llm.model
    labels = {"purpose": "reply", "model": model}
    calls = registry_value("pam_llm_calls_total", **labels)
    tokens_in = registry_value("pam_llm_tokens_total", direction="input", **labels)
    tokens_out = registry_value("pam_llm_tokens_total", direction="output", **labels)
    dollars = registry_value("pam_llm_cost_dollars_total", **labels)

    handle(pam, unique_user(), "Hola, me llamo Lena")

    assert len([c for c in fake_model.calls if c.purpose == "reply"]) == 1
    assert registry_value("pam_llm_calls_total", **labels) == calls + 1
    spent_in = registry_value("pam_llm_tokens_total", direction="input", **labels) - tokens_in
    spent_out = registry_value("pam_llm_tokens_total", direction="output", **labels) - tokens_out
    assert spent_in > 0 and spent_out > 0
    price = next(p for p in PRICES if p.model == model)
    assert registry_value("pam_llm_cost_dollars_total", **labels) - dollars == pytest.approx(
        (spent_in * price.input + spent_out * price.output) / 1_000_000
    )

    copy_to_database(clean)
    samples = scrape(client)
    for name, extra in (
        ("pam_llm_calls_total", {}),
        ("pam_llm_tokens_total", {"direction": "input"}),
        ("pam_llm_cost_dollars_total", {}),
    ):
        assert at(samples, name, **labels, **extra) == registry_value(name, **labels, **extra)


def test_audio_calls_are_priced_by_seconds_and_characters(pam: Pam) -> None:
    heard = {"purpose": "transcription", "model": "gpt-4o-mini-transcribe"}
    spoken = {"purpose": "speech", "model": "gpt-4o-mini-tts"}
    before = (
        registry_value("pam_llm_cost_dollars_total", **heard),
        registry_value("pam_llm_cost_dollars_total", **spoken),
    )
    learner = pam.store.learners.learner(unique_user())
    pam.store.ledger.record_audio(
        learner.id, "gpt-4o-mini-transcribe", "transcription", 5000, seconds=20.0
    )
    pam.store.ledger.record_audio(learner.id, "gpt-4o-mini-tts", "speech", 20000, chars=250)

    assert registry_value("pam_llm_cost_dollars_total", **heard) - before[0] == pytest.approx(
        20 / 60 * 0.003
    )
    assert registry_value("pam_llm_cost_dollars_total", **spoken) - before[1] == pytest.approx(
        250 / 15 / 60 * 0.015
    )


def test_limits_count_refusals(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = build(
        settings.replace(limits={"rate_limit_per_minute": 1}),
        model=fake_model,
        submit=lambda work: work(),
        engine=engine,
    )
    before = registry_value("pam_budget_refusals_total", limit="rate")
    user = unique_user()
    handle(pam, user, "hola")
    handle(pam, user, "¿estás?")
    assert registry_value("pam_budget_refusals_total", limit="rate") == before + 1


def test_memory_job_runs_are_counted_by_outcome(engine: Engine, pam: Pam) -> None:
    failed = registry_value("pam_memory_job_runs_total", kind=PROFILE, outcome="failed")
    done = registry_value("pam_memory_job_runs_total", kind=PROFILE, outcome="done")
    unlucky, lucky = (pam.store.learners.learner(unique_user()).id for _ in range(2))

    def job(learner_id: int) -> None:
        if learner_id == unlucky:
            raise RuntimeError("the model is away")

    runner = JobRunner(Coordinator(engine, 60), {PROFILE: job}, lambda work: work())
    runner.request(unlucky, PROFILE)
    runner.request(lucky, PROFILE)

    assert registry_value("pam_memory_job_runs_total", kind=PROFILE, outcome="failed") == failed + 1
    assert registry_value("pam_memory_job_runs_total", kind=PROFILE, outcome="done") == done + 1


def test_replies_sent_are_counted_by_channel(pam: Pam) -> None:
    sender = RecordingSender()
    worker = Worker(pam, {"test": sender})
    before = registry_value("pam_replies_sent_total", channel="test")
    user = unique_user()
    assert worker.inbox.accept(inbound(user, "hola"))
    assert worker.inbox.accept(inbound(user, "¿qué tal?"))
    worker.drain()
    assert len(sender.calls) >= 2
    assert registry_value("pam_replies_sent_total", channel="test") == before + len(sender.calls)


def test_queue_gauges_show_waiting_items_and_the_oldest_ones_age(clean: Engine) -> None:
    clock = ManualClock()
    inbox = Inbox(clean, 60, clock)
    assert inbox.accept(inbound(unique_user(), "primero"))
    clock.advance(timedelta(seconds=30))
    assert inbox.accept(inbound(unique_user(), "segundo"))
    assert inbox.claim_next() is not None
    clock.advance(timedelta(seconds=60))

    collected = ServiceCollector(clean, {}, clock).collect()
    samples = {(s.name, frozenset(s.labels.items())): s.value for m in collected for s in m.samples}

    assert at(samples, "pam_queue_items", queue="inbox", status="pending") == 1
    assert at(samples, "pam_queue_items", queue="inbox", status="claimed") == 1
    assert at(samples, "pam_queue_oldest_item_seconds", queue="inbox") == 90
    assert at(samples, "pam_queue_items", queue="outbox", status="pending") == 0
    assert at(samples, "pam_queue_oldest_item_seconds", queue="outbox") == 0


def test_a_scrape_without_the_database_still_answers(settings: Settings, tmp_path: Path) -> None:
    away = db.make_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'pam.db'}")
    app = create_app(settings.replace(web={"admin_token": ADMIN}), engine=away)
    samples = scrape(app.test_client())
    assert at(samples, "pam_database_up") == 0
    away.dispose()


def test_forget_leaves_nothing_of_the_learner_in_the_metrics(
    client: FlaskClient, pam: Pam, clean: Engine
) -> None:
    user = unique_user("forgotten")
    handle(pam, user, "Me llamo Lena y vivo en Madrid")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    copy_to_database(clean)

    forgot = client.post(f"/admin/learners/{learner.id}/forget", headers=bearer())

    assert forgot.status_code == 200
    counts = pam.store.inspection.rows_about(learner.id, user)
    assert counts == dict.fromkeys(counts, 0)
    text = client.get("/metrics", headers=bearer()).get_data(as_text=True)
    assert user not in text and "Lena" not in text and "Madrid" not in text
    label_names = {
        name
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for name in s.labels
    }
    assert label_names <= {
        "channel",
        "purpose",
        "model",
        "direction",
        "kind",
        "outcome",
        "limit",
        "queue",
        "status",
        "role",
        "reason",  # why a check-in was skipped: a fixed vocabulary (bot/checkins/rounds.py)
        "le",
    }
