"""The storage benchmark, run small: a month of chat through the worker's lanes on each
backend, sized before and after retention, and a learner forgotten without a trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import storage
from tests.conftest import PG_URL

# An acceptance experiment, no product claim: run with `python3 dev.py test -m experiment`.
pytestmark = pytest.mark.experiment


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_small_month_is_sized_before_and_after_retention(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if backend == "postgres" and not PG_URL:
        pytest.skip("PAM_TEST_DATABASE_URL is not set")
    argv = ["--learners", "3", "--messages", "40", "--backends", backend, "--out", str(tmp_path)]
    assert storage.main([*argv, "--database-url", PG_URL or storage.DEFAULT_DATABASE]) == 0

    result = json.loads((tmp_path / "storage.json").read_text())
    raw, figures = result["raw"][backend], result["results"][backend]
    assert raw["month_rows"]["messages"] == 3 * 2 * 40  # each message and its reply
    # Retention kept each learner's unfolded tail and what recall finds, and rolled up usage.
    assert 0 < raw["after_rows"]["messages"] < raw["month_rows"]["messages"]
    assert raw["after_rows"]["recall_entries"] == raw["month_rows"]["recall_entries"] > 0
    assert raw["after_rows"]["llm_usage"] < raw["month_rows"]["llm_usage"]
    assert raw["after_rows"]["inbox"] == raw["after_rows"]["outbox"] == 0
    assert not any(raw["forgotten_rows_left"].values())
    assert sum(figures["after"].values()) < sum(figures["before"].values())
    assert 0 < figures["learners_per_1gb"] < figures["learners_per_10gb"]
    assert (tmp_path / "storage.png").stat().st_size > 0
    assert "| **all** |" in capsys.readouterr().out
