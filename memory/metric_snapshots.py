"""Worker-side metrics across machines. A worker (and its memory process) runs where no scrape
reaches, so each such process copies its own registry (memory/metrics.py) into the
`metric_snapshots` table every SNAPSHOT_SECONDS and when it stops, one row per process
instance, and the web app's /metrics adds the rows up at scrape time.

The rows hold absolute values, so the sum over instances only grows, across restarts too (a
new process starts a row of its own from zero; the old row stays). A row whose process has not
written for STALE_AFTER is folded into the single "retired" row and deleted, in one
transaction, so the table stays small and the sum never drops. Should that process come back
after all (stalled, not dead), it notices its row is gone, and goes on in a new row from the
values already retired (its baseline), so nothing is counted twice."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from memory import metrics
from memory.database.db import Tables
from memory.database.models import MetricSnapshot

log = logging.getLogger(__name__)

SNAPSHOT_SECONDS = 15.0
STALE_AFTER = timedelta(minutes=15)
RETIRE_EVERY = 10  # snapshots between two looks for stale instances
RETIRED = "retired"
KINDS = ("counter", "histogram")  # what adds up across processes

# One sample: (family, sample name, labels as sorted pairs).
Key = tuple[str, str, tuple[tuple[str, str], ...]]


@dataclass
class Family:
    """One metric family of a snapshot: its type and help, and its samples' values."""

    kind: str
    help: str
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float]


Families = dict[str, Family]


def read_registry(registry: CollectorRegistry) -> Families:
    """The counters and histograms of `registry`, without the `_created` timestamps (which
    mean nothing added up)."""
    families: Families = {}
    for metric in registry.collect():
        if metric.type not in KINDS:
            continue
        family = families.setdefault(metric.name, Family(metric.type, metric.documentation, {}))
        for sample in metric.samples:
            if sample.name.endswith("_created"):
                continue
            labels = tuple(sorted(sample.labels.items()))
            family.values[(sample.name, labels)] = float(sample.value)
    return families


def added(*snapshots: Families) -> Families:
    """The snapshots' values added up, sample by sample."""
    total: Families = {}
    for families in snapshots:
        for name, family in families.items():
            into = total.setdefault(name, Family(family.kind, family.help, {}))
            for key, value in family.values.items():
                into.values[key] = into.values.get(key, 0.0) + value
    return total


def minus(families: Families, baseline: Families) -> Families:
    """`families` less `baseline`, sample by sample."""
    less: Families = {}
    for name, family in families.items():
        base = baseline.get(name)
        values = {
            key: value - (base.values.get(key, 0.0) if base else 0.0)
            for key, value in family.values.items()
        }
        less[name] = Family(family.kind, family.help, values)
    return less


def to_json(families: Families) -> str:
    """A snapshot as the table keeps it."""
    return json.dumps(
        {
            name: {
                "type": family.kind,
                "help": family.help,
                "samples": [[s, dict(labels), v] for (s, labels), v in family.values.items()],
            }
            for name, family in families.items()
        },
        separators=(",", ":"),
    )


def from_json(text: str) -> Families:
    """A snapshot read back; what does not read as one (another version's shape) is skipped."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    families: Families = {}
    if not isinstance(data, dict):
        return families
    for name, family in data.items():
        try:
            kind, help_, samples = family["type"], family["help"], family["samples"]
            values = {
                (str(s), tuple(sorted((str(k), str(v)) for k, v in labels.items()))): float(value)
                for s, labels, value in samples
            }
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if kind in KINDS:
            families[str(name)] = Family(str(kind), str(help_), values)
    return families


class Snapshots(Tables):
    """The metric_snapshots table, read and written."""

    def insert(self, instance: str, role: str, families: Families) -> None:
        """Start an instance's row."""
        with self.single.begin() as connection:
            connection.execute(
                insert(MetricSnapshot).values(
                    instance=instance, role=role, samples=to_json(families), updated_at=self.clock()
                )
            )

    def update(self, instance: str, families: Families) -> bool:
        """Write an instance's values; False if its row is gone (retired meanwhile)."""
        with self.single.begin() as connection:
            done = connection.execute(
                update(MetricSnapshot)
                .where(MetricSnapshot.instance == instance)
                .values(samples=to_json(families), updated_at=self.clock())
            )
        return done.rowcount == 1

    def total(self) -> Families:
        """Every instance's values added up (the retired row's included)."""
        with self.single.connect() as connection:
            rows = connection.execute(select(MetricSnapshot.samples)).scalars().all()
        return added(*(from_json(row) for row in rows))

    def reporting(self) -> dict[str, int]:
        """Per role, the processes that wrote within STALE_AFTER."""
        since = self.clock() - STALE_AFTER
        with self.single.connect() as connection:
            rows = connection.execute(
                select(MetricSnapshot.role).where(
                    MetricSnapshot.updated_at >= since, MetricSnapshot.role != RETIRED
                )
            ).scalars()
            counts: dict[str, int] = {}
            for role in rows:
                counts[role] = counts.get(role, 0) + 1
        return counts

    def retire_stale(self) -> int:
        """Fold the rows not written within STALE_AFTER into the retired row; how many."""
        cutoff = self.clock() - STALE_AFTER
        with self.single.connect() as connection:
            stale = connection.execute(
                select(MetricSnapshot.instance, MetricSnapshot.updated_at).where(
                    MetricSnapshot.updated_at < cutoff, MetricSnapshot.instance != RETIRED
                )
            ).all()
        return sum(self._retire(row.instance, row.updated_at) for row in stale)

    def _retire(self, instance: str, updated_at: datetime) -> bool:
        try:
            with self.sessions.begin() as session:
                # Deleting first takes the row (and on SQLite the write lock): of two processes
                # retiring it at once, one deletes it and adds it up, the other finds nothing.
                gone = session.execute(
                    delete(MetricSnapshot)
                    .where(MetricSnapshot.instance == instance)
                    .where(MetricSnapshot.updated_at == updated_at)
                    .returning(MetricSnapshot.samples)
                ).scalar_one_or_none()
                if gone is None:
                    return False
                retired = session.execute(
                    select(MetricSnapshot)
                    .where(MetricSnapshot.instance == RETIRED)
                    .with_for_update()
                ).scalar_one_or_none()
                if retired is None:
                    session.add(
                        MetricSnapshot(
                            instance=RETIRED, role=RETIRED, samples=gone, updated_at=self.clock()
                        )
                    )
                else:
                    retired.samples = to_json(added(from_json(retired.samples), from_json(gone)))
                    retired.updated_at = self.clock()
        except IntegrityError:  # another process made the retired row just now: next time
            return False
        log.info("metrics of a process gone since %s retired", updated_at.isoformat())
        return True


def instance_name(role: str) -> str:
    """A name no other process instance has, anywhere: role, host, pid and a random part."""
    host = socket.gethostname()[:40]
    return f"{role}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Snapshotter:
    """Copies this process's worker-side metrics into the table: `tick` once, or `start` a
    thread that ticks every `seconds` and once more at `stop`."""

    def __init__(
        self,
        snapshots: Snapshots,
        role: str,
        registry: CollectorRegistry = metrics.REGISTRY,
        seconds: float = SNAPSHOT_SECONDS,
    ) -> None:
        self.snapshots = snapshots
        self.role = role
        self.registry = registry
        self.seconds = seconds
        self.instance = instance_name(role)
        self._baseline: Families = {}  # values already counted under earlier instances
        self._written: Families | None = None  # what this instance's row holds
        self._ticks = 0
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metric-snapshots", daemon=True)

    def tick(self) -> None:
        """Write this process's values now (and now and then retire stale instances)."""
        current = read_registry(self.registry)
        try:
            if self._written is None:
                self.snapshots.insert(self.instance, self.role, minus(current, self._baseline))
            elif not self.snapshots.update(self.instance, minus(current, self._baseline)):
                # Retired while stalled: what the row held is counted there already.
                self._baseline = added(self._baseline, self._written)
                self.instance = instance_name(self.role)
                self._written = None
                self.snapshots.insert(self.instance, self.role, minus(current, self._baseline))
            self._written = minus(current, self._baseline)
            self._ticks += 1
            if self._ticks % RETIRE_EVERY == 1:
                self.snapshots.retire_stale()
        except SQLAlchemyError as exc:  # the database is away: the next tick writes it all
            if not self._failing:
                log.warning("metrics not copied to the database: %s", type(exc).__name__)
            self._failing = True
        else:
            self._failing = False

    def start(self) -> Snapshotter:
        """Tick now and every `seconds` on a thread of its own."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and write the last values (what this process counted to the end)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=max(5.0, self.seconds))
        self.tick()

    def _run(self) -> None:
        while True:
            self.tick()
            if self._stop.wait(self.seconds):
                return
