"""Check-ins at scale: 10,000 scripted learners in 21 timezones on Telegram and WhatsApp,
through 30 simulated days on an injected clock, against the real check-in rounds, store,
outbox and MemoryComposer on a real database, with a scripted model and scripted learners.

    python3 dev.py bench checkins [--learners N] [--days D] [--quick]
                                  [--database-url postgresql://...]

Prints progress, then the measured table; writes bench/results/checkins.json and
checkins.png (check-ins per day by outcome). Exits non-zero when any zero-target fails: a
check-in in a learner's quiet hours (their real local time), WhatsApp free-form outside the
24-hour window, one to a learner who opted out or after their block, two on a learner's local
day, or one delivered twice."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.checkin_learners import START, scripts
from bench.checkin_report import measure, plot, table
from bench.checkin_sim import Simulation
from loopback.harness import postgres_schema, sqlite_url

RESULTS = Path(__file__).parent / "results"


@contextmanager
def database(url: str | None, folder: Path) -> Iterator[str]:
    """A throwaway database: a schema of the given Postgres, or a SQLite file."""
    if url and url.startswith(("postgres://", "postgresql")):
        with postgres_schema(url, prefix="pam_checkin_bench") as schema_url:
            yield schema_url
    else:
        yield sqlite_url(folder)


def run(learners: int, days: int, database_url: str | None, out: Path) -> dict[str, Any]:
    """Simulate, measure, write the JSON and the plot; the result."""
    with (
        tempfile.TemporaryDirectory(prefix="pam-checkins-") as folder,
        database(database_url, Path(folder)) as url,
    ):
        print(
            f"check-ins: {learners:,} learners, {days} days from {START:%Y-%m-%d} "
            f"on {url.split(':')[0]}",
            flush=True,
        )
        began, cpu = time.monotonic(), time.process_time()
        sim = Simulation(url, scripts(learners, days), days, progress=_say)
        sim.seed_learners()
        sim.run()
        result = measure(sim)
        result["database"] = url.split(":")[0]
        result["seconds"]["total"] = time.monotonic() - began
        result["seconds"]["cpu"] = time.process_time() - cpu
        written = max(1, result["checkins_written"])
        result["cpu_ms_per_checkin"] = 1000 * result["seconds"]["cpu"] / written
        sim.pam.engine.dispose()
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkins.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    plot(result, out / "checkins.png")
    return result


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 when a zero-target fails."""
    parser = argparse.ArgumentParser(prog="bench checkins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=10_000, help="default 10,000")
    parser.add_argument("--days", type=int, default=30, help="simulated days (default 30)")
    parser.add_argument("--quick", action="store_true", help="500 learners, 7 days")
    parser.add_argument("--database-url", help="a Postgres to use (a throwaway schema of it)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where JSON and PNG go")
    args = parser.parse_args(argv)
    learners, days = (500, 7) if args.quick else (args.learners, args.days)
    result = run(learners, days, args.database_url, args.out)
    print()
    print(table(result))
    print(f"\nwrote {args.out / 'checkins.json'} and {args.out / 'checkins.png'}")
    failed = [name for name, ok in result["targets"].items() if not ok]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
