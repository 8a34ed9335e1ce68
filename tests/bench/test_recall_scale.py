"""The recall scale benchmark, run small: it loads, searches, forgets and reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import recall_scale

# An acceptance experiment, no product claim: run with `python3 dev.py test -m experiment`.
pytestmark = pytest.mark.experiment


def test_a_small_run_reports_every_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = recall_scale.main(
        [
            "--backends",
            "sqlite",
            "--stages",
            "1000,2000",
            "--searches",
            "30",
            "--out",
            str(tmp_path),
        ]
    )

    result = json.loads((tmp_path / "recall_scale.json").read_text())
    assert status == (0 if result["passed"] else 1)
    rows = result["rows"]
    assert [(r["backend"], r["messages"]) for r in rows] == [("sqlite", 1000), ("sqlite", 2000)]
    for row in rows:
        assert row["searches"] == 30 and row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert 0 < row["found_share"] <= 1
        assert row["forget_ms"] > 0
    # One learner forgotten at each stage: their 100 entries are gone from the index.
    assert rows[-1]["entries"] == 2000 - 2 * recall_scale.PER_LEARNER
    out = capsys.readouterr().out
    assert "sqlite: loading up to 2,000 messages" in out and "p95 ms" in out


def test_per_learner_gives_each_learner_that_many_messages(tmp_path: Path) -> None:
    """`--per-learner` (a learner-month is 600): the stage's messages over fewer learners."""
    args = ["--backends", "sqlite", "--stages", "1500", "--searches", "5", "--per-learner", "500"]
    recall_scale.main([*args, "--out", str(tmp_path)])
    result = json.loads((tmp_path / "recall_scale.json").read_text())
    assert result["per_learner"] == 500
    [row] = result["rows"]
    assert (row["learners"], row["messages"]) == (3, 1500)
    assert row["entries"] == 1500 - 500  # one learner forgotten
