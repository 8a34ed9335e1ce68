"""The cold-start benchmark: what a fresh Pam process costs before it is useful, measured as
an operator starts it, with real subprocesses and whatever bytecode the install left.

    python3 dev.py bench cold_start              # 3 rounds, medians
    python3 dev.py bench cold_start --rounds 1   # a first look

Each round, on a fresh SQLite file and the loopback OpenAI and Telegram fakes:

- `pam --help`: wall time and CPU (user + system, of the process);
- the web: the Procfile's gunicorn command (2 workers), from its start to the first 200 on
  /healthz;
- the first reply of a fresh `pam worker`: a Telegram message stored by the web before the
  worker starts, from the worker's start to the reply's sendMessage;
- the first /progress of a fresh worker, once it is up (its lanes started and the chart
  renderer loaded beside them: its `load_ms=`): the worker's `render_ms=` (and `cpu_ms=`, the
  drawing thread's own CPU), the time from the webhook to the photo, and to the reply of a
  message the learner sent right after /progress (answered while the chart is drawn, and sent
  after it).

Run it with PYTHONDONTWRITEBYTECODE=1 to see what a container or CI start costs: then nothing
is compiled for the next start, and what the install did not compile is compiled every time.
Writes bench/results/cold_start.json; exits non-zero when `pam --help` takes more than 0.5 s
of CPU or the chart more than a second of its thread's CPU."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

from loopback.harness import (
    PAM_CMD,
    db_upgrade,
    free_port,
    gunicorn,
    healthy,
    processes,
    progress,
    service_env,
    sqlite_url,
    wait_for,
)
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer

RESULTS = Path(__file__).resolve().parent / "results" / "cold_start.json"
# The targets, on CPU (wall time here is mostly other processes' turn on shared cores): a
# bytecode-compiled `pam --help`, and a chart drawn by a worker that loaded its renderer.
TARGETS = {"help_cpu_s": 0.5, "render_cpu_ms": 1000.0}
SECRET = "cold-start-webhook-secret"
WAIT = 300.0  # a bound on each wait, never an expectation
LEARNER = {"id": 4242001, "is_bot": False, "first_name": "Lena", "language_code": "en"}
_ids = itertools.count(1)


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def help_costs() -> tuple[float, float]:
    """`pam --help`: its wall time and its CPU, in seconds."""
    cpu, started = children_cpu(), time.monotonic()
    subprocess.run([*PAM_CMD, "--help"], capture_output=True, check=True)
    return time.monotonic() - started, children_cpu() - cpu


def update(text: str) -> dict[str, Any]:
    """A Telegram update: the learner's private message `text` (a command's entity too)."""
    message: dict[str, Any] = {
        "message_id": next(_ids),
        "from": LEARNER,
        "chat": {"id": LEARNER["id"], "type": "private", "first_name": "Lena"},
        "date": int(time.time()),
        "text": text,
    }
    if text.startswith("/"):
        message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": "bot_command"}]
    return {"update_id": next(_ids), "message": message}


def one_round(folder: Path) -> dict[str, float]:
    """One round's figures, in seconds (those named _ms in milliseconds)."""
    figures: dict[str, float] = {}
    figures["help_wall_s"], figures["help_cpu_s"] = help_costs()
    with OpenAIServer() as llm, TelegramServer() as telegram, processes(folder, "cold") as group:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = service_env(
            sqlite_url(folder),
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test",
            PAM_POLL_SECONDS="0.05",
            PAM_PUBLIC_URL=base,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_URL=telegram.base_url,
            TELEGRAM_WEBHOOK_SECRET=SECRET,
        )
        db_upgrade(env, folder)

        def post(text: str) -> None:
            requests.post(
                f"{base}/telegram/webhook",
                json=update(text),
                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
                timeout=30,
            ).raise_for_status()

        started = time.monotonic()
        group.start("web", gunicorn(port, workers=2), env)
        wait_for(lambda: healthy(base), WAIT, "/healthz", poll=0.02)
        figures["web_first_healthz_s"] = time.monotonic() - started

        post("Hola, me llamo Lena")
        started = time.monotonic()
        first = group.start("worker-first-reply", [*PAM_CMD, "worker"], env)
        wait_for(lambda: bool(telegram.sent_texts()), WAIT, "the first reply", poll=0.02)
        figures["worker_first_reply_s"] = time.monotonic() - started
        # Stopped as a platform stops it: a worker killed mid-way would leave its reply's
        # claim to lapse first, and the learner's next replies queued behind it.
        group.kill(first, signal.SIGTERM)
        first.popen.wait(WAIT)

        fresh = group.start("worker-progress", [*PAM_CMD, "worker"], env)
        # A worker that is up: its lanes started and the chart renderer loaded beside them.
        ready = "chart renderer ready"
        wait_for(lambda: ready in fresh.tail(), WAIT, "the chart renderer", poll=0.02)
        replies = len(telegram.sent_texts())
        started = time.monotonic()
        post("/progress")
        post("Ayer fui a la playa")
        wait_for(lambda: bool(telegram.of("sendPhoto")), WAIT, "the chart", poll=0.02)
        figures["progress_photo_s"] = time.monotonic() - started
        wait_for(lambda: len(telegram.sent_texts()) > replies, WAIT, "the next reply", poll=0.02)
        figures["next_reply_s"] = time.monotonic() - started
        log = fresh.log.read_text()
        for key, pattern in (
            ("renderer_load_ms", r"load_ms=(\d+)"),
            ("render_ms", r"render_ms=(\d+)"),
            ("render_cpu_ms", r"render_ms=\d+ cpu_ms=(\d+)"),
        ):
            found = re.search(pattern, log)
            figures[key] = float(found.group(1)) if found else float("nan")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds to run (default 3)")
    args = parser.parse_args()
    rounds = []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory() as folder:
            figures = one_round(Path(folder))
        rounds.append(figures)
        shown = ", ".join(f"{k}={v:.2f}" for k, v in figures.items())
        progress(f"round {n + 1}/{args.rounds}: {shown}", "cold")
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    for key, value in medians.items():
        print(f"{key:24} {value:10.2f}")
    RESULTS.write_text(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                "python": platform.python_version(),
                "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
                "rounds": rounds,
                "medians": medians,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")
    missed = [
        f"{key} {medians[key]:.2f} > {top}"
        for key, top in TARGETS.items()
        if not medians[key] <= top
    ]
    if missed:
        sys.exit("missed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
