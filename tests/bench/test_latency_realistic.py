"""The realistic mode of the latency benchmark, piece by piece and fast: the model's delay
distribution, the delayed fake model's bookkeeping, the fake Telegram's delay after its stamp,
Pam's overhead per message, the verdicts, the table, the plot and the options. The whole run
is `dev.py bench latency --realistic --quick`; benchmarks report, tests time nothing."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from bench import latency_realistic as realistic
from bench.latency_learners import autovacuum, warn_without_autovacuum
from bench.latency_report import (
    PhaseResult,
    lognormal_sigma,
    percentile,
    plot_minutes,
    plot_scaling,
)
from bench.latency_servers import DelayedLLM, StopwatchTelegram
from loopback import telegram_server
from tests.support import wait_until


def test_the_model_delay_has_the_issues_median_and_95th_percentile() -> None:
    sigma = lognormal_sigma(1.5, 5.0)
    assert sigma == pytest.approx(0.732, abs=0.001)
    assert realistic.Options().model_mean() == pytest.approx(1.96, abs=0.01)
    with DelayedLLM(1.5, 5.0, seed=7) as llm, DelayedLLM(1.5, 5.0, seed=7) as again:
        delays = [llm.rng.lognormvariate(llm.mu, llm.sigma) for _ in range(20_000)]
        assert [again.rng.lognormvariate(again.mu, again.sigma) for _ in range(5)] == delays[:5]
    assert percentile(delays, 0.50) == pytest.approx(1.5, rel=0.05)
    assert percentile(delays, 0.95) == pytest.approx(5.0, rel=0.06)


def reply_request(marker: str) -> dict[str, Any]:
    return {
        "model": "fake",
        "messages": [
            {"role": "system", "content": "# Task: reply\nBe Pam."},
            {"role": "user", "content": f"Hola, soy {marker}"},
        ],
    }


def test_the_delayed_model_keeps_each_markers_wait_and_its_calls_in_flight() -> None:
    with DelayedLLM(0.01, 0.02, seed=3) as llm, requests.Session() as http:
        for marker in ("L001-M01", "L002-M01", "L001-M01"):
            answer = http.post(
                f"{llm.base_url}/chat/completions", json=reply_request(marker), timeout=10
            )
            assert answer.status_code == 200
            assert marker in answer.json()["choices"][0]["message"]["content"]
        origin = llm.base_url.removesuffix("/v1")
        stats = http.get(f"{origin}/stats", timeout=10).json()
        flight = http.get(f"{origin}/flight", timeout=10).json()
    # What the sampler reads twice a second: the counts alone, not a wait per message.
    assert set(flight) == {
        "in_flight",
        "most_in_flight",
        "busy_seconds",
        "replies_in_flight",
        "most_replies_in_flight",
        "replies_busy_seconds",
    }
    assert flight == {k: stats[k] for k in flight}
    assert stats["served"] == {"reply": 3}
    assert set(stats["waited"]) == {"L001-M01", "L002-M01"}
    assert stats["waited"]["L001-M01"] > stats["waited"]["L002-M01"] > 0  # two calls, one
    assert stats["in_flight"] == 0 and stats["most_in_flight"] >= 1
    assert stats["busy_seconds"] >= sum(stats["waited"].values())
    # Every call here was a reply's: a turn's calls and all calls are the same.
    assert stats["replies_in_flight"] == 0 and stats["most_replies_in_flight"] >= 1
    assert stats["replies_busy_seconds"] >= sum(stats["waited"].values())


def test_the_delayed_model_counts_a_memory_jobs_call_in_flight_but_not_as_a_turn() -> None:
    summary = {"model": "fake", "messages": [{"role": "system", "content": "# Task: summary"}]}
    with DelayedLLM(0.2, 0.3, seed=3) as llm, requests.Session() as http:
        calls = [
            threading.Thread(
                target=requests.post,
                args=(f"{llm.base_url}/chat/completions",),
                kwargs={"json": body, "timeout": 10},
            )
            for body in (summary, reply_request("L001-M01"))
        ]
        for call in calls:
            call.start()
        for call in calls:
            call.join()
        stats = http.get(f"{llm.base_url.removesuffix('/v1')}/stats", timeout=10).json()
    assert stats["most_in_flight"] == 2  # both waited side by side
    assert stats["most_replies_in_flight"] == 1
    assert stats["busy_seconds"] > stats["replies_busy_seconds"] > 0


def test_fake_telegram_stamps_a_reply_before_it_keeps_the_sender_waiting() -> None:
    with StopwatchTelegram(delay=0.05) as tg, requests.Session() as http:
        arrived = tg.expect("L001-M01")
        http.post(
            f"{tg.base_url}{telegram_server.TOKEN}/sendMessage",
            json={"chat_id": 1, "text": "¡Hola! L001-M01"},
            timeout=10,
        )
        answered = time.time()
        assert arrived.is_set()
        assert tg.arrivals["L001-M01"][0] <= answered - 0.05


def calls_on_one_connection(server: Any, path: str, body: dict[str, Any], calls: int) -> int:
    """How many connections `calls` POSTs of `body` to `server` took, answers read in full."""
    origin = urlsplit(server.origin)
    connection = http.client.HTTPConnection(origin.hostname, origin.port, timeout=10)
    sockets: list[object] = []  # held, so that no two are ever at one address
    try:
        for _ in range(calls):
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            if not any(connection.sock is seen for seen in sockets):
                sockets.append(connection.sock)
            answer = connection.getresponse()
            assert answer.status == 200
            answer.read()
    finally:
        connection.close()
    return len(sockets)


def test_the_realistic_fakes_keep_a_connection_open_and_the_zero_latency_ones_do_not() -> None:
    # OpenAI's API and api.telegram.org keep a client's connection open (HTTP/1.1); a fake
    # that closed it after each call charged Pam a TCP connection per model call and send.
    with DelayedLLM(0.001, 0.002, seed=3) as llm:
        assert calls_on_one_connection(llm, "/v1/chat/completions", reply_request("L1"), 3) == 1
    send = {"chat_id": 1, "text": "¡Hola! L001-M01"}
    path = f"/bot{telegram_server.TOKEN}/sendMessage"
    with StopwatchTelegram(keep_alive=True) as kept, StopwatchTelegram() as closed:
        assert calls_on_one_connection(kept, path, send, 3) == 1
        assert calls_on_one_connection(closed, path, send, 3) == 3
        assert closed.arrivals["L001-M01"] and kept.arrivals["L001-M01"]


def phase_of(latencies: dict[str, float]) -> PhaseResult:
    phase = PhaseResult(messages=len(latencies))
    for n, (marker, seconds) in enumerate(latencies.items()):
        phase.sent[marker] = 1000.0 + n
        phase.arrivals[marker] = [1000.0 + n + seconds] if seconds >= 0 else []
    phase.windows.append((1000.0, 1000.0 + len(latencies) + 10))
    return phase


def test_pams_overhead_is_each_replys_latency_less_its_model_time() -> None:
    phase = phase_of({"L001-M01": 2.0, "L002-M01": 0.5, "L003-M01": -1})  # the third unanswered
    found = realistic.overheads(phase, {"L001-M01": 1.96, "L002-M01": 0.47})
    assert [round(v, 3) for v in found] == [0.04, 0.03]


def test_a_point_reports_the_models_own_time_beside_pams_overhead() -> None:
    phase = phase_of({"L001-M01": 2.0, "L002-M01": 0.5, "L003-M01": 6.0})
    after = {
        "busy_seconds": 8.0,
        "most_in_flight": 3,
        "replies_busy_seconds": 8.0,
        "most_replies_in_flight": 3,
        "waited": {"L001-M01": 1.96, "L002-M01": 0.47, "L003-M01": 5.9},
    }
    before = {"busy_seconds": 0.0, "replies_busy_seconds": 0.0}
    point = realistic.Point(3, 1, (2.0, 6.0))
    found = realistic.point_result(point, phase, before, after, realistic.Samples())
    assert found["model_ms"] == {"p50": 1960.0, "p95": 5900.0}
    assert found["overhead_ms"]["p50"] == 40.0


def test_a_point_says_how_often_the_memory_jobs_ran_for_the_learners_messages() -> None:
    before = {"fold": 10, "profile": 4, "learner_messages": 100}
    after = {"fold": 40, "profile": 44, "review": 7, "learner_messages": 300}
    assert realistic.job_cadence(before, after) == {
        "runs": {"fold": 30, "profile": 40, "review": 7},
        "learner_messages": 200,
        "messages_per_run": {"fold": 6.7, "profile": 5.0},
    }
    assert realistic.job_cadence({}, {"learner_messages": 0})["messages_per_run"] == {
        "fold": None,
        "profile": None,
    }


BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
BURN += "time.sleep(60)"


def test_a_process_trees_cpu_keeps_what_its_ended_children_used() -> None:
    child = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        wait_until(lambda: realistic.tree_cpu(child.pid) >= 0.3, "the child's CPU spent")
        with_child = realistic.tree_cpu(os.getpid())
    finally:
        child.kill()
        child.wait()  # ended and waited for: its CPU moves to this process's children's
    assert realistic.tree_cpu(os.getpid()) >= with_child
    assert realistic.tree_cpu(child.pid) == 0.0  # gone


def test_a_point_reports_the_overhead_and_cpu_minute_by_minute() -> None:
    phase = PhaseResult(messages=3)
    phase.sent = {"L001-M01": 1010.0, "L002-M01": 1070.0, "L003-M01": 1075.0}
    phase.arrivals = {"L001-M01": [1012.0], "L002-M01": [1072.0], "L003-M01": [1135.0]}
    waited = {"L001-M01": 1.9, "L002-M01": 1.95, "L003-M01": 59.9}
    samples = realistic.Samples(started_at=1000.0)
    for at, worker in ((0.0, 1.0), (30.0, 1.5), (59.0, 2.0), (90.0, 2.5), (130.0, 4.0)):
        samples.cpu.append((at, {"worker-1": worker, "web": at / 100}))
    found = realistic.minute_by_minute(phase, waited, samples)
    # Sent in minutes 0, 1 and 1 (100, 50 and 100 ms over the model); none sent in minute 2.
    overhead = found["overhead_ms_by_minute"]
    assert overhead[0] == {"p50": 100.0, "p95": 100.0}
    assert overhead[1] == {"p50": 50.0, "p95": 100.0}  # nearest rank
    assert overhead[2] is None
    # One reply arrives in each minute: the CPU used in that minute is the CPU a reply.
    assert found["cpu_ms_per_reply_by_minute"] == {
        "web": [590.0, 310.0, 400.0],
        "worker-1": [1000.0, 500.0, 1500.0],
    }
    assert found["replies_by_minute"] == [1, 1, 1]
    # No reading in minute 1: neither it nor minute 2 (which would span two) has a figure.
    samples.cpu = [each for each in samples.cpu if each[0] != 90.0]
    gap = realistic.minute_by_minute(phase, waited, samples)["cpu_ms_per_reply_by_minute"]
    assert gap["worker-1"] == [1000.0, None, None]
    assert realistic.minute_by_minute(PhaseResult(messages=0), {}, realistic.Samples()) == {
        "overhead_ms_by_minute": [],
        "cpu_ms_per_reply_by_minute": {},
        "replies_by_minute": [],
    }


def a_point(
    learners: int, workers: int, rate: float, p95: float, connections: int
) -> dict[str, Any]:
    point = realistic.Point(learners, workers, (2.0, 6.0))
    phase = phase_of({f"L{n:03d}-M01": 2.0 for n in range(1, 11)})
    samples = realistic.Samples(
        connections={"web": [2, 3], "worker-1": [4, connections]},
        rss_mb={"web": [150.0, 140.0], "worker-1": [300.0, 310.0]},
        claimed=[60, 70],
        model_in_flight=[60, 66],
        replies_in_flight=[50, 56],
        jobs_waiting=[3, 9],
        seconds=[30.0, 150.0],  # in the first minute and the third
    )
    before = {"busy_seconds": 0.0, "replies_busy_seconds": 0.0}
    after = {
        "busy_seconds": 650.0,
        "most_in_flight": 80,
        "replies_busy_seconds": 600.0,
        "most_replies_in_flight": 70,
        "waited": {},
    }
    found = realistic.point_result(point, phase, before, after, samples, {"web": 0.05})
    found["replies_per_second"] = rate
    found["overhead_ms"]["p95"] = p95
    return found


def test_a_point_reports_every_figure_and_the_verdicts_read_the_headline() -> None:
    good = a_point(200, 1, 33.0, 60.0, connections=5)
    assert good["turns_in_flight"] == {"mean": 30.0, "max": 70, "claimed_max": 70}
    assert good["model_calls_in_flight"] == {"mean": 32.5, "max": 80}
    assert good["connections"]["worker-1"] == {"max": 5, "mean": 4.5}
    assert good["rss_mb"] == {"web": 150.0, "worker-1": 310.0}
    assert good["rss_mb_by_minute"] == {
        "web": [150.0, None, 140.0],
        "worker-1": [300.0, None, 310.0],
    }
    assert good["memory_jobs_waiting"] == {"max": 9, "mean": 6.0}
    assert good["cpu_ms_per_reply"] == {"web": 5.0}  # 50 ms over 10 replies
    assert good["answered_once"] == good["sent"] == 10
    assert set(realistic.verdicts(good, [good], pool=2).values()) == {"PASS"}

    slow = a_point(200, 1, 12.0, 250.0, connections=12)
    found = realistic.verdicts(slow, [slow], pool=2)
    assert found["replies_per_second"] == found["overhead_p95"] == "FAIL"
    assert found["connections"] == "FAIL (worker-1=12)"
    assert found["turns_in_flight"] == "PASS"  # 70 claimed at once
    assert realistic.verdicts(None, [], pool=2) == {"headline": "n/a"}

    table = realistic.table([good, slow])
    assert table.count("\n") == 3, table
    assert "| 200 | 1 | 2–6 | 33.0 | 30.0 / 70 | 2000 / 60 | web 5.0 |" in table


def test_the_plot_draws_a_line_per_worker_count(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    points = [a_point(n, k, n / 6, 50.0, 5) for k in (1, 2) for n in (25, 50, 100)]
    path = tmp_path / "latency_realistic.png"
    said: list[str] = []
    plot_scaling(points, {"p50_s": 1.5, "p95_s": 5.0}, path, said.append)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert said == [f"plot written to {path}"]


def test_the_minutes_plot_leaves_out_the_last_minutes_few_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    point = a_point(200, 1, 33.0, 50.0, 5)
    point["replies_by_minute"] = [1980, 2010, 1995, 120]  # the learners stop in minute 4
    point["overhead_ms_by_minute"] = [{"p50": 15.0, "p95": 30.0}] * 3 + [None]
    point["cpu_ms_per_reply_by_minute"] = {"worker-1": [11.0, 11.5, 12.0, 70.0]}
    drawn: list[list[float]] = []
    import matplotlib.axes

    real_plot = matplotlib.axes.Axes.plot

    def plot(axes: Any, xs: list[float], ys: list[float], *args: Any, **kwargs: Any) -> Any:
        drawn.append(list(ys))
        return real_plot(axes, xs, ys, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    path = tmp_path / "latency_realistic_minutes.png"
    plot_minutes(point, {"p50_s": 1.5, "p95_s": 5.0}, path, lambda said: None)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn == [[15.0] * 3, [30.0] * 3, [11.0, 11.5, 12.0]]  # p50, p95, the worker
    del point["replies_by_minute"]  # a result from before they were counted: the last left out
    drawn.clear()
    plot_minutes(point, {"p50_s": 1.5, "p95_s": 5.0}, path, lambda said: None)
    assert drawn == [[15.0] * 3, [30.0] * 3, [11.0, 11.5, 12.0]]


def test_a_point_of_one_minute_draws_no_minutes_plot(tmp_path: Path) -> None:
    point = a_point(200, 1, 33.0, 50.0, 5)
    point["replies_by_minute"] = [1980, 30]  # the sweep's 60 s, and its last replies
    point["overhead_ms_by_minute"] = [{"p50": 15.0, "p95": 30.0}, None]
    point["cpu_ms_per_reply_by_minute"] = {"worker-1": [11.0, 70.0]}
    path = tmp_path / "latency_realistic_minutes.png"
    said: list[str] = []
    plot_minutes(point, {"p50_s": 1.5, "p95_s": 5.0}, path, said.append)
    assert not path.exists()
    assert said == ["1 whole minute(s) at the headline point: no minute plot"]


def test_the_options_of_the_command_line() -> None:
    quick = realistic.parse_args(["--quick"])
    assert quick.learners == (20, 60) and quick.workers == (1, 2) and not quick.saturation
    assert [p.slug for p in quick.points()][:2] == [
        "20-learners-1-worker-think",
        "60-learners-1-worker-think",
    ]
    full = realistic.parse_args(["--learners", "50,200", "--workers", "1", "--no-plot"])
    assert [(p.learners, p.workers, p.think) for p in full.points()] == [
        (50, 1, (2.0, 6.0)),
        (200, 1, (2.0, 6.0)),
        (200, 1, (0.0, 0.0)),  # the saturation point: no thinking
    ]
    assert not full.plot and full.pool_size == 2
    # About 60 s of traffic: a 4 s think and a 1.96 s model answer make a 6 s cycle.
    assert full.messages_each(full.points()[0]) == 10
    assert full.messages_each(full.points()[-1]) == 31  # no thinking: 60 / 1.96
    named = realistic.named("postgresql://u@h/db?options=-csearch_path%3Dx", "pam-web")
    assert "application_name=pam-web" in named and "options=" in named


def test_the_benchmarks_say_whether_their_postgres_runs_autovacuum(
    postgres_url: str, tmp_path: Path
) -> None:
    """A Postgres without autovacuum slows a long run as no managed one would: the realistic
    and storage benchmarks say so, and record it. SQLite, or a server that is not there, is
    neither (None)."""
    said: list[str] = []
    running = warn_without_autovacuum(postgres_url, said.append)
    assert running is autovacuum(postgres_url)
    assert isinstance(running, bool)
    assert (said != []) is (running is False)
    assert autovacuum(f"sqlite:///{tmp_path / 'pam.db'}") is None
    assert autovacuum("postgresql://postgres@127.0.0.1:1/nowhere") is None
