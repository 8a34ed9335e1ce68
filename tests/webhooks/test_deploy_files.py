"""The deploy files agree with each other and with webhooks/gunicorn_config.py: one web
command everywhere (the harness's too), its settings read from the platform's environment,
proxy trust left to the app, and a Fly kill_timeout longer than Pam's shutdown wait.
tests/system/test_deploy_commands.py starts each command from a clean install."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from loopback import harness
from loopback.harness import ROOT
from tests.helpers.deploy_files import KINDS, deploy_commands, fly_config
from webhooks import gunicorn_config
from webhooks.settings import Settings

WEB = ("gunicorn", "-c", harness.WEB_CONFIG, harness.WEB_APP)
# Fly's kill_timeout must leave the worker time to stop after its shutdown wait.
KILL_MARGIN_SECONDS = 10
HEROKU_KILL_SECONDS = 30
HEROKU_MARGIN_SECONDS = 5


def web_commands() -> Iterator[tuple[str, ...]]:
    for command in deploy_commands():
        if command.kind == "web":
            yield command.words


def test_every_deploy_command_is_one_the_start_tests_know_how_to_check() -> None:
    names = {command.id: command.name for command in deploy_commands()}
    assert {"Procfile:web", "Procfile:worker", "Procfile:release"} <= names.keys()
    assert {"fly.toml:web", "fly.toml:worker", "fly.toml:release_command"} <= names.keys()
    assert "Dockerfile:CMD" in names
    unknown = {id_ for id_, name in names.items() if name not in KINDS}
    assert not unknown, f"say in tests/helpers/deploy_files.py KINDS what {unknown} are"


def test_every_web_command_is_the_same_short_one() -> None:
    commands = list(web_commands())
    assert len(commands) == 3  # the Procfile's, fly.toml's and the Dockerfile's CMD
    assert all(words == WEB for words in commands), commands


def test_the_harness_runs_the_web_command_the_deploy_files_name() -> None:
    argv = harness.gunicorn(8000, workers=1, threads=2)
    # Only where it listens and how many it runs differ (flags override the config module).
    overrides = ["--bind", "127.0.0.1:8000", "--workers", "1", "--threads", "2"]
    words = [word for word in argv[len(harness.GUNICORN) :] if word not in overrides]
    assert ("gunicorn", *words) == WEB


def test_every_web_command_leaves_proxy_trust_to_the_app() -> None:
    # gunicorn on its own trusts X-Forwarded-* from loopback; the app follows PAM_PROXY_HOPS
    # alone (tests/webhooks/test_proxy.py proves it through this config).
    assert gunicorn_config.forwarded_allow_ips == ""
    for words in web_commands():
        assert not any(word.startswith("--forwarded-allow-ips") for word in words)


@pytest.mark.parametrize(
    ("environ", "bind", "workers"),
    [
        ({}, "0.0.0.0:8080", 2),  # Fly (internal_port 8080) and `docker run`
        ({"PORT": "5123", "WEB_CONCURRENCY": "3"}, "0.0.0.0:5123", 3),  # Heroku
        ({"PORT": " ", "WEB_CONCURRENCY": ""}, "0.0.0.0:8080", 2),
    ],
)
def test_the_web_listens_where_the_platform_says(
    environ: dict[str, str], bind: str, workers: int
) -> None:
    assert gunicorn_config.bind_address(environ) == bind
    assert gunicorn_config.worker_count(environ) == workers


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"PORT": "http"}, "PORT='http' is not a whole number from 1 to 65535"),
        ({"PORT": "70000"}, "PORT='70000'"),
        ({"WEB_CONCURRENCY": "0"}, "WEB_CONCURRENCY='0' is not a whole number from 1 to 64"),
    ],
)
def test_a_port_or_worker_count_that_is_no_number_stops_the_web_saying_so(
    environ: dict[str, str], said: str
) -> None:
    with pytest.raises(SystemExit, match=said):
        gunicorn_config.bind_address(environ)
        gunicorn_config.worker_count(environ)


def test_fly_waits_for_the_worker_to_finish_its_turns() -> None:
    config = fly_config()
    env = config.get("env", {})
    assert isinstance(env, dict)
    default = Settings().service.shutdown_wait_seconds
    wait = float(env.get("PAM_SHUTDOWN_WAIT_SECONDS", default))
    assert isinstance(config["kill_timeout"], int)
    assert config["kill_timeout"] >= wait + KILL_MARGIN_SECONDS
    # Fly's default is SIGINT, which gunicorn takes as "stop now"; SIGTERM lets it finish.
    assert config["kill_signal"] == "SIGTERM"


def test_the_release_phase_is_the_same_on_heroku_and_fly() -> None:
    releases = {c.id: c.words for c in deploy_commands() if c.kind == "release"}
    assert (
        releases["Procfile:release"]
        == releases["fly.toml:release_command"]
        == (
            "pam",
            "release",
        )
    )


def test_on_fly_the_web_listens_where_fly_sends_requests() -> None:
    # Fly sets no $PORT: the web's default port is fly.toml's internal_port.
    service = fly_config()["http_service"]
    assert isinstance(service, dict)
    assert gunicorn_config.bind_address({}) == f"0.0.0.0:{service['internal_port']}"
    assert service["processes"] == ["web"]


def test_heroku_waits_for_the_worker_within_its_30_seconds() -> None:
    # Heroku sends SIGTERM and kills the dyno 30 s later, whatever the app asks for.
    env = json.loads((ROOT / "app.json").read_text())["env"]
    wait = float(env["PAM_SHUTDOWN_WAIT_SECONDS"]["value"])
    assert wait + HEROKU_MARGIN_SECONDS <= HEROKU_KILL_SECONDS
