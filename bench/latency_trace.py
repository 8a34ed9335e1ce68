"""Where one message's time goes, Pam against the floor. Messages go one at a time, none
other in flight, `--gap` seconds apart, to the floor and to Pam with memory jobs off in turn,
on each backend's process shape of bench/latency.py, each against its own zero-latency fake
LLM, which stamps when a reply's request arrived and when it was answered
(bench/latency_servers.StampedLLM), and a fake Telegram, which stamps the reply's arrival.

A message's time splits at those stamps: to the model (from just before the webhook POST to
the request's arrival: the web's accept, the hand-over to the worker, the turn's reads, the
prompt and the SDK's request), the model's own time, and from the model (its answer to the
sendMessage's arrival: reading the answer, the reply's write and the send). With nothing else
in flight, the split shows the path's own costs, which the loaded benchmark mixes with the
machine's queueing; two builds measured one after the other on a shared machine differ by
its drift, so compare ratios to the floor, taken in the same minutes.

    python3 dev.py bench latency_trace                       # Postgres, 300 messages
    python3 dev.py bench latency_trace --backends sqlite,postgres --gap 0

Writes latency_trace.json (every message's split, and the medians) and prints a table."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from bench import latency
from bench.latency_learners import (
    ANSWER_TIMEOUT,
    DEFAULT_DATABASE,
    Learners,
    Service,
    commit,
    progress,
)
from bench.latency_servers import LLMProcess, StopwatchTelegram
from loopback.harness import ROOT

# A message's parts, in ms: POST to reply; the webhook's own answer; to, in and from the model.
PARTS = ("total", "webhook", "to_model", "model", "from_model")
WARM_UP = 20  # messages per configuration, not counted: connections open, plans cached


@dataclass(frozen=True)
class Options:
    messages: int = 300
    learners: int = 5
    gap: float = 0.1  # seconds idle after each message, as between a learner's messages
    backends: tuple[str, ...] = ("postgres",)
    database_url: str = DEFAULT_DATABASE
    out: Path | None = ROOT / "bench" / "results"
    seed: int = 7


@dataclass
class Rig:
    """One configuration's service, its fake servers and its learner."""

    config: latency.Config
    llm: LLMProcess
    tg: StopwatchTelegram
    service: Service
    learners: Learners
    posted: dict[str, tuple[float, float]]  # marker -> (POST sent, POST answered)


def split(rig: Rig) -> list[dict[str, float]]:
    """Each counted message's parts in ms (those whose reply or model call went missing are
    left out: `answered` counts them)."""
    stamps = rig.llm.stats()["stamps"]
    rows = []
    for marker, (sent, acknowledged) in rig.posted.items():
        arrivals, called = rig.tg.arrivals.get(marker), stamps.get(marker)
        if not arrivals or not called:
            continue
        asked, answered = called
        seconds = {
            "total": arrivals[0] - sent,
            "webhook": acknowledged - sent,
            "to_model": asked - sent,
            "model": answered - asked,
            "from_model": arrivals[0] - answered,
        }
        rows.append({part: round(value * 1000, 3) for part, value in seconds.items()})
    return rows


def medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {part: round(statistics.median(r[part] for r in rows), 2) for part in PARTS}


def send(rig: Rig, session: requests.Session, index: int, learners: int) -> None:
    """Message `index` of learner L{1 + index % learners}: POST it, wait for its reply."""
    key = f"L{1 + index % learners}"
    marker = f"{key}-M{index + 1:02d}"
    update = rig.learners.update(key, index, marker)
    arrived = rig.tg.expect(marker)
    sent = time.time()
    status = rig.learners.post(session, update)
    acknowledged = time.time()
    arrived.wait(ANSWER_TIMEOUT)
    if status == "200" and index >= WARM_UP:
        rig.posted[marker] = (sent, acknowledged)


def run_backend(
    backend: str, options: Options, folder: Path, report: Callable[[str], None]
) -> dict[str, Any]:
    """The floor and Pam (memory jobs off) on `backend`, messages sent to each in turn."""
    configs = [latency.Config(backend, pam=False), latency.Config(backend, pam=True)]
    shape = latency.Options(backends=(backend,), database_url=options.database_url, out=None)
    found: dict[str, Any] = {}
    with ExitStack() as stack:
        rigs = []
        for config in configs:
            llm = stack.enter_context(LLMProcess(stamped=True))
            tg = stack.enter_context(StopwatchTelegram())
            service = stack.enter_context(latency.running(config, llm, tg, folder, shape))
            learners = Learners(service.base, tg, options.seed)
            rigs.append(Rig(config, llm, tg, service, learners, {}))
        with ExitStack() as sessions:
            by_rig = [sessions.enter_context(requests.Session()) for _ in rigs]
            for index in range(WARM_UP + options.messages):
                for rig, session in zip(rigs, by_rig, strict=True):
                    send(rig, session, index, options.learners)
                    time.sleep(options.gap)
                if index >= WARM_UP and (index - WARM_UP + 1) % 50 == 0:
                    report(f"{backend}: {index - WARM_UP + 1}/{options.messages} messages each")
        for rig in rigs:
            rows = split(rig)
            found[rig.config.slug] = {
                "name": rig.config.name,
                "answered": f"{len(rows)}/{options.messages}",
                "median_ms": medians(rows) if rows else {},
                "messages": rows,
            }
    return found


def table(found: dict[str, Any]) -> str:
    """The medians per configuration, and Pam's over its floor's."""
    lines = [
        "| configuration | answered | total ms | webhook ms | to the model ms | model ms "
        "| from the model ms | total / floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    floors: dict[str, float] = {}
    for slug, config in found.items():
        parts = config["median_ms"]
        if not parts:
            lines.append(f"| {config['name']} | {config['answered']} | – | – | – | – | – | – |")
            continue
        backend = slug.split("-", 1)[0]
        if slug.endswith("floor"):
            floors[backend] = parts["total"]
        floor = floors.get(backend)
        ratio = f"{parts['total'] / floor:.2f}×" if floor else "–"
        cells = " | ".join(f"{parts[p]:.2f}" for p in PARTS)
        lines.append(f"| {config['name']} | {config['answered']} | {cells} | {ratio} |")
    return "\n".join(lines)


def run(options: Options, report: Callable[[str], None] = progress) -> dict[str, Any]:
    """Every backend of `options`; the results as written to latency_trace.json."""
    folder = Path(tempfile.mkdtemp(prefix="pam-trace-"))
    report(
        f"{options.messages} messages one at a time, {options.gap} s apart, to the floor and "
        f"to Pam in turn; backends {','.join(options.backends)}; logs in {folder}"
    )
    configurations: dict[str, Any] = {}
    try:
        for backend in options.backends:
            configurations |= run_backend(backend, options, folder, report)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    found = {
        "options": {
            "messages": options.messages,
            "learners": options.learners,
            "gap": options.gap,
            "backends": list(options.backends),
            "commit": commit(),
        },
        "configurations": configurations,
        "table": table(configurations),
    }
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "latency_trace.json").write_text(json.dumps(found, indent=1) + "\n")
    return found


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(
        prog="bench.latency_trace", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--messages", type=int, default=Options.messages)
    parser.add_argument("--learners", type=int, default=Options.learners)
    parser.add_argument(
        "--gap", type=float, default=Options.gap, help="seconds idle after each message"
    )
    parser.add_argument("--backends", default="postgres", help="sqlite,postgres")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--out", type=Path, default=Options.out, help="latency_trace.json")
    args = parser.parse_args(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if not backends or set(backends) - set(latency.BACKENDS):
        parser.error("--backends takes sqlite and/or postgres")
    if args.messages < 1 or args.learners < 1 or args.gap < 0:
        parser.error("--messages and --learners are at least 1, --gap at least 0")
    return Options(args.messages, args.learners, args.gap, backends, args.database_url, args.out)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    shape = latency.Options(backends=options.backends, database_url=options.database_url)
    problem = latency.check_environment(shape)
    if problem:
        print(f"bench.latency_trace: {problem}", file=sys.stderr)
        return 2
    found = run(options)
    print(found["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
