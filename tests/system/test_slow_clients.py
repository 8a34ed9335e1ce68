"""Slow peers cannot take the web process: the shipped web command, started exactly as the
Procfile says (bash, $PORT, its default two workers of four threads), keeps answering /healthz
and a webhook promptly while many clients hold connections open: ones that sent half a
request line, ones kept alive after an answer and silent since, and ones that sent a request
head and a few bytes of the body they announced (issue 27: ten half request lines made it
stop answering for minutes). Then each slow client finishes its request and is answered."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests

from loopback.harness import BIN, free_port, processes, service_env, wait_healthy
from tests.helpers.deploy_files import procfile
from tests.support import HANG_SECONDS, migrate

pytestmark = pytest.mark.slow

TOKEN = "slow-clients-api-token"
SLOW_CLIENTS = 50  # of each kind
# Long enough for a busy CI machine to answer one request; the web command as it was never
# answered within minutes.
ANSWER_SECONDS = 30
HALF_LINE = b"GET /healthz HT"
REST_OF_HEAD = b"TP/1.1\r\nHost: pam.example\r\nConnection: close\r\n\r\n"
# Each slow client is a learner of its own: one learner's 50 waiting messages would be a
# burst, turned away with 429 (PAM_MAX_QUEUED_PER_ADDRESS), which is not what this tests.
BODY = b'{"id": "slow-%d", "user": "slowpoke-%d", "text": "Hola, despacio"}'


def web_command() -> str:
    """The Procfile's web line, as Heroku hands it to bash."""
    (web,) = [c for c in procfile() if c.name == "web"]
    assert web.shell is not None
    return web.shell


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_SECONDS)
    return sock


def answer(sock: socket.socket) -> bytes:
    """All the server sends on `sock` until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def api_post(port: int, body: bytes) -> bytes:
    """A webhook request's head for `body`."""
    return (
        b"POST /api/messages HTTP/1.1\r\nHost: pam.example\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )


@pytest.fixture
def web(tmp_path: Path, database: str) -> Iterator[int]:
    """The Procfile's web process on a free $PORT; yields the port."""
    port = free_port()
    env = service_env(database, PAM_API_TOKEN=TOKEN, PORT=str(port))
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.pop("WEB_CONCURRENCY", None)
    migrate(env["DATABASE_URL"])
    with processes(tmp_path, "slow-clients") as group:
        group.start("web", ["bash", "-c", web_command()], env)
        wait_healthy(f"http://127.0.0.1:{port}", group, timeout=HANG_SECONDS)
        yield port
        group.assert_alive()


def test_the_web_command_answers_while_slow_clients_hold_connections(web: int) -> None:
    base = f"http://127.0.0.1:{web}"
    with ExitStack() as held:
        idle = []
        for _ in range(SLOW_CLIENTS):
            kept = held.enter_context(requests.Session())
            assert kept.get(f"{base}/healthz", timeout=ANSWER_SECONDS).status_code == 200
            idle.append(kept)  # its connection is kept alive, and says nothing more
        half_lines, slow_bodies = [], []
        for n in range(SLOW_CLIENTS):
            sock = held.enter_context(connect(web))
            sock.sendall(HALF_LINE)
            half_lines.append(sock)
            body = BODY % (n, n)
            sock = held.enter_context(connect(web))
            sock.sendall(api_post(web, body) + body[:10])
            slow_bodies.append((sock, body))

        # Fresh clients are answered, on new connections, while all of those are open.
        health = requests.get(f"{base}/healthz", timeout=ANSWER_SECONDS)
        assert health.status_code == 200, health.text
        accepted = requests.post(
            f"{base}/api/messages",
            json={"id": "prompt-1", "user": "quick", "text": "Hola"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=ANSWER_SECONDS,
        )
        assert accepted.status_code == 202, accepted.text

        # The slow clients were only slow: each is answered once its request is whole.
        for sock in half_lines:
            sock.sendall(REST_OF_HEAD)
        for sock, body in slow_bodies:
            sock.sendall(body[10:])
        for sock in half_lines:
            assert answer(sock).startswith(b"HTTP/1.1 200 ")
        for sock, _ in slow_bodies:
            assert answer(sock).startswith(b"HTTP/1.1 202 ")
        for kept in idle:
            assert kept.get(f"{base}/healthz", timeout=ANSWER_SECONDS).status_code == 200

        # A client that waits for "100 Continue" before its body (curl, for a long one) is
        # told to go on, then answered.
        body = BODY % (SLOW_CLIENTS, SLOW_CLIENTS)
        sock = held.enter_context(connect(web))
        sock.sendall(api_post(web, body)[:-2] + b"Expect: 100-continue\r\n\r\n")
        told = b""
        while not told.endswith(b"\r\n\r\n"):
            told += sock.recv(1)
        assert told == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert b"\r\n\r\nHTTP/1.1 202 " in told + answer(sock)
