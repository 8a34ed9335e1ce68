"""GET /metrics as operators scrape it: real gunicorn with two workers (the deploy files'
command, whose config module sets up multiprocess mode), a real `pam worker` with its memory
process, the fake OpenAI server and the HTTP API channel's callback on 127.0.0.1. One scrape of
the web app must count what both web workers received and what the worker, on its own
"machine", did."""

from __future__ import annotations

import re
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, func, select

from loopback.callback_server import CallbackServer
from loopback.harness import (
    PAM_CMD,
    free_port,
    gunicorn,
    processes,
    progress,
    service_env,
    wait_for,
    wait_healthy,
)
from loopback.openai_server import OpenAIServer
from memory.database import db
from memory.database.models import Profile
from tests.support import HANG_SECONDS, migrate

pytestmark = pytest.mark.slow

ADMIN = "metrics-admin-token"
API = "metrics-api-token"
PER_LEARNER = 5  # a profile update is due every 5 learner messages
MAX_MESSAGES = 300
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ACCESS = re.compile(r"^pid=<(\d+)> POST /api/messages 202", re.MULTILINE)


def scrape(base: str) -> Samples:
    response = requests.get(
        f"{base}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def at(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def send(base: str, n: int) -> None:
    """Message `n`: learner n // 5's, on a connection of its own (any web worker may take it)."""
    body = {"user": f"learner{n // PER_LEARNER}", "id": f"m{n}", "text": f"Hola, mensaje {n}"}
    response = requests.post(
        f"{base}/api/messages", json=body, headers={"Authorization": f"Bearer {API}"}, timeout=10
    )
    assert response.status_code == 202, response.text


def test_one_scrape_counts_both_web_workers_and_the_worker(
    tmp_path: Path, database: str, llm: OpenAIServer
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with CallbackServer() as callback, processes(tmp_path, "metrics") as group:
        env = service_env(
            database,
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test",
            PAM_POLL_SECONDS="0.05",
            PAM_ADMIN_TOKEN=ADMIN,
            PAM_API_TOKEN=API,
            PAM_API_CALLBACK_URL=callback.url,
        )
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # the config's hook makes a fresh one
        migrate(env["DATABASE_URL"])
        command = gunicorn(port, workers=2, threads=2)
        # The access log names the worker process that answered each request.
        command[-1:-1] = [
            "--access-logformat",
            "pid=%(p)s %(m)s %(U)s %(s)s",
        ]
        web = group.start("web", command, env)
        wait_healthy(base, group, timeout=HANG_SECONDS)  # two workers booting on a busy machine

        assert requests.get(f"{base}/metrics", timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert requests.get(f"{base}/metrics", headers=wrong, timeout=10).status_code == 401

        # Messages, several at a time, until both web workers have taken some; then whole
        # learners' worth (5 each). Two connections that say nothing hold two of the four
        # threads meanwhile: a worker with both of its threads held takes no connection, so
        # the other one takes them.
        # On a busy machine the second web worker may still be loading the app when the first
        # answers /healthz: batches go on, a second apart, until both have taken some.
        sent = 0
        with idle_connections(port, 2), ThreadPoolExecutor(8) as pool:
            while sent < MAX_MESSAGES:
                list(pool.map(lambda n: send(base, n), range(sent, sent + 2 * PER_LEARNER)))
                sent += 2 * PER_LEARNER
                if len(set(ACCESS.findall(web.log.read_text()))) >= 2:
                    break
                time.sleep(1.0)
        takers = set(ACCESS.findall(web.log.read_text()))
        progress(f"{sent} messages taken by web workers {sorted(takers)}", "metrics")
        assert len(takers) == 2, "one web worker took every message"

        # Any worker may answer a scrape: every one of them counts both workers' messages.
        for _ in range(6):
            samples = scrape(base)
            assert at(samples, "pam_messages_received_total", channel="api") == sent
            assert at(samples, "pam_queue_items", queue="inbox", status="pending") == sent
        assert at(samples, "pam_queue_oldest_item_seconds", queue="inbox") >= 0

        worker = group.start("worker", [*PAM_CMD, "worker"], env)
        learners = sent // PER_LEARNER
        engine = db.make_engine(database)
        try:
            wait_for(lambda: len(callback.received) >= sent, HANG_SECONDS, f"{sent} replies")
            wait_for(
                lambda: profiles_learned(engine) >= learners, 90, f"{learners} profiles learned"
            )
        finally:
            engine.dispose()

        # The worker copies its counts every 15 s: a scrape sees them while it runs.
        def turned() -> bool:
            return at(scrape(base), "pam_turn_seconds_count", channel="api") == sent

        wait_for(turned, HANG_SECONDS, "the worker's turns in a scrape", poll=1.0)

        group.kill(worker, signal.SIGTERM)  # and its memory process: copies written at stop
        assert worker.popen.wait(timeout=HANG_SECONDS) == 0, worker.tail()

        samples = scrape(base)
        replies = len(callback.received)
        assert at(samples, "pam_replies_sent_total", channel="api") == replies
        assert at(samples, "pam_turn_seconds_count", channel="api") == sent
        assert at(samples, "pam_turn_seconds_bucket", channel="api", le="+Inf") == sent
        model = "gpt-4o-mini"
        assert at(samples, "pam_llm_calls_total", purpose="reply", model=model) >= sent
        assert at(samples, "pam_llm_calls_total", purpose="profile", model=model) >= learners
        assert (
            at(samples, "pam_llm_tokens_total", purpose="reply", model=model, direction="input") > 0
        )
        assert at(samples, "pam_llm_cost_dollars_total", purpose="reply", model=model) > 0
        assert at(samples, "pam_memory_job_runs_total", kind="profile", outcome="done") >= learners
        assert at(samples, "pam_memory_job_runs_total", kind="profile", outcome="failed") == 0
        assert at(samples, "pam_messages_received_total", channel="api") == sent
        assert at(samples, "pam_queue_items", queue="inbox", status="pending") == 0
        assert at(samples, "pam_queue_items", queue="outbox", status="pending") == 0
        assert at(samples, "pam_reporting_processes", role="worker") == 1
        assert at(samples, "pam_reporting_processes", role="memory-jobs") == 1
        assert at(samples, "pam_database_up") == 1


@contextmanager
def idle_connections(port: int, count: int) -> Iterator[None]:
    """`count` connections to the web that send nothing until the block ends."""
    with ExitStack() as stack:
        for _ in range(count):
            stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield


def profiles_learned(engine: Engine) -> int:
    """How many learners' profiles have read their 5 messages."""
    with engine.connect() as connection:
        return int(
            connection.scalar(
                select(func.count())
                .select_from(Profile)
                .where(Profile.messages_processed >= PER_LEARNER)
            )
            or 0
        )
