"""The web process's logs hold no credential: a signed link's token (`/charts/<token>.png`,
`/voice/<token>.ogg`) and a query string (`/recall?q=…`) never reach the access log or
gunicorn's error lines — checked in the functions, and through real gunicorn running the
deploy files' web command, reading what it wrote."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
import requests

from loopback.harness import (
    free_port,
    gunicorn,
    processes,
    service_env,
    sqlite_url,
    wait_healthy,
)
from tests.support import migrate
from webhooks.access_log import redact_path, redact_target, redact_text
from webhooks.app import create_app
from webhooks.settings import Settings

CHART_TOKEN = "MTIzNDU2.chart-s3cr3t_sig"
VOICE_TOKEN = "Nzg5.voice-s3cr3t_sig"
ADMIN_TOKEN = "admin-s3cr3t-token"


@pytest.mark.parametrize(
    ("path", "query", "logged"),
    [
        (f"/charts/{CHART_TOKEN}.png", "", "/charts/<token>.png"),
        (f"/voice/{VOICE_TOKEN}.ogg", "", "/voice/<token>.ogg"),
        (f"/charts/{CHART_TOKEN}", "", "/charts/<token>"),
        (f"/voice/{VOICE_TOKEN}.png", "", "/voice/<token>"),
        ("/admin/learners/1/recall", "q=playa", "/admin/learners/1/recall?<query>"),
        ("/healthz", "", "/healthz"),
        ("/telegram/webhook", "", "/telegram/webhook"),
    ],
)
def test_a_request_target_is_logged_without_token_or_query(
    path: str, query: str, logged: str
) -> None:
    assert redact_target(path, query) == logged


def test_error_lines_lose_tokens_and_queries_wherever_they_are_quoted() -> None:
    line = f"Invalid HTTP request line: 'GET /charts/{CHART_TOKEN}.png?a=b HTTP/1.1 x'"
    assert (
        redact_text(line) == "Invalid HTTP request line: 'GET /charts/<token>?<query> HTTP/1.1 x'"
    )
    assert redact_text("Error handling request /recall?q=playa") == (
        "Error handling request /recall?<query>"
    )


def test_every_route_with_a_signed_token_is_redacted(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'pam.db'}")
    app = create_app(settings)
    signed = [rule for rule in app.url_map.iter_rules() if "token" in rule.arguments]
    assert len(signed) >= 2  # the charts and the voice clips
    for rule in signed:
        path = rule.rule.replace("<token>", CHART_TOKEN)
        assert CHART_TOKEN not in redact_path(path), rule.rule


@pytest.mark.slow
def test_gunicorn_logs_neither_tokens_nor_queries_and_says_its_channels_once(
    tmp_path: Path,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = service_env(sqlite_url(tmp_path), PAM_ADMIN_TOKEN=ADMIN_TOKEN)
    migrate(env["DATABASE_URL"])
    with processes(tmp_path) as group:
        web = group.start("web", gunicorn(port, workers=2, threads=2), env)
        wait_healthy(base, group)
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        answers = [
            requests.get(f"{base}/charts/{CHART_TOKEN}.png", timeout=10),
            requests.get(f"{base}/voice/{VOICE_TOKEN}.ogg", timeout=10),
            requests.get(f"{base}/admin/learners/1/recall?q=playa", headers=admin, timeout=10),
            requests.get(
                f"{base}/healthz?session=query-s3cr3t",
                headers={"Referer": "https://elsewhere.example/page?ref=referer-s3cr3t"},
                timeout=10,
            ),
        ]
        assert [a.status_code for a in answers] == [403, 403, 404, 200]
        # A request line gunicorn itself refuses: its warning quotes the line.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(f"GET /charts/{CHART_TOKEN}.png?x=line-s3cr3t\r\n\r\n".encode())
            assert raw.recv(1024).startswith(b"HTTP/1.1 400")
        group.kill(web, signal.SIGTERM)
        assert web.popen.wait(timeout=60) == 0
    log = web.log.read_text()

    assert "s3cr3t" not in log, log
    assert '"GET /charts/<token>.png HTTP/1.1" 403' in log
    assert '"GET /voice/<token>.ogg HTTP/1.1" 403' in log
    assert '"GET /admin/learners/1/recall?<query> HTTP/1.1" 404' in log
    assert '"GET /healthz?<query> HTTP/1.1" 200' in log
    refused = "Invalid request from ip=127.0.0.1: Invalid HTTP request line:"
    assert f"{refused} 'GET /charts/<token>?<query>'" in log
    # Said by gunicorn's master once, not by each of its two workers.
    assert log.count("channels: ") == 1
    assert "admin on (/admin/learners and GET /metrics)" in log


def test_a_question_mark_in_prose_is_no_query() -> None:
    assert redact_text("Is the database up? Retrying") == "Is the database up? Retrying"
