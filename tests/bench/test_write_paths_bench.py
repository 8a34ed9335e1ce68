"""The write-paths benchmark, tiny, on the test Postgres: both ways run every write with the
round trips tests/bot/test_round_trips.py counts, and a turn run either way leaves the same
rows, so the benchmark compares two ways of doing one thing. Benchmarks report, tests time
nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from bench import write_paths
from memory.database import db
from memory.database.models import Correction, MemoryJob, Message, Usage
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.models_review import ReviewPending
from tests.conftest import empty_queues, unique_user


def test_both_ways_run_every_write_with_their_round_trips(
    postgres_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "write_paths.json"
    code = write_paths.main(
        ["--database-url", postgres_url, "--turns", "4", "--pause-ms", "0", "--out", str(out)]
    )
    assert code == 0
    writes = json.loads(out.read_text())["writes"]
    trips = {
        write: (ways[write_paths.FUSED]["round_trips"], ways[write_paths.SHARED]["round_trips"])
        for write, ways in writes.items()
    }
    assert trips == {
        write_paths.ACCEPT: ([1], [4]),
        write_paths.BEGIN: ([1], [2]),
        write_paths.SAVE: ([1], [8]),
        write_paths.SAVE_GRADED: ([1], [11]),
        write_paths.FINISH: ([1], [4]),
    }
    assert {ways[write_paths.SHARED]["n"] for ways in writes.values()} == {2, 4}


def _rows(engine: Engine, learner_id: int, address: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a learner's turns left in every table the hot writes touch, without ids and
    times."""
    with engine.connect() as connection:

        def rows(*columns: Any, where: Any) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in connection.execute(select(*columns).where(where))]

        return {
            "messages": rows(
                Message.role,
                Message.content,
                Message.tokens,
                Message.reply_to.is_(None),
                where=Message.learner_id == learner_id,
            ),
            "usage": rows(
                Usage.model,
                Usage.purpose,
                Usage.input_tokens,
                Usage.output_tokens,
                where=Usage.learner_id == learner_id,
            ),
            "corrections": rows(
                Correction.original,
                Correction.corrected,
                Correction.explanation,
                Correction.category,
                Correction.rule,
                where=Correction.learner_id == learner_id,
            ),
            "review_pending": rows(
                ReviewPending.used,
                ReviewPending.missed,
                ReviewPending.offered,
                where=ReviewPending.learner_id == learner_id,
            ),
            "memory_jobs": rows(
                MemoryJob.kind,
                MemoryJob.dirty,
                MemoryJob.running,
                where=MemoryJob.learner_id == learner_id,
            ),
            "inbox": rows(
                InboxItem.status, InboxItem.text, InboxItem.kind, where=InboxItem.address == address
            ),
            "outbox": rows(
                OutboxItem.seq,
                OutboxItem.text,
                OutboxItem.status,
                OutboxItem.attempts,
                OutboxItem.speak,
                OutboxItem.buttons,
                OutboxItem.chart_id,
                where=OutboxItem.address == address,
            ),
        }


def test_a_turn_leaves_the_same_rows_either_way(postgres_url: str) -> None:
    empty_queues(db.make_engine(postgres_url)).dispose()
    ways = write_paths.Ways(postgres_url, pause=0)
    try:
        learners = {
            way: ways.store.learners.learner(unique_user(), "Lena")
            for way in (write_paths.FUSED, write_paths.SHARED)
        }
        for way, learner in learners.items():
            for number in (0, 1):  # a plain reply, then one with a correction and grades
                ways.turn(way, learner, number)
        fused, shared = (
            _rows(ways.worker, learner.id, learner.external_id) for learner in learners.values()
        )
    finally:
        ways.close()
    # The texts name their way: compare them without it.
    for found in (fused, shared):
        for table, rows in found.items():
            found[table] = [
                tuple(
                    value.replace(write_paths.FUSED, "way").replace(write_paths.SHARED, "way")
                    if isinstance(value, str)
                    else value
                    for value in row
                )
                for row in rows
            ]
    assert fused == shared
    assert len(fused["messages"]) == 4 and len(fused["outbox"]) == 4
    assert len(fused["corrections"]) == 1 and len(fused["review_pending"]) == 1
    assert fused["memory_jobs"] == [("review", True, False)]
