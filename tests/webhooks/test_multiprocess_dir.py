"""The gunicorn master's part of multiprocess metrics (webhooks/multiprocess.py): an empty
directory at each start, named for the workers it forks, and removed at exit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from webhooks import gunicorn_config, multiprocess


def test_each_start_gets_a_fresh_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, then unset: monkeypatch restores the variable as it was before (not the directory
    # `prepare` names in it, removed below), so no later test's subprocess inherits it.
    monkeypatch.setenv(multiprocess.VARIABLE, "")
    first = multiprocess.prepare()
    (first / "counter_123.db").write_bytes(b"old counts")
    monkeypatch.delenv(multiprocess.VARIABLE)

    gunicorn_config.on_starting(server=None)  # the next master start
    second = Path(os.environ[multiprocess.VARIABLE])

    assert second != first and second.is_dir() and not any(second.iterdir())
    gunicorn_config.on_exit(server=None)
    assert not second.exists()
    shutil.rmtree(first)


def test_an_operators_directory_is_emptied_not_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    given = tmp_path / "prometheus"
    given.mkdir()
    (given / "counter_99.db").write_bytes(b"a previous master's counts")
    (given / "keep.txt").write_text("not ours")
    monkeypatch.setenv(multiprocess.VARIABLE, str(given))

    assert multiprocess.prepare() == given

    assert sorted(p.name for p in given.iterdir()) == ["keep.txt"]
