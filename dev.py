#!/usr/bin/env python3
"""Zero-setup entry point for a fresh clone; needs only Python 3.11+.

    python3 dev.py chat [--user NAME]   talk to Pam in the terminal (SQLite in this folder)
    python3 dev.py test [PYTEST ARGS]   run the test suite
    python3 dev.py bench NAME [ARGS]    run a benchmark: tokens, latency or faults (bench/)
    python3 dev.py <pam arguments>      any other `pam` command, e.g. `db upgrade`

The first run creates .venv/ and installs Pam into it; later runs reinstall only when
pyproject.toml changes.
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
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken-cache"


def ensure_environment() -> None:
    """Create .venv and install Pam with its test tools, unless already up to date."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs before anything is installed
        sys.exit(f"Pam needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if PYTHON.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PYTHON.exists():
        print("Setting up Pam in .venv (first run only, takes a minute)...", file=sys.stderr)
        try:
            venv.create(VENV, with_pip=True)
        except Exception as exc:  # e.g. Debian without python3-venv
            sys.exit(f"Could not create .venv ({exc}). On Debian/Ubuntu: apt install python3-venv")
    else:
        print("Updating Pam's dependencies in .venv...", file=sys.stderr)
    install = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if subprocess.call([*install, "-e", f"{ROOT}[dev]"]) != 0:
        sys.exit("Installing Pam's dependencies failed; see the pip output above.")
    STAMP.write_text(wanted)


def _is_bench(path: Path) -> bool:
    """A runnable benchmark: a bench/ module with a `__main__` block."""
    return 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv else 2
    ensure_environment()
    env = dict(os.environ)
    if "TIKTOKEN_CACHE_DIR" not in env and SHARED_TIKTOKEN.is_dir():
        env["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)
    if argv[0] == "test":
        command = [str(PYTHON), "-m", "pytest", *argv[1:]]
    elif argv[0] == "bench":
        benches = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if _is_bench(p))
        if len(argv) < 2 or argv[1] not in benches:
            print(f"usage: python3 dev.py bench {{{','.join(benches)}}} [--help]", file=sys.stderr)
            return 2
        command = [str(PYTHON), "-m", f"bench.{argv[1]}", *argv[2:]]
    else:
        command = [str(BIN / "pam"), *argv]
    try:
        in_repo = argv[0] in {"test", "bench"}
        return subprocess.call(command, cwd=ROOT if in_repo else None, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
