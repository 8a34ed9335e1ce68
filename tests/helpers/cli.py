"""`pam` run in the test's own process, through click's CliRunner, as simonw/llm's tests run
theirs: an error path or a one-shot command costs no interpreter start (a `pam` subprocess
loads Pam's modules anew each time). It runs the console script's own entry point
(`webhooks.cli.main`: the `.env` file, then the command), in `cwd`, with exactly `env` as the
environment, and puts back afterwards what a command changes for the whole process: the
environment, the working directory, the logging it configured on its stdout or stderr, the
SIGTERM and SIGINT handlers of the long-running commands; the CPU priority that `pam
memory-jobs` lowers is left alone. One real subprocess per long-running command still proves
that the installed `pam` starts (tests/webhooks/test_cli.py, tests/system/)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from unittest import mock

from click.testing import CliRunner

from bot import logs
from webhooks import cli, services


@contextlib.contextmanager
def process_state_kept() -> Iterator[None]:
    """Whatever a `pam` command changes process-wide is as before when the block ends."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {name: logging.getLogger(name).level for name in logs.QUIET}
    signals = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    cwd = Path.cwd()
    try:
        with mock.patch.dict(os.environ):
            yield
    finally:
        os.chdir(cwd)
        for sig, handler in signals.items():
            signal.signal(sig, handler)
        for handler in root.handlers:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
        for name, quiet_level in quiet.items():
            logging.getLogger(name).setLevel(quiet_level)


def run_pam(
    *args: str, cwd: Path, env: Mapping[str, str], stdin: bytes = b""
) -> tuple[int, str, str]:
    """`pam ARGS` run to its end in this process: exit status, stdout, stderr."""
    runner = CliRunner()
    # `pam memory-jobs` lowers its CPU priority (os.nice) before it opens the database: here
    # that would slow every test after it, for good.
    unlowered = mock.patch.object(services, "lower_priority", return_value=None)
    with process_state_kept(), unlowered:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        with runner.isolation(input=stdin) as (out, err, _):
            try:
                cli.main(list(args))
                code = 0
            except SystemExit as exited:
                code = exited.code if isinstance(exited.code, int) else 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
    return code, out.getvalue().decode(), err.getvalue().decode()
