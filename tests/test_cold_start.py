"""Cold starts: every install leaves bytecode behind (dev.py's .venv and Pam's own source,
Heroku's post_compile hook), so a start with PYTHONDONTWRITEBYTECODE set compiles nothing;
`pam --help` loads none of the heavy machinery; and a worker loads the chart renderer at start,
beside its lanes, so that the first /progress does not wait for it, while the web process never
loads it (tests/bot/test_progress.py: the learner's next message does not wait for a chart)."""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loopback.harness import (
    PAM_CMD,
    processes,
    service_env,
    sqlite_url,
    wait_for,
)
from tests.support import migrate

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ("bot", "memory", "webhooks", "prompts")  # what a deployment imports of Pam's own
# What `pam --help` must not load: each is hundreds of modules to compile without a cache.
HEAVY = (
    "sqlalchemy",
    "alembic",
    "pydantic",
    "openai",
    "telegram",
    "twilio",
    "flask",
    "matplotlib",
    "numpy",
    "apscheduler",
)


def uncompiled(folder: Path) -> list[Path]:
    """The modules under `folder` with no current .pyc (missing, or older than the source)."""
    missing = []
    for source in folder.rglob("*.py"):
        compiled = Path(importlib.util.cache_from_source(str(source)))
        if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
            missing.append(source)
    return missing


def load_dev() -> object:
    """dev.py as a module (it is a script at the top of the clone, not a package)."""
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_py_installs_with_bytecode_and_compiles_pams_own_source() -> None:
    dev = load_dev()
    assert "--compile-bytecode" in dev.SYNC  # type: ignore[attr-defined]
    dev.compile_source()  # type: ignore[attr-defined]
    for package in ("bot", "memory", "webhooks", "prompts", "loopback", "bench", "tests"):
        assert uncompiled(ROOT / package) == [], package


def test_dev_py_venv_holds_the_dependencies_bytecode() -> None:
    stamp = Path(sys.prefix) / ".pam-installed"
    if not stamp.exists():
        pytest.skip("this environment was not installed by dev.py")
    for name in ("click", "sqlalchemy", "matplotlib.figure", "openai", "telegram"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        assert Path(importlib.util.cache_from_source(spec.origin)).exists(), name


def test_herokus_post_compile_hook_compiles_pams_modules(tmp_path: Path) -> None:
    for package in RUNTIME:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(ROOT / "bin", tmp_path / "bin")
    assert uncompiled(tmp_path / "bot")
    # As the buildpack runs it: from the app's folder, with its Python first on PATH.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", "bin/post_compile"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for package in RUNTIME:
        assert uncompiled(tmp_path / package) == [], package


def test_pam_help_loads_no_heavy_machinery() -> None:
    probe = (
        "import sys\n"
        "from webhooks import cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: pam" in done.stdout
    assert "LOADED []" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_worker_loads_the_chart_renderer_at_start(tmp_path: Path) -> None:
    env = service_env(
        sqlite_url(tmp_path),
        OPENAI_API_KEY="test",
        # Nothing listens there: this worker answers no message, it only starts.
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        MPLCONFIGDIR=str(tmp_path / "matplotlib"),  # a fresh font list, as in a new container
    )
    migrate(env["DATABASE_URL"])
    with processes(tmp_path) as group:
        worker = group.start("worker", [*PAM_CMD, "worker"], env)
        wait_for(lambda: "chart renderer ready" in worker.tail(), 120, "the renderer to load")
        group.assert_alive()
    assert "render_ms=" not in worker.tail()  # loaded before, and without, any /progress


@pytest.mark.slow
def test_a_worker_stopped_while_it_loads_the_renderer_exits_cleanly(tmp_path: Path) -> None:
    # SIGTERM while the warm-up draws inside matplotlib's C++ code: the exit waits for it,
    # rather than ending the interpreter under it (an abort, status -6, in CI once).
    env = service_env(
        sqlite_url(tmp_path),
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        MPLCONFIGDIR=str(tmp_path / "matplotlib"),  # a fresh font list: a slow warm-up
    )
    migrate(env["DATABASE_URL"])
    with processes(tmp_path) as group:
        worker = group.start("worker", [*PAM_CMD, "worker"], env)
        wait_for(lambda: "worker started" in worker.tail(), 120, "the worker to start")
        worker.popen.send_signal(signal.SIGTERM)
        code = worker.popen.wait(timeout=120)
    assert code == 0, worker.tail()
    assert "terminate called" not in worker.tail()


def test_the_web_process_never_loads_the_chart_renderer(tmp_path: Path) -> None:
    env = service_env(sqlite_url(tmp_path))
    migrate(env["DATABASE_URL"])
    probe = (
        "import sys\n"
        "from webhooks.app import create_app\n"
        "status = create_app().test_client().get('/healthz').status_code\n"
        "print('HEALTHZ', status, sorted(m for m in ('matplotlib', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "HEALTHZ 200 []" in done.stdout, done.stdout + done.stderr
