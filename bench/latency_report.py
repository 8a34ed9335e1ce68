"""What the latency benchmark makes of a run: percentiles and sustained throughput per phase,
the table for the docs, the two targets' verdicts, the per-stage breakdown read from Pam's
own log lines, the summary of a py-spy profile, and the CDF plot."""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

P50_TARGET = 3.0  # Pam's p50 at most 3× the floor's
JOBS_TARGET = 1.2  # reply p95 with memory jobs at most 1.2× the p95 without


def lognormal_sigma(p50: float, p95: float) -> float:
    """The σ of a lognormal with median `p50` and 95th percentile `p95`: ln(p95/p50) / z95."""
    return math.log(p95 / p50) / statistics.NormalDist().inv_cdf(0.95)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


@dataclass
class PhaseResult:
    """One phase of one configuration: when each message was posted, when its replies came.
    A phase may be driven in blocks with other configurations' blocks in between (the
    interleaved latency phase): `windows` keeps each block's (started, finished)."""

    messages: int
    sent: dict[str, float] = field(default_factory=dict)  # marker -> time.time() before POST
    statuses: Counter[str] = field(default_factory=Counter)  # webhook answers
    arrivals: dict[str, list[float]] = field(default_factory=dict)  # marker -> reply times
    windows: list[tuple[float, float]] = field(default_factory=list)  # time.time() bounds

    def extend(self, block: PhaseResult) -> None:
        """Add a block of the same phase: its messages, answers and window."""
        self.messages += block.messages
        self.sent.update(block.sent)
        self.statuses.update(block.statuses)
        self.arrivals.update(block.arrivals)
        self.windows.extend(block.windows)

    def seconds(self) -> float:
        """How long the phase's blocks ran, without the time between them."""
        return sum(finished - started for started, finished in self.windows)

    def _on_phase_clock(self, at: float) -> float:
        """`at` on a clock that runs only inside the phase's windows, so that the gaps while
        other configurations were measured do not count as this one's time."""
        if not self.windows:
            return at
        return sum(max(0.0, min(at, finished) - started) for started, finished in self.windows)

    def latencies(self) -> list[float]:
        """Seconds from POST to the first reply, per answered message."""
        return [self.arrivals[m][0] - t for m, t in self.sent.items() if self.arrivals.get(m)]

    def counts(self) -> dict[str, int]:
        replies = [len(self.arrivals.get(m, [])) for m in self.sent]
        return {
            "sent": len(self.sent),
            "answered_once": sum(1 for n in replies if n == 1),
            "answered_twice": sum(1 for n in replies if n > 1),
            "never_answered": sum(1 for n in replies if n == 0),
        }

    def sustained_rate(self) -> float:
        """Replies per second between the 10th and the 90th percentile of reply arrivals: the
        steady state, without the ramp-up and the last learners' tail."""
        times = sorted(self._on_phase_clock(a[0]) for a in self.arrivals.values() if a)
        if len(times) < 10:
            return 0.0
        low, high = int(0.1 * len(times)), int(0.9 * len(times)) - 1
        span = times[high] - times[low]
        return (high - low) / span if span > 0 else 0.0

    def stats(self) -> dict[str, float]:
        ms = [1000 * v for v in self.latencies()]
        return {
            "p50_ms": round(percentile(ms, 0.50), 1),
            "p95_ms": round(percentile(ms, 0.95), 1),
            "p99_ms": round(percentile(ms, 0.99), 1),
            "max_ms": round(max(ms, default=0.0), 1),
            "mean_ms": round(statistics.fmean(ms), 1) if ms else 0.0,
            "replies_per_second": round(self.sustained_rate(), 1),
            "wall_seconds": round(self.seconds(), 1),
        }

    def summary(self) -> str:
        s, c = self.stats(), self.counts()
        return (
            f"{c['answered_once']}/{c['sent']} answered once, p50 {s['p50_ms']:.0f} ms, "
            f"p95 {s['p95_ms']:.0f} ms, max {s['max_ms']:.0f} ms, "
            f"{s['replies_per_second']:.1f} replies/s over {s['wall_seconds']:.0f} s"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.counts(),
            **self.stats(),
            "webhook_statuses": dict(self.statuses),
            "latencies_ms": sorted(round(1000 * v, 1) for v in self.latencies()),
            "blocks": [
                [round(started, 3), round(finished, 3)] for started, finished in self.windows
            ],
        }


@dataclass
class ConfigResult:
    name: str
    slug: str
    backend: str
    pam: bool = False
    jobs: bool = False
    latency: PhaseResult = field(default_factory=lambda: PhaseResult(0))
    throughput: PhaseResult = field(default_factory=lambda: PhaseResult(0))
    llm_calls: dict[str, int] = field(default_factory=dict)
    typing_calls: int = 0
    unmarked_replies: int = 0
    breakdown: dict[str, dict[str, float]] = field(default_factory=dict)
    tables: dict[str, dict[str, float]] = field(default_factory=dict)  # Postgres, per message
    profile: dict[str, Any] = field(default_factory=dict)
    # CPU seconds each process (with its children) used during this configuration's own
    # latency blocks: what a loaded machine does not inflate, unlike the latency.
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    def cpu_ms_per_reply(self) -> dict[str, float]:
        replies = max(1, len(self.latency.sent))
        return {role: round(1000 * v / replies, 1) for role, v in self.cpu_seconds.items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "slug": self.slug,
            "backend": self.backend,
            "pam": self.pam,
            "memory_jobs": self.jobs,
            "latency": self.latency.as_dict(),
            "throughput": {
                k: v for k, v in self.throughput.as_dict().items() if k != "latencies_ms"
            },
            "llm_calls_served": self.llm_calls,
            "typing_calls": self.typing_calls,
            "unmarked_replies": self.unmarked_replies,
            "stages_ms": self.breakdown,
            "postgres_per_message": self.tables,
            "profile": self.profile,
            "cpu_ms_per_reply": self.cpu_ms_per_reply(),
        }


# -- verdicts and the table ------------------------------------------------------------------


def _floor(results: list[ConfigResult], backend: str) -> ConfigResult | None:
    return next((r for r in results if r.backend == backend and not r.pam), None)


def _jobs_off(results: list[ConfigResult], backend: str) -> ConfigResult | None:
    return next((r for r in results if r.backend == backend and r.pam and not r.jobs), None)


def p50_ratio(result: ConfigResult, results: list[ConfigResult]) -> float | None:
    floor = _floor(results, result.backend)
    if floor is None or not floor.latency.latencies():
        return None
    return result.latency.stats()["p50_ms"] / max(floor.latency.stats()["p50_ms"], 0.1)


def jobs_ratio(result: ConfigResult, results: list[ConfigResult]) -> float | None:
    off = _jobs_off(results, result.backend)
    if not result.jobs or off is None or not off.latency.latencies():
        return None
    return result.latency.stats()["p95_ms"] / max(off.latency.stats()["p95_ms"], 0.1)


def verdicts(results: list[ConfigResult]) -> dict[str, str]:
    """PASS/FAIL per Pam configuration (p50 vs floor) and per backend (jobs vs no jobs)."""
    found: dict[str, str] = {}
    for result in results:
        if not result.pam:
            continue
        ratio = p50_ratio(result, results)
        found[f"{result.slug}: p50 <= {P50_TARGET:g}x floor p50"] = (
            "n/a" if ratio is None else "PASS" if ratio <= P50_TARGET else "FAIL"
        )
        if result.jobs:
            jobs = jobs_ratio(result, results)
            found[f"{result.backend}: p95 jobs on <= {JOBS_TARGET:g}x p95 jobs off"] = (
                "n/a" if jobs is None else "PASS" if jobs <= JOBS_TARGET else "FAIL"
            )
    return found


COLUMNS = (
    "configuration",
    "answered once",
    "p50 ms",
    "p95 ms",
    "max ms",
    "throughput msg/s",
    "CPU ms per reply",
    "p50 / floor p50",
    f"p50 ≤ {P50_TARGET:g}× floor",
    f"p95 jobs on ≤ {JOBS_TARGET:g}× off",
)


def table(results: list[ConfigResult]) -> str:
    """The markdown table for the docs."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * (len(COLUMNS) - 1)]
    for result in results:
        stats, counts = result.latency.stats(), result.latency.counts()
        ratio = p50_ratio(result, results) if result.pam else None
        jobs = jobs_ratio(result, results)
        cells = [
            result.name,
            f"{counts['answered_once']:,}/{counts['sent']:,}",
            f"{stats['p50_ms']:.1f}",
            f"{stats['p95_ms']:.1f}",
            f"{stats['max_ms']:.0f}",
            f"{result.throughput.stats()['replies_per_second']:.1f}",
            " + ".join(f"{v:.1f}" for v in result.cpu_ms_per_reply().values()) or "–",
            "1.0× (floor)" if not result.pam else "–" if ratio is None else f"{ratio:.1f}×",
            "–" if ratio is None else "PASS" if ratio <= P50_TARGET else "FAIL",
            "–" if jobs is None else f"{'PASS' if jobs <= JOBS_TARGET else 'FAIL'} ({jobs:.2f}×)",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- where the time goes: Pam's own log lines ------------------------------------------------

STAGES = {
    "web_accept": re.compile(r"inbound accepted channel=\S+ kind=\S+ ms=(\d+)"),
    "received_to_answered": re.compile(r"inbound answered .*since_received_ms=(\d+)"),
    "turn": re.compile(r"inbound answered .*turn_ms=(\d+)"),
    "send": re.compile(r"reply delivered .*send_ms=(\d+)"),
}
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log_breakdown(
    logs: dict[str, Path], windows: list[tuple[float, float]] | None = None
) -> dict[str, dict[str, float]]:
    """Median and p95 of each stage Pam logs (ms), over the log lines inside one of `windows`
    (time.time() bounds; the blocks of an interleaved phase): web accept, inbox wait + turn,
    turn alone, channel send."""
    values: dict[str, list[float]] = defaultdict(list)
    for path in sorted(set(logs.values())):
        for line in path.read_text(errors="replace").splitlines():
            stamp = STAMP.match(line)
            if windows is not None and stamp:
                at = time.mktime(time.strptime(stamp.group(1)[:19], "%Y-%m-%d %H:%M:%S"))
                at += int(stamp.group(1)[20:]) / 1000
                if not any(started - 0.05 <= at <= finished for started, finished in windows):
                    continue
            for stage, pattern in STAGES.items():
                match = pattern.search(line)
                if match:
                    values[stage].append(float(match.group(1)))
    waits = [r - t for r, t in zip(values["received_to_answered"], values["turn"], strict=False)]
    if waits:
        values["queued_before_turn"] = waits
    return {
        stage: {
            "count": len(found),
            "p50": round(percentile(found, 0.5), 1),
            "p95": round(percentile(found, 0.95), 1),
        }
        for stage, found in values.items()
    }


# -- where the CPU goes: a py-spy profile ----------------------------------------------------

FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
OWN_PACKAGES = ("bot/", "memory/", "webhooks/", "bench/")
LIBRARIES = (
    "sqlalchemy",
    "psycopg",
    "sqlite3",
    "httpx",
    "httpcore",
    "openai",
    "telegram",
    "apscheduler",
    "pydantic",
    "tiktoken",
    "flask",
    "werkzeug",
    "gunicorn",
    "waitress",
    "logging",
    "json",
    "ssl",
    "socket",
    "selectors",
    "asyncio",
    "threading",
    "concurrent",
    "anyio",
    "h11",
    "jinja2",
    "langcodes",
)


def _parse_frame(frame: str) -> tuple[str, str]:
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip(), ""
    return match.group("function"), match.group("file") or ""


def _library(path: str) -> str:
    for library in LIBRARIES:
        if f"/{library}/" in path or f"{library}/" == path[: len(library) + 1]:
            return library
        if path.endswith(f"/{library}.py") or path == f"{library}.py":
            return library
    if path.startswith(OWN_PACKAGES) or any(f"/{p}" in path for p in OWN_PACKAGES):
        return "pam"
    return "other"


def _own(path: str, root: Path) -> str | None:
    """The path relative to the repository when the frame is Pam's code, else None."""
    relative = path.removeprefix(str(root) + "/")
    return relative if relative.startswith(OWN_PACKAGES) else None


def profile_summary(path: Path, root: Path, top: int = 25) -> dict[str, Any]:
    """From py-spy's raw (collapsed) stacks: the share of samples per leaf function (self
    time), per Pam function on the stack (inclusive), per deepest Pam frame with the library
    it was in (where in Pam's code the CPU went), and per library."""
    leaves: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    attributed: Counter[str] = Counter()
    libraries: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_parse_frame(f) for f in stack.split(";") if f and not f.startswith("process ")]
        frames = [f for f in frames if f[1]]  # drop thread/process labels
        if not frames:
            continue
        function, file = frames[-1]
        leaves[f"{function} ({file.rsplit('/', 2)[-1] if '/' in file else file})"] += count
        library = _library(file)
        libraries[library] += count
        seen: set[str] = set()
        deepest = None
        for name, frame_file in frames:
            own = _own(frame_file, root)
            if own is not None:
                label = f"{name} ({own})"
                deepest = label
                if label not in seen:
                    seen.add(label)
                    inclusive[label] += count
        if deepest is not None:
            attributed[f"{deepest} → {library}"] += count

    def shares(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"where": where, "samples": n, "share": round(n / total, 4)}
            for where, n in counter.most_common(top)
        ]

    return {
        "samples": total,
        "top": shares(attributed),
        "self": shares(leaves),
        "inclusive": shares(inclusive),
        "libraries": shares(libraries),
        "raw": str(path),
    }


# -- the plot --------------------------------------------------------------------------------


def _pyplot(report: Callable[[str], None]) -> Any:
    """matplotlib's pyplot on the Agg backend, or None (said) where it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        report("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    return plt


def _save(plt: Any, figure: Any, path: Path, report: Callable[[str], None]) -> None:
    """Lay `figure` out, write it to `path` as a PNG, close it, and say where it went."""
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    report(f"plot written to {path}")


def _plain_log_ticks(axis: Any) -> None:
    """Label a log axis at 1, 2 and 5 of each decade as plain numbers, and its other ticks
    not at all: within one decade matplotlib labels the minor ticks too, as 3×10⁰, 4×10⁰…,
    and they ran into each other."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def plot(results: list[ConfigResult], path: Path, report: Callable[[str], None]) -> None:
    """Latency CDFs, one panel per backend with its floor; throughput bars below."""
    plt = _pyplot(report)
    if plt is None:
        return
    backends = sorted({r.backend for r in results}, key=["sqlite", "postgres"].index)
    figure, axes = plt.subplots(2, len(backends), figsize=(6.5 * len(backends), 8), squeeze=False)
    for column, backend in enumerate(backends):
        top, bottom = axes[0][column], axes[1][column]
        rows = [r for r in results if r.backend == backend]
        # One colour per configuration in both panels: the floor grey, Pam's blue and orange.
        colours = ["grey", "tab:blue", "tab:orange"][: len(rows)]
        for result, colour in zip(rows, colours, strict=True):
            ms = sorted(1000 * v for v in result.latency.latencies())
            if not ms:
                continue
            shares = [(n + 1) / len(ms) for n in range(len(ms))]
            stats = result.latency.stats()
            top.step(
                ms,
                shares,
                where="post",
                color=colour,
                label=f"{result.name}: p50 {stats['p50_ms']:.0f}, p95 {stats['p95_ms']:.0f} ms",
            )
        top.set_xscale("log")
        _plain_log_ticks(top.xaxis)
        top.axhline(0.5, color="grey", linewidth=0.5)
        top.axhline(0.95, color="grey", linewidth=0.5)
        top.set_xlabel("webhook POST → reply at the fake Telegram (ms, log scale)")
        top.set_ylabel("share of messages")
        top.set_title(f"{backend}: latency CDF, 50 learners in closed loop")
        top.legend(loc="lower right", fontsize=7)
        names = [r.name.replace(", ", "\n", 1) for r in rows]
        rates = [r.throughput.stats()["replies_per_second"] for r in rows]
        bars = bottom.barh(names, rates, color=colours)
        bottom.bar_label(bars, fmt="%.1f", fontsize=8)
        bottom.margins(x=0.1)  # room for the longest bar's label inside the axes
        bottom.invert_yaxis()
        bottom.tick_params(axis="y", labelsize=7)
        bottom.set_xlabel("sustained replies/s (one web + one worker, saturated)")
    figure.suptitle("Pam end-to-end latency and throughput, zero-latency fake LLM")
    _save(plt, figure, path, report)


def plot_scaling(
    points: list[dict[str, Any]], model: dict[str, Any], path: Path, report: Callable[[str], None]
) -> None:
    """The realistic mode's plot: replies per second against learners, one line per worker
    count (the points with thinking learners), and Pam's overhead p95 beside it."""
    plt = _pyplot(report)
    if plt is None:
        return
    figure, (rates, overhead) = plt.subplots(1, 2, figsize=(12, 4.8))
    for workers in sorted({p["workers"] for p in points}):
        line = sorted(
            (p for p in points if p["workers"] == workers and p["think_seconds"][1] > 0),
            key=lambda p: p["learners"],
        )
        if not line:
            continue
        learners = [p["learners"] for p in line]
        label = f"{workers} worker{'s' if workers > 1 else ''}"
        rates.plot(learners, [p["replies_per_second"] for p in line], marker="o", label=label)
        overhead.plot(learners, [p["overhead_ms"]["p95"] for p in line], marker="o", label=label)
    _dress(
        rates,
        "learners in closed loop (2–6 s of thinking after each reply)",
        "sustained replies/s",
        f"Throughput against a model of {_model(model)}",
    )
    overhead.axhline(100, color="grey", linewidth=0.8, linestyle="--", label="target 100 ms")
    overhead.set_yscale("log")  # tens of ms when the machine has room, seconds when not
    _dress(
        overhead,
        "learners in closed loop",
        "Pam's overhead p95 (ms, log scale): reply time − model time",
        "What Pam adds to the model's time",
    )
    figure.suptitle("Pam on Postgres, PAM_DB_POOL_SIZE=2, default lanes; one web process")
    _save(plt, figure, path, report)


def plot_minutes(
    point: dict[str, Any], model: dict[str, Any], path: Path, report: Callable[[str], None]
) -> None:
    """The realistic mode's headline point minute by minute: Pam's overhead at p50 and p95,
    and the CPU a reply of each process and of the Postgres server. Minutes with under half
    the median minute's replies (the last, as the learners stop) are left out: their idle
    CPU over a few replies reads as a costly reply. (Results from before the replies were
    counted by minute leave out their last minute.) A point of under two such minutes (the
    sweep's 60 s) has no lines to draw: nothing is written, and it says so."""
    count = len(point["overhead_ms_by_minute"])
    replies = point.get("replies_by_minute") or [1] * (count - 1) + [0]
    enough = statistics.median(replies) / 2
    minutes = [m for m, n in enumerate(replies) if n >= enough]
    if len(minutes) < 2:
        report(f"{len(minutes)} whole minute(s) at the headline point: no minute plot")
        return
    plt = _pyplot(report)
    if plt is None:
        return
    figure, (overhead, cpu) = plt.subplots(1, 2, figsize=(12, 4.8))

    def line(axes: Any, values: list[Any], style: str, label: str) -> None:
        """`values` by minute, the minutes shown that have one, numbered from 1."""
        shown = [m for m in minutes if values[m] is not None]
        axes.plot([m + 1 for m in shown], [values[m] for m in shown], style, label=label)

    by_minute = point["overhead_ms_by_minute"]
    for key, style in (("p50", "-"), ("p95", "-o")):
        line(overhead, [None if m is None else m[key] for m in by_minute], style, key)
    overhead.axhline(100, color="grey", linewidth=0.8, linestyle="--", label="target p95 100 ms")
    overhead.set_ylim(bottom=0)
    _dress(
        overhead,
        "minute of the run",
        "Pam's overhead (ms): reply time − model time",
        "What Pam adds to the model's time, minute by minute",
    )
    for role, values in point["cpu_ms_per_reply_by_minute"].items():
        line(cpu, values, "-o", role)
    cpu.set_ylim(bottom=0)
    _dress(
        cpu,
        "minute of the run",
        "CPU ms a reply (user + system, with children)",
        "CPU a reply, minute by minute",
    )
    figure.suptitle(
        f"{point['learners']} learners, {point['workers']} worker"
        f"{'s' if point['workers'] > 1 else ''}, {point['replies_per_second']} replies/s "
        f"against a model of {_model(model)}"
    )
    _save(plt, figure, path, report)


def _model(model: dict[str, Any]) -> str:
    """The fake model's latency, as the realistic mode's plots name it."""
    return f"p50 {model['p50_s']:g} s, p95 {model['p95_s']:g} s"


def _dress(axes: Any, xlabel: str, ylabel: str, title: str) -> None:
    """A realistic-mode panel's labels, title, light grid and legend."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
