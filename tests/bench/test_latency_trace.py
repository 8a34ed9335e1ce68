"""The trace benchmark: a tiny run on SQLite (every message answered, split at the fake
servers' stamps into parts that add up), and its table and options without a run. Benchmarks
report; tests time nothing."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import latency, latency_trace
from bench.latency_trace import PARTS, Options, parse_args, table


@pytest.mark.experiment
@pytest.mark.slow
def test_a_tiny_run_splits_every_message(tmp_path: Path) -> None:
    options = Options(messages=6, learners=2, gap=0.0, backends=("sqlite",), out=tmp_path)
    found = latency_trace.run(options, report=lambda line: None)
    assert json.loads((tmp_path / "latency_trace.json").read_text()) == json.loads(
        json.dumps(found)
    )
    floor, pam = found["configurations"].values()
    assert (floor["answered"], pam["answered"]) == ("6/6", "6/6")
    for message in floor["messages"] + pam["messages"]:
        parts = message["to_model"] + message["model"] + message["from_model"]
        assert parts == pytest.approx(message["total"], abs=0.01)
        assert all(message[part] >= 0 for part in PARTS)
    assert "| SQLite, pam serve, memory jobs off | 6/6 |" in found["table"]


def configuration(name: str, total: float | None) -> dict[str, Any]:
    parts = {} if total is None else dict.fromkeys(PARTS, 1.0) | {"total": total}
    return {"name": name, "answered": "0/1" if total is None else "1/1", "median_ms": parts}


def test_the_table_gives_pam_over_its_own_backends_floor() -> None:
    text = table(
        {
            "postgres-floor": configuration("floor (gunicorn, no Pam)", 5.0),
            "postgres-pam-jobs-off": configuration("Postgres, web + worker", 16.0),
            "sqlite-pam-jobs-off": configuration("SQLite, pam serve", None),
        }
    )
    rows = text.splitlines()[2:]
    assert rows[0].endswith("| 1.00× |")
    assert rows[1].startswith("| Postgres, web + worker | 1/1 | 16.00 | 1.00 |")
    assert rows[1].endswith("| 3.20× |")
    assert rows[2] == "| SQLite, pam serve | 0/1 | – | – | – | – | – | – |"


@pytest.mark.parametrize(
    "argv",
    [["--backends", "mysql"], ["--messages", "0"], ["--gap", "-1"], ["--backends", ""]],
)
def test_options_it_cannot_run_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2


def test_the_defaults_trace_postgres() -> None:
    assert parse_args([]) == Options()


def test_pam_runs_without_a_learners_daily_budget() -> None:
    """The benchmarks' learners write more in a day than the default budget holds: a trace of
    1,500 messages over 5 learners met the limit's notice, which carries no marker, and waited
    a minute for each reply after."""
    llm = SimpleNamespace(base_url="http://127.0.0.1:1/v1")
    tg = SimpleNamespace(base_url="http://127.0.0.1:2/bot")
    for jobs in (False, True):
        knobs = latency.pam_knobs(llm, tg, jobs)  # type: ignore[arg-type]
        assert knobs["PAM_LEARNER_DAILY_TOKENS"] == "0"
        assert knobs["PAM_RATE_LIMIT_PER_MINUTE"] == "0"
