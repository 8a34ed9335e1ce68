#!/usr/bin/env python3
"""Zero-setup entry point for a fresh clone; needs only Python 3.11+.

    python3 dev.py chat [--user NAME]   talk to Pam in the terminal (SQLite in this folder)
    python3 dev.py test [PYTEST ARGS]   run the test suite (no args: as CI does, the tests
                                        marked `serial` alone, then the rest on every CPU;
                                        with args: pytest ARGS, e.g. `-m experiment`)
    python3 dev.py bench NAME [ARGS]    run a benchmark: tokens, latency, latency_trace, faults,
                                        recall_quality, recall_scale, progress_chart, voice,
                                        memory, storage, cold_start, write_paths, checkins or
                                        local_model (bench/;
                                        local_model needs `--setup` once)
    python3 dev.py docs [serve|build]   the docs site (docs/, mkdocs.yml): serve it at
                                        http://127.0.0.1:8000, or build it into site/
    python3 dev.py i18n                 bring Pam's message catalogs (bot/i18n/locales/) in line
                                        with the code: new texts added for translators
    python3 dev.py lock [--upgrade]     update uv.lock to pyproject.toml (--upgrade: every
                                        pin to its newest allowed version)
    python3 dev.py <pam arguments>      any other `pam` command, e.g. `db upgrade`

The first run creates .venv/ and installs Pam into it, with exactly the versions (and hashes)
in uv.lock; later runs reinstall only when pyproject.toml or uv.lock changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".pam-installed"
UV = BIN / ("uv.exe" if os.name == "nt" else "uv")
# The uv that installs from uv.lock (the Dockerfile uses the same one).
UV_VERSION = "0.13.9"
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken-cache"
# How .venv is installed from uv.lock. --locked: fail instead of resolving anew when uv.lock no
# longer matches pyproject.toml; --inexact: leave what else is in .venv (uv itself, pip) alone;
# --compile-bytecode: every installed module's .pyc now, as the Dockerfile's UV_COMPILE_BYTECODE
# does: with PYTHONDONTWRITEBYTECODE set (containers, CI) Python would otherwise compile them
# all again on every start (`pam --help` took seconds of CPU, each test's `pam` subprocess too).
SYNC = ("sync", "--locked", "--extra", "dev", "--inexact", "--compile-bytecode", "--quiet")
# Pam's own packages, installed editable (so not compiled by uv): compiled by compile_source().
SOURCE = ("bot", "memory", "webhooks", "prompts", "loopback", "bench", "tests")


def ensure_uv() -> None:
    """Create .venv if needed and install uv into it (pip, from PyPI), at UV_VERSION."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs before anything is installed
        sys.exit(f"Pam needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not PYTHON.exists():
        print("Setting up Pam in .venv (first run only, takes a minute)...", file=sys.stderr)
        try:
            venv.create(VENV, with_pip=True)
        except Exception as exc:  # e.g. Debian without python3-venv
            sys.exit(f"Could not create .venv ({exc}). On Debian/Ubuntu: apt install python3-venv")
    if UV.exists():
        found = subprocess.run([str(UV), "--version"], capture_output=True, text=True).stdout
        if found.split()[1:2] == [UV_VERSION]:
            return
    install = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if subprocess.call([*install, f"uv=={UV_VERSION}"]) != 0:
        sys.exit("Installing uv into .venv failed; see the pip output above.")


def uv_environ() -> dict[str, str]:
    """The environment for uv: this .venv, and never a Python of uv's own."""
    return dict(os.environ, UV_PROJECT_ENVIRONMENT=str(VENV), UV_PYTHON_DOWNLOADS="never")


def ensure_environment() -> None:
    """Create .venv and install Pam with its test tools from uv.lock, unless up to date."""
    inputs = (ROOT / "pyproject.toml").read_bytes() + (ROOT / "uv.lock").read_bytes()
    # The install's options too: a .venv installed without one of them is installed again.
    inputs += " ".join(SYNC).encode()
    wanted = hashlib.sha256(inputs).hexdigest()
    if PYTHON.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return
    if PYTHON.exists():
        print("Updating Pam's dependencies in .venv...", file=sys.stderr)
    ensure_uv()
    sync = [str(UV), *SYNC]
    if subprocess.call(sync, cwd=ROOT, env=uv_environ()) != 0:
        sys.exit(
            "Installing Pam's dependencies from uv.lock failed; see uv's output above. If it "
            "says the lockfile needs to be updated, pyproject.toml changed: run "
            "`python3 dev.py lock` and commit uv.lock."
        )
    STAMP.write_text(wanted)


def compile_source() -> None:
    """Compile Pam's own modules to .pyc (in their __pycache__/, which git ignores) where they
    changed since: uv compiles what it installs, but Pam itself is installed editable, its
    source read from this folder. A no-op when nothing changed (a stat per file)."""
    folders = [str(ROOT / name) for name in SOURCE if (ROOT / name).is_dir()]
    # -q: quiet unless a file does not compile; that file's error then shows when it is run.
    subprocess.call([str(PYTHON), "-m", "compileall", "-q", *folders], stdout=subprocess.DEVNULL)


def lock(args: list[str]) -> int:
    """`uv lock` for this project: uv.lock follows pyproject.toml (`--upgrade`: and every pin
    moves to the newest version allowed), for all platforms and Python 3.11+ at once."""
    ensure_uv()
    return subprocess.call([str(UV), "lock", *args], cwd=ROOT, env=uv_environ())


def run_suite(env: dict[str, str]) -> int:
    """`python3 dev.py test` alone, in two pytest runs: first the tests marked `serial`, one
    at a time, since they need the database server to themselves (one restarts Postgres);
    then all the others on every CPU, with pytest-xdist (each worker a session of its own:
    its own Postgres schema and SQLite template). The experiments stay out of both (see the
    markers in pyproject.toml). Non-zero when either run fails; the big run's summary is the
    last thing pytest prints."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    runs = {
        "serial": ["-m", "serial and not experiment"],
        # --dist loadfile: each test module goes whole to the next free worker, so that a
        # module's costly fixture (a benchmark's run, an install of Pam) runs once.
        "parallel": [
            *("-m", "not serial and not experiment"),
            *("-n", str(cpus or 1), "--dist", "loadfile"),
        ],
    }
    failed = []
    for name, args in runs.items():
        code = subprocess.call([str(PYTHON), "-m", "pytest", *args], cwd=ROOT, env=env)
        # 5: no test selected, which the serial run may find (no Postgres, say), not the other.
        if code != 0 and not (name == "serial" and code == 5):
            failed.append(f"the {name} run (exit status {code})")
    if failed:
        print(f"dev.py test: {' and '.join(failed)} failed", file=sys.stderr)
        return 1
    return 0


def _is_bench(path: Path) -> bool:
    """A runnable benchmark: a bench/ module with a `__main__` block."""
    return 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    """Run the dev.py command in `argv`; its exit status."""
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "lock":
        return lock(argv[1:])
    ensure_environment()
    compile_source()
    env = dict(os.environ)
    if "TIKTOKEN_CACHE_DIR" not in env and SHARED_TIKTOKEN.is_dir():
        env["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)
    if argv == ["test"]:
        try:
            return run_suite(env)
        except KeyboardInterrupt:
            return 130
    if argv[0] == "test":
        command = [str(PYTHON), "-m", "pytest", *argv[1:]]
    elif argv[0] == "bench":
        benches = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if _is_bench(p))
        if len(argv) < 2 or argv[1] not in benches:
            print(f"usage: python3 dev.py bench {{{','.join(benches)}}} [--help]", file=sys.stderr)
            return 2
        command = [str(PYTHON), "-m", f"bench.{argv[1]}", *argv[2:]]
    elif argv[0] == "docs":
        if len(argv) < 2 or argv[1] not in {"serve", "build"}:
            print("usage: python3 dev.py docs {serve,build} [mkdocs options]", file=sys.stderr)
            return 2
        command = [str(PYTHON), "-m", "mkdocs", *argv[1:]]
        env["NO_MKDOCS_2_WARNING"] = "1"
    elif argv[0] == "i18n":
        update = "from bot.i18n.catalogs import update_catalogs; from bot.i18n import LOCALES; "
        update += "print(*update_catalogs(LOCALES), sep='\\n')"
        command = [str(PYTHON), "-c", update]
    else:
        command = [str(BIN / "pam"), *argv]
    try:
        in_repo = argv[0] in {"test", "bench", "docs", "i18n"}
        return subprocess.call(command, cwd=ROOT if in_repo else None, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
