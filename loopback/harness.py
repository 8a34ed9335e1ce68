"""Running Pam as operators do, for the end-to-end tests and the benchmarks under bench/:
throwaway databases, real `gunicorn` / `pam worker` subprocesses in their own process
groups, and polling helpers with a bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import requests
from sqlalchemy import make_url, text

from memory.database import db

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PAM_CMD = [str(BIN / "pam")] if (BIN / "pam").exists() else [sys.executable, "-m", "webhooks.cli"]
GUNICORN = (
    [str(BIN / "gunicorn")] if (BIN / "gunicorn").exists() else [sys.executable, "-m", "gunicorn"]
)


def progress(message: str, who: str = "service") -> None:
    """One short progress line: long runs show they are alive (visible with `pytest -s`)."""
    print(f"[{who} {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- databases -------------------------------------------------------------------------------


def postgres_schema_url(base_url: str, schema: str) -> str:
    """`base_url` with every connection's search_path set to `schema`."""
    url = make_url(db.normalize_url(base_url))
    return url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )


@contextmanager
def postgres_schema(base_url: str, prefix: str = "pam_test") -> Iterator[str]:
    """A fresh, empty schema in the test Postgres, dropped afterwards: concurrent test runs
    against one database never see each other's tables. Yields a URL that uses it."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(base_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield postgres_schema_url(base_url, schema)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def postgres_problem(url: str) -> str | None:
    """Why the Postgres at `url` cannot be used right now, said so an operator can act on
    it; None when it answers."""
    try:
        engine = db.make_engine(url)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as exc:
        return (
            f"cannot reach Postgres at {url} ({type(exc).__name__}). Start it (e.g. "
            "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`) "
            "or pass --database-url"
        )
    return None


def sqlite_url(folder: Path) -> str:
    """A fresh SQLite file under `folder`."""
    return f"sqlite:///{folder / f'pam-{uuid.uuid4().hex[:8]}.db'}"


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Processes:
    """Subprocesses, each in its own session (process group) with a log file; all of them
    are killed at the end, whatever happened."""

    def __init__(self, folder: Path, who: str = "service") -> None:
        self.folder = folder
        self.who = who
        self.started: list[Process] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Process:
        """Start `argv`; its output goes to <folder>/<name>.log (appended on a restart)."""
        log = self.folder / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                cwd=self.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.started.append(process)
        progress(f"started {name} pid={popen.pid}", self.who)
        return process

    def kill(self, process: Process, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send `sig` to the process's whole group (gunicorn's workers too)."""
        with suppress(ProcessLookupError):
            os.killpg(process.popen.pid, sig)

    def running(self) -> list[Process]:
        return [p for p in self.started if p.popen.poll() is None]

    def assert_alive(self) -> None:
        for process in self.running() or self.started:
            code = process.popen.poll()
            assert code is None, f"{process.name} exited with {code}:\n{process.tail()}"

    def tails(self) -> str:
        return "\n".join(
            f"----- {p.name} (exit {p.popen.poll()}) -----\n{p.tail()}" for p in self.started
        )

    def close(self) -> None:
        for process in self.started:
            self.kill(process)
        for process in self.started:
            try:
                process.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                progress(f"{process.name} pid={process.popen.pid} did not die", self.who)


@contextmanager
def processes(folder: Path, who: str = "service") -> Iterator[Processes]:
    """Processes that are killed (process groups) at the end; their logs' tails are printed
    when the block fails."""
    group = Processes(folder, who)
    try:
        yield group
    except BaseException:
        print(group.tails(), flush=True)
        raise
    finally:
        group.close()


def service_env(database_url: str, **knobs: str) -> dict[str, str]:
    """The environment of a Pam process: this one's without any Pam, OpenAI or platform
    configuration (TIKTOKEN_CACHE_DIR stays), the database, and `knobs`."""
    prefixes = ("PAM_", "OPENAI_", "DATABASE_URL", "TELEGRAM_", "TWILIO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DATABASE_URL"] = database_url
    env.update(knobs)
    return env


def db_upgrade(env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [*PAM_CMD, "db", "upgrade"], env=env, cwd=cwd, capture_output=True, timeout=60, check=False
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0, output
    assert "applied" in output or "up to date" in output, output


def healthy(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def wait_healthy(base: str, group: Processes, timeout: float = 30) -> None:
    def ready() -> bool:
        group.assert_alive()
        return healthy(base)

    wait_for(ready, timeout, f"{base}/healthz to answer 200", poll=0.1)


# The web command of the Procfile, fly.toml and the Dockerfile: its settings live in one module.
WEB_CONFIG = "python:webhooks.gunicorn_config"
WEB_APP = "webhooks.app:create_app()"


def gunicorn(port: int, workers: int = 2, threads: int = 4) -> list[str]:
    """The Procfile's web command (settings from webhooks/gunicorn_config.py), bound to
    127.0.0.1:`port` with `workers` processes of `threads` threads; the app comes last."""
    return [
        *GUNICORN,
        "-c",
        WEB_CONFIG,
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        WEB_APP,
    ]
