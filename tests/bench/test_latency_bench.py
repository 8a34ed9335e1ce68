"""The latency benchmark in a tiny configuration (SQLite and its floor, 5 learners, 2 rounds):
every message answered exactly once, the configurations measured in interleaved blocks, the
report complete, the numbers there. Benchmarks report; tests do not time anything."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from bench import latency
from bench.latency_report import (
    COLUMNS,
    PhaseResult,
    log_breakdown,
    percentile,
    profile_summary,
)

# An acceptance experiment, no product claim: run with `python3 dev.py test -m experiment`.
pytestmark = [pytest.mark.experiment, pytest.mark.slow]

MESSAGES, LEARNERS, SATURATING, ROUNDS = 60, 5, 40, 2


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    options = latency.Options(
        messages=MESSAGES,
        learners=LEARNERS,
        rounds=ROUNDS,
        throughput_messages=SATURATING,
        think=(0.0, 0.1),
        backends=("sqlite",),
        out=out,
        plot=False,
    )
    result = latency.run(options, report=lambda line: None)
    assert json.loads((out / "latency.json").read_text()) == json.loads(json.dumps(result))
    return result


def test_every_configuration_is_measured(found: dict[str, Any]) -> None:
    slugs = [c["slug"] for c in found["configurations"]]
    assert slugs == ["sqlite-floor", "sqlite-pam-jobs-off", "sqlite-pam-jobs-on"]


def test_latency_blocks_alternate_between_configurations(found: dict[str, Any]) -> None:
    """Each configuration's latency messages came in ROUNDS blocks, one configuration at a
    time, round r starting with configuration r mod 3: block start times give the order."""
    assert found["options"]["rounds"] == str(ROUNDS)
    slugs = [c["slug"] for c in found["configurations"]]
    blocks = sorted(
        (started, finished, config["slug"])
        for config in found["configurations"]
        for started, finished in config["latency"]["blocks"]
    )
    rotated = [slug for r in range(ROUNDS) for slug in slugs[r % 3 :] + slugs[: r % 3]]
    assert [slug for _, _, slug in blocks] == rotated
    assert all(a[1] <= b[0] for a, b in pairwise(blocks)), "overlap"
    for config in found["configurations"]:
        assert len(config["throughput"]["blocks"]) == 1


def test_every_message_is_answered_exactly_once(found: dict[str, Any]) -> None:
    for config in found["configurations"]:
        for phase, count in (("latency", MESSAGES), ("throughput", SATURATING)):
            counts = config[phase]
            assert counts["sent"] == counts["answered_once"] == count, (config["slug"], phase)
            assert counts["answered_twice"] == counts["never_answered"] == 0
            assert counts["webhook_statuses"] == {"200": count}
        assert len(config["latency"]["latencies_ms"]) == MESSAGES
        assert config["llm_calls_served"]["reply"] >= MESSAGES + SATURATING
        assert config["unmarked_replies"] == 0


def test_the_numbers_are_there_and_positive(found: dict[str, Any]) -> None:
    for config in found["configurations"]:
        stats = config["latency"]
        assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["max_ms"]
        assert stats["latencies_ms"] == sorted(stats["latencies_ms"])
        assert config["throughput"]["replies_per_second"] > 0


def test_memory_jobs_run_only_when_switched_on(found: dict[str, Any]) -> None:
    off, on = found["configurations"][1:]
    assert "summary" not in off["llm_calls_served"]
    assert "profile" not in off["llm_calls_served"]
    assert on["llm_calls_served"]["summary"] > 0
    assert on["llm_calls_served"]["profile"] > 0


def test_pam_stages_are_read_from_its_logs(found: dict[str, Any]) -> None:
    for config in found["configurations"][1:]:
        stages = config["stages_ms"]
        assert {"web_accept", "turn", "send", "queued_before_turn"} <= set(stages)
        assert stages["turn"]["count"] >= MESSAGES


def test_the_table_has_every_column_and_a_verdict_per_target(found: dict[str, Any]) -> None:
    lines = found["table"].splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert len(lines) == 2 + 3
    assert all(line.count("|") == len(COLUMNS) + 1 for line in lines)
    assert set(found["verdicts"]) == {
        "sqlite-pam-jobs-off: p50 <= 3x floor p50",
        "sqlite-pam-jobs-on: p50 <= 3x floor p50",
        "sqlite: p95 jobs on <= 1.2x p95 jobs off",
    }
    assert set(found["verdicts"].values()) <= {"PASS", "FAIL"}


# -- the arithmetic, on made-up numbers ------------------------------------------------------


def test_percentiles_are_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.95) == 95
    assert percentile([], 0.5) == 0


def test_sustained_rate_leaves_out_ramp_up_and_tail() -> None:
    phase = PhaseResult(messages=100)
    for n in range(100):
        phase.sent[f"L1-M{n}"] = 0.0
        # a slow first and last tenth around a steady 10 replies per second
        at = n if n < 10 else 10 + (n - 10) * 0.1 if n < 90 else 18 + (n - 90)
        phase.arrivals[f"L1-M{n}"] = [at]
    assert phase.sustained_rate() == pytest.approx(10.0, rel=0.02)


def test_a_phase_in_blocks_counts_only_the_time_inside_them() -> None:
    first, second = PhaseResult(messages=50), PhaseResult(messages=50)
    for n in range(100):
        # 10 replies per second in two 5-second blocks 100 seconds apart
        block, at = (first, n * 0.1) if n < 50 else (second, 100 + (n - 50) * 0.1)
        block.sent[f"L1-M{n}"] = at
        block.arrivals[f"L1-M{n}"] = [at + 0.01]
    first.windows.append((0.0, 5.0))
    second.windows.append((100.0, 105.0))
    first.extend(second)
    assert first.messages == len(first.sent) == 100
    assert first.seconds() == 10.0
    assert first.sustained_rate() == pytest.approx(10.0, rel=0.02)


def test_rounds_is_an_option() -> None:
    assert latency.parse_args([]).rounds == latency.Options.rounds
    assert latency.parse_args(["--rounds", "3"]).rounds == 3
    with pytest.raises(SystemExit):
        latency.parse_args(["--rounds", "0"])


def test_log_breakdown_reads_each_stage(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text(
        "2026-01-01 10:00:00,000 INFO webhooks inbound accepted channel=telegram kind=text ms=3\n"
        "2026-01-01 10:00:00,100 INFO bot.worker inbound answered inbox=1 learner=1 "
        "channel=telegram replies=1 since_received_ms=40 turn_ms=30 attempt=1\n"
        "2026-01-01 10:00:00,200 INFO bot.worker reply delivered outbox=1 inbox=1 "
        "channel=telegram send_ms=5 attempt=1\n"
    )
    stages = log_breakdown({"web": log, "worker": log})
    assert stages["web_accept"]["p50"] == 3
    assert stages["turn"]["p50"] == 30
    assert stages["queued_before_turn"]["p50"] == 10
    assert stages["send"] == {"count": 1, "p50": 5, "p95": 5}


def test_profile_summary_attributes_samples_to_pam_code(tmp_path: Path) -> None:
    root = Path("/repo")
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "_lane (/repo/bot/worker/worker.py:240);answer_next (/repo/bot/worker/worker.py:70);"
        "execute (/venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py:1400) 3\n"
        "_lane (/repo/bot/worker/worker.py:240);dumps (/usr/lib/python3.11/json/__init__.py:231) "
        "1\n"
    )
    summary = profile_summary(raw, root)
    assert summary["samples"] == 4
    assert summary["top"][0] == {
        "where": "answer_next (bot/worker/worker.py) → sqlalchemy",
        "samples": 3,
        "share": 0.75,
    }
    assert summary["inclusive"][0]["where"] == "_lane (bot/worker/worker.py)"
    assert summary["inclusive"][0]["share"] == 1.0
    assert {row["where"] for row in summary["libraries"]} == {"sqlalchemy", "json"}
