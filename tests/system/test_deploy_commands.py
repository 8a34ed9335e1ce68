"""Every command the deploy files name starts from a clean install. Pam is installed as the
Dockerfile installs it (`uv sync --locked --no-editable`, bytecode compiled, from a copy of the
build context), once per session, and each command is started, one by one, from a working
directory that is no source tree, with the environment a platform gives it: web commands must
answer /healthz, worker commands must answer a message that reaches the inbox, release commands
must migrate a fresh database, register the Telegram webhook, and exit 0. The commands are read
from the Procfile, fly.toml, the Dockerfile and app.json themselves (tests/helpers/
deploy_files.py), so the next rename fails here, not on the platform."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from loopback.harness import (
    BIN,
    ROOT,
    Process,
    Processes,
    free_port,
    processes,
    progress,
    wait_for,
    wait_healthy,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from tests.helpers.deploy_files import DeployCommand, deploy_commands
from tests.support import HANG_SECONDS
from tests.webhooks.telegram import updates

pytestmark = pytest.mark.slow

COMMANDS = deploy_commands()
SECRET = "pam-deploy_Secret-1b2c"
PUBLIC_URL = "https://pam.example"
INSTALL_TIMEOUT = 900
START = HANG_SECONDS  # each wait ends on its event; the bound is a hang guard
# What a platform gives a process of the image, besides the app's own configuration.
IMAGE_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# Nothing of this machine's Python, uv or Pam configuration reaches the installed commands.
NOT_INHERITED = ("PAM_", "OPENAI_", "DATABASE_URL", "TELEGRAM_", "TWILIO_", "UV_", "PYTHON")
NOT_INHERITED_NAMES = ("VIRTUAL_ENV", "PORT", "WEB_CONCURRENCY", "DYNO", "FLY_APP_NAME")


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip().removeprefix("**/") for line in lines if line.strip()[:1] not in "#"]


def build_context(target: Path) -> Path:
    """A copy of what `docker build .` sends: the tree without what .dockerignore names."""
    patterns = dockerignore_patterns()

    def ignored(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)}

    shutil.copytree(ROOT, target, ignore=ignored)
    return target


def uv_version_pinned() -> str:
    """The uv the Dockerfile installs; dev.py pins the same one."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    (pinned,) = re.findall(r"^ARG UV_VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    dev = re.findall(r'^UV_VERSION = "(\S+)"$', (ROOT / "dev.py").read_text(), flags=re.MULTILINE)
    assert dev == [pinned], "dev.py and the Dockerfile pin different uv versions"
    return pinned


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pam from uv.lock, as the Dockerfile's build stage installs it (not editable, bytecode
    compiled), into a fresh environment."""
    uv = BIN / "uv"
    if not uv.exists():
        pytest.fail(f"no uv beside this Python ({uv}): run the tests with `python3 dev.py test`")
    found = subprocess.run([str(uv), "--version"], capture_output=True, text=True, check=True)
    assert found.stdout.split()[1] == uv_version_pinned(), found.stdout
    root = tmp_path_factory.mktemp("image")
    source = build_context(root / "src")
    prefix = root / "pam"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    env.update(
        UV_PROJECT_ENVIRONMENT=str(prefix),
        UV_PYTHON_DOWNLOADS="never",
        UV_COMPILE_BYTECODE="1",
        UV_LINK_MODE="copy",
    )
    progress("installing Pam from uv.lock as the Dockerfile does", "deploy")
    done = subprocess.run(
        [str(uv), "sync", "--locked", "--no-editable", "--python", sys.executable],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(source)  # the image has no source tree either
    return prefix


def image_env(prefix: Path, home: Path, database: str, **knobs: str) -> dict[str, str]:
    """The environment of a process started from the image (Pam installed at `prefix`, /opt/pam
    there; `home` its working directory, /home/pam there), with Pam's configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(NOT_INHERITED) and k not in NOT_INHERITED_NAMES
    }
    env["PATH"] = os.pathsep.join([str(prefix / "bin"), env.get("PATH", "")])
    env["HOME"] = str(home)
    env.update(IMAGE_ENV)
    env["DATABASE_URL"] = database
    env.update(knobs)
    return env


def argv(command: DeployCommand) -> list[str]:
    """How the platform runs it: Heroku hands Procfile lines and app.json scripts to bash;
    Fly and the Dockerfile's exec form run the words themselves."""
    return ["bash", "-c", command.shell] if command.shell is not None else list(command.argv)


def run(command: DeployCommand, env: dict[str, str], cwd: Path) -> str:
    """Run a command that ends by itself; its output, after checking it exited 0."""
    done = subprocess.run(
        argv(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=START * 2
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command.id} exited {done.returncode}:\n{output}"
    assert "Traceback" not in output, output
    return output


def migrate(env: dict[str, str], cwd: Path) -> None:
    run(DeployCommand("test", "release", argv=("pam", "db", "upgrade")), env, cwd)


def stop(group: Processes, process: Process) -> str:
    """Stop `process` as the platform does (SIGTERM), which it must survive cleanly; its log."""
    group.assert_alive()
    group.kill(process, signal.SIGTERM)
    code = process.popen.wait(timeout=START)
    log = process.log.read_text()
    assert code == 0, f"{process.name} exited {code} on SIGTERM:\n{process.tail()}"
    assert "Traceback" not in log, log
    return log


@pytest.fixture
def telegram() -> Iterator[TelegramServer]:
    with TelegramServer() as server:
        yield server


@pytest.fixture
def platform_env(
    installed: Path, tmp_path: Path, database: str, llm: OpenAIServer, telegram: TelegramServer
) -> dict[str, str]:
    """What an operator sets on Heroku or Fly for a Telegram bot, the fakes standing in for
    Telegram and the model."""
    return image_env(
        installed,
        tmp_path,
        database,
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=llm.base_url,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_URL=telegram.base_url,
        PAM_PUBLIC_URL=PUBLIC_URL,
        PAM_POLL_SECONDS="0.05",
    )


def test_the_install_is_the_image_s_own(installed: Path, tmp_path: Path) -> None:
    # Run from a working directory of its own, Pam comes from the install, no source tree.
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import webhooks; print(webhooks.__file__)"],
        cwd=tmp_path,
        env=image_env(installed, tmp_path, "sqlite://"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(installed), where.stdout
    compiled = list(installed.glob("lib/python3.*/site-packages/webhooks/__pycache__/*.pyc"))
    assert compiled, "UV_COMPILE_BYTECODE: Pam's modules are compiled at install"


def of_kind(kind: str) -> list[DeployCommand]:
    return [command for command in COMMANDS if command.kind == kind]


@pytest.mark.parametrize("command", of_kind("web"), ids=lambda c: c.id)
def test_a_web_command_answers_its_health_check(
    command: DeployCommand, tmp_path: Path, platform_env: dict[str, str]
) -> None:
    migrate(platform_env, tmp_path)
    port = free_port()
    with processes(tmp_path, "deploy") as group:
        web = group.start("web", argv(command), dict(platform_env, PORT=str(port)))
        wait_healthy(f"http://127.0.0.1:{port}", group, timeout=START)
        wait_for(lambda: "channels: " in web.tail(200), START, f"{command.id} to say its channels")
        log = stop(group, web)
    assert "channels: telegram on (POST /telegram/webhook)" in log
    assert '"GET /healthz HTTP/1.1" 200' in log


@pytest.mark.parametrize("command", of_kind("worker"), ids=lambda c: c.id)
def test_a_worker_command_answers_a_message_from_the_inbox(
    command: DeployCommand, tmp_path: Path, platform_env: dict[str, str], telegram: TelegramServer
) -> None:
    migrate(platform_env, tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The web that stores the message: the image's default process.
    (web_command,) = [c for c in COMMANDS if c.id == "Dockerfile:CMD"]
    with processes(tmp_path, "deploy") as group:
        web = group.start("web", argv(web_command), dict(platform_env, PORT=str(port)))
        worker = group.start("worker", argv(command), platform_env)
        wait_healthy(base, group, timeout=START)
        wait_for(lambda: "worker started" in worker.tail(200), START, f"{command.id} to start")
        lena = updates.learner("Lena")
        posted = requests.post(
            f"{base}/telegram/webhook",
            json=updates.text(lena, "Hola, me llamo Lena"),
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            timeout=10,
        )
        assert posted.status_code == 200, posted.text
        wait_for(lambda: bool(telegram.sent_texts(lena["id"])), START, "the worker's reply")
        log = stop(group, worker)
        stop(group, web)
    assert "channels: telegram on (POST /telegram/webhook)" in log
    assert TOKEN not in log and SECRET not in log


@pytest.mark.parametrize("command", of_kind("release"), ids=lambda c: c.id)
def test_a_release_command_migrates_and_registers_the_webhook(
    command: DeployCommand, tmp_path: Path, platform_env: dict[str, str], telegram: TelegramServer
) -> None:
    first = run(command, platform_env, tmp_path)  # a database nobody migrated yet
    again = run(command, platform_env, tmp_path)  # every later deploy

    assert "pam: applied " in first
    assert "pam: database is up to date (at " in again
    calls = telegram.of("setWebhook")
    assert [call.params["url"] for call in calls] == [f"{PUBLIC_URL}/telegram/webhook"] * 2
    assert all(call.params["secret_token"] == SECRET for call in calls)
    assert TOKEN not in first + again
