"""Worker-side metrics copied to the database (memory/metric_snapshots.py): each process's row,
the sum across processes, restarts, retiring the stale, and migration 0008."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from sqlalchemy import Engine, func, select, text

from memory.database import db
from memory.database.models import MetricSnapshot
from memory.metric_snapshots import (
    RETIRED,
    STALE_AFTER,
    Families,
    Snapshots,
    Snapshotter,
    from_json,
    read_registry,
    to_json,
)
from tests.conftest import BACKENDS, postgres_schema
from tests.memory.test_migrations import current_revision, head_revision, schema_differences


class Process:
    """One worker process's metrics: a registry of its own, as memory/metrics.py keeps."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter("pam_t_calls", "calls", ["purpose"], registry=self.registry)
        self.turns = Histogram(
            "pam_t_turn_seconds", "turns", ["channel"], buckets=(1.0, 5.0), registry=self.registry
        )


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=BACKENDS)
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A database without any table: a SQLite file, or a Postgres schema of its own."""
    if request.param == "sqlite":
        engine = db.make_engine(f"sqlite:///{tmp_path / 'blank.db'}")
        yield engine
        engine.dispose()
        return
    with postgres_schema(request.getfixturevalue("postgres_url")) as url:
        engine = db.make_engine(url)
        yield engine
        engine.dispose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def snapshots(engine: Engine, clock: Clock) -> Iterator[Snapshots]:
    with engine.begin() as connection:  # the Postgres schema is shared across tests
        connection.execute(MetricSnapshot.__table__.delete())
    yield Snapshots(engine, clock)


def value(families: Families, sample: str, **labels: str) -> float:
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    family = family.removesuffix("_bucket")
    return families[family].values.get((sample, tuple(sorted(labels.items()))), 0.0)


def rows(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(MetricSnapshot)) or 0)


def test_a_process_copies_its_counters_and_histograms(snapshots: Snapshots) -> None:
    worker = Process()
    worker.calls.labels("reply").inc(3)
    worker.turns.labels("telegram").observe(0.5)
    worker.turns.labels("telegram").observe(2.0)

    Snapshotter(snapshots, "worker", worker.registry).tick()

    total = snapshots.total()
    assert value(total, "pam_t_calls_total", purpose="reply") == 3
    assert value(total, "pam_t_turn_seconds_count", channel="telegram") == 2
    assert value(total, "pam_t_turn_seconds_sum", channel="telegram") == 2.5
    assert value(total, "pam_t_turn_seconds_bucket", channel="telegram", le="1.0") == 1
    assert value(total, "pam_t_turn_seconds_bucket", channel="telegram", le="+Inf") == 2
    assert not any(sample.endswith("_created") for f in total.values() for sample, _ in f.values)
    assert snapshots.reporting() == {"worker": 1}


def test_processes_add_up_and_a_restart_never_lowers_the_sum(
    engine: Engine, snapshots: Snapshots
) -> None:
    first, child = Process(), Process()
    first_copy = Snapshotter(snapshots, "worker", first.registry)
    child_copy = Snapshotter(snapshots, "memory-jobs", child.registry)
    first.calls.labels("reply").inc(5)
    child.calls.labels("summary").inc(2)
    child.calls.labels("reply").inc(1)
    first_copy.tick()
    child_copy.tick()
    assert value(snapshots.total(), "pam_t_calls_total", purpose="reply") == 6

    first.calls.labels("reply").inc(2)
    first_copy.stop()  # the last copy, as a worker stops
    restarted = Process()  # the same worker started again: its counts start from zero
    restarted.calls.labels("reply").inc(1)
    Snapshotter(snapshots, "worker", restarted.registry).tick()

    total = snapshots.total()
    assert value(total, "pam_t_calls_total", purpose="reply") == 5 + 2 + 1 + 1
    assert value(total, "pam_t_calls_total", purpose="summary") == 2
    assert rows(engine) == 3


def test_stale_processes_are_retired_into_one_row_and_the_sum_stays(
    engine: Engine, snapshots: Snapshots, clock: Clock
) -> None:
    gone = [Process() for _ in range(3)]
    for n, process in enumerate(gone):
        process.calls.labels("reply").inc(n + 1)
        Snapshotter(snapshots, "worker", process.registry).tick()
    clock.now += STALE_AFTER + timedelta(seconds=1)
    alive = Process()
    alive.calls.labels("reply").inc(10)
    alive_copy = Snapshotter(snapshots, "worker", alive.registry)

    alive_copy.tick()  # its first copy also looks for stale rows

    assert value(snapshots.total(), "pam_t_calls_total", purpose="reply") == 1 + 2 + 3 + 10
    assert rows(engine) == 2  # the live one, and the retired
    assert snapshots.reporting() == {"worker": 1}
    with engine.connect() as connection:
        roles = set(connection.scalars(select(MetricSnapshot.role)))
    assert roles == {"worker", RETIRED}
    assert snapshots.retire_stale() == 0  # nothing twice


def test_a_stalled_process_that_was_retired_goes_on_without_counting_twice(
    snapshots: Snapshots, clock: Clock
) -> None:
    stalled = Process()
    stalled.calls.labels("reply").inc(4)
    stalled_copy = Snapshotter(snapshots, "worker", stalled.registry)
    stalled_copy.tick()
    first_instance = stalled_copy.instance
    clock.now += STALE_AFTER + timedelta(seconds=1)
    assert snapshots.retire_stale() == 1

    stalled.calls.labels("reply").inc(3)  # it wakes up and goes on counting
    stalled_copy.tick()
    stalled_copy.tick()

    assert stalled_copy.instance != first_instance
    assert value(snapshots.total(), "pam_t_calls_total", purpose="reply") == 7


def test_a_copy_that_cannot_be_written_is_written_by_the_next_tick(
    tmp_path: Path, clock: Clock
) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'later.db'}")
    worker = Process()
    worker.calls.labels("reply").inc(2)
    copy = Snapshotter(Snapshots(engine, clock), "worker", worker.registry)
    copy.tick()  # no schema yet: logged, not raised
    db.upgrade(engine)
    copy.tick()
    assert value(Snapshots(engine, clock).total(), "pam_t_calls_total", purpose="reply") == 2
    engine.dispose()


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "not json",
        "[]",
        '{"x": 1}',
        '{"x": {"type": "counter"}}',
        '{"x": {"type": "gauge", "help": "", "samples": []}}',
        '{"x": {"type": "counter", "help": "", "samples": [[1]]}}',
    ],
)
def test_a_row_of_another_shape_is_skipped(stored: str) -> None:
    assert from_json(stored) == {}


def test_a_snapshot_reads_back_as_written() -> None:
    worker = Process()
    worker.calls.labels("reply").inc(2)
    worker.turns.labels("api").observe(3)
    families = read_registry(worker.registry)
    assert from_json(to_json(families)) == families


def test_upgrade_from_0007_adds_the_table_and_keeps_the_data(blank: Engine) -> None:
    db.upgrade(blank, "0007")
    with blank.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learners (external_id, created_at, voice_replies) "
                "VALUES ('telegram:777001', CURRENT_TIMESTAMP, false)"
            )
        )

    db.upgrade(blank)

    assert current_revision(blank) == head_revision(blank)
    assert schema_differences(blank) == []
    with blank.connect() as connection:
        assert connection.scalar(text("SELECT external_id FROM learners")) == "telegram:777001"
    worker = Process()
    worker.calls.labels("reply").inc()
    Snapshotter(Snapshots(blank), "worker", worker.registry).tick()
    assert value(Snapshots(blank).total(), "pam_t_calls_total", purpose="reply") == 1

    db.downgrade(blank, "0007")
    with blank.connect() as connection:
        assert "metric_snapshots" not in connection.dialect.get_table_names(connection)
