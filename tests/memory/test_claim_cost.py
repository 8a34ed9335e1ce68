"""One learner's burst cannot slow the others' claims (issue 27): a claim does the same work
with 10 or 10,000 of one address's items queued behind its item in flight, on both backends,
and idle lanes polling SQLite never take its one write lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, insert, select

from memory.database.claims import INBOX_READY
from memory.database.models_queue import InboxItem
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from tests.conftest import empty_queues
from tests.support import WAIT, explained_plan, inbound, rows_visited

LONG_LEASE = 300.0
BURSTER, OTHER = "test:burster", "test:other"


def queue_a_burst(engine: Engine, items: int, finished: int) -> Inbox:
    """`finished` items of earlier learners, then `items` messages of one learner, the first
    one claimed (its turn running), then one message of another learner."""
    empty_queues(engine)
    done = [
        {"channel": "test", "platform_id": f"old-{n}", "address": f"test:{n % 50}"}
        | {"chat_id": "x", "text": "", "status": "done"}
        for n in range(finished)
    ]
    burst = [
        {"channel": "test", "platform_id": f"burst-{n}", "address": BURSTER}
        | {"chat_id": "b", "text": "spam", "status": "pending"}
        for n in range(items)
    ]
    with engine.begin() as connection:
        connection.execute(insert(InboxItem), done + burst)
    inbox = Inbox(engine, LONG_LEASE)
    in_flight = inbox.claim_next()
    assert in_flight is not None and in_flight.address == BURSTER
    assert inbox.accept(inbound(OTHER, "¿Qué tal?"))
    return inbox


def sqlite_steps(engine: Engine, work: Callable[[], Any]) -> tuple[Any, int]:
    """What `work` returns, and how many SQLite virtual machine instructions it ran (every
    row visited costs some): counted by a progress handler on each connection it takes."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    def on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        dbapi_connection.set_progress_handler(count, 1)

    with engine.connect() as connection:  # the schema is read before, not counted
        connection.exec_driver_sql("SELECT count(*) FROM sqlite_master")
    event.listen(engine, "checkout", on_checkout)
    try:
        result = work()
    finally:
        event.remove(engine, "checkout", on_checkout)
        engine.dispose()  # no pooled connection keeps the handler
    return result, steps


def postgres_work(engine: Engine, inbox: Inbox) -> tuple[int, int]:
    """The rows the claim's read of the next item visits (returned, or removed by a filter,
    by every scan of the table and its indexes) and the shared buffers (pages) it touches,
    as EXPLAIN (ANALYZE, BUFFERS) counts them, after a VACUUM ANALYZE: the rows other tests
    deleted, and missing statistics, would blur the count."""
    return query_work(engine, inbox.next_item_query(func.now()))


def query_work(engine: Engine, query: Any) -> tuple[int, int]:
    """`postgres_work` of any query of the inbox."""
    with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE) inbox")
    sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with engine.connect() as connection:  # rolled back: the rows it locks are let go
        explained = connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql
        ).scalar()
    plan = explained_plan(explained)
    pages = int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])
    return rows_visited(plan, "inbox"), pages


def claim_work(engine: Engine, items: int, finished: int) -> tuple[int, ...]:
    """The work of claiming the other learner's message with `items` of the burster's
    queued ahead of it and `finished` items before (checking it is the one claimed):
    SQLite's instructions, or the rows and pages Postgres reads."""
    inbox = queue_a_burst(engine, items, finished)
    if engine.dialect.name == "postgresql":
        return postgres_work(engine, inbox)
    claim, steps = sqlite_steps(engine, inbox.claim_next)
    assert claim is not None and claim.address == OTHER
    return (steps,)


def test_a_claim_does_the_same_work_with_10_or_10000_items_of_a_burst_queued(
    engine: Engine,
) -> None:
    """Each claim used to look at every item of the burst (the oldest first, each waiting
    for the one in flight): on SQLite 240,000 instructions at 10,000 against 523 at 10, and
    the web's writes waited behind it. Now the first item of each address is found through
    the (address, id) index, so only the number of addresses waiting counts. (The 10,000
    are more than admission lets one address queue; they stand for any backlog.) On
    Postgres the rows visited stay the same; its pages grow a little with the indexes'
    depth (one level more at 10,000: a page more per lookup). Finished items, ten times as
    many in the second case, are never read either: on SQLite that takes the partial
    indexes' condition written into the SQL, not bound."""
    few, many = claim_work(engine, 10, 500), claim_work(engine, 10_000, 5_000)
    print(f"claim work ({engine.dialect.name}): {few} with 10 queued, {many} with 10,000")
    assert many[0] <= 1.5 * few[0], f"claim work: {few} with 10 queued, {many} with 10,000"
    if engine.dialect.name == "postgresql":
        assert many[1] <= 3 * few[1], f"pages: {few[1]} with 10 queued, {many[1]} with 10,000"


def test_idle_polls_never_take_sqlite_write_lock(engine: Engine) -> None:
    """Lanes poll four times a second. A claim is an UPDATE, and on SQLite an UPDATE takes
    the database's one write lock even when it finds nothing: idle lanes held up the web's
    INSERTs. The poll reads first; here another connection holds the write lock, and polls
    of an empty inbox and outbox, and of an inbox whose only items wait behind one in
    flight, still answer at once."""
    if engine.dialect.name != "sqlite":
        pytest.skip("Postgres has no database-wide write lock")
    inbox, outbox = Inbox(engine, LONG_LEASE), Outbox(engine, LONG_LEASE)
    assert inbox.accept(inbound(BURSTER, "uno")) and inbox.accept(inbound(BURSTER, "dos"))
    assert inbox.claim_next() is not None  # "dos" waits behind it
    polls: list[Any] = []
    done = threading.Event()

    def poll() -> None:
        polls.extend([inbox.claim_next(), outbox.claim_next(), inbox.claim_next()])
        done.set()

    with engine.connect() as writer:
        writer.exec_driver_sql("BEGIN IMMEDIATE")  # the web storing a message, say
        try:
            threading.Thread(target=poll, daemon=True).start()
            assert done.wait(WAIT), "an idle poll waited for SQLite's write lock"
        finally:
            writer.exec_driver_sql("ROLLBACK")
    assert polls == [None, None, None]


def queue_in_flight(engine: Engine, claimed: int, waiting: int) -> Inbox:
    """`claimed` learners' messages in flight (claimed, their leases live), the oldest, then
    one message each of `waiting` other learners."""
    empty_queues(engine)
    far = datetime.now(UTC) + timedelta(hours=1)
    in_flight = [
        {"channel": "test", "platform_id": f"flight-{n}", "address": f"test:flight-{n}"}
        | {"chat_id": "f", "text": "hola", "status": "claimed", "claim_token": "t"}
        | {"lease_expires_at": far, "attempts": 1}
        for n in range(claimed)
    ]
    others = [
        {"channel": "test", "platform_id": f"wait-{n}", "address": f"test:wait-{n:04}"}
        | {"chat_id": "w", "text": "hola", "status": "pending"}
        for n in range(waiting)
    ]
    with engine.begin() as connection:
        connection.execute(insert(InboxItem), in_flight)
        if others:
            connection.execute(insert(InboxItem), others)
    return Inbox(engine, LONG_LEASE)


def in_flight_work(engine: Engine, claimed: int) -> tuple[int, ...]:
    """The work of the next claim with `claimed` turns in flight and 200 learners waiting
    (checking it takes the oldest waiting one)."""
    inbox = queue_in_flight(engine, claimed, 200)
    if engine.dialect.name == "postgresql":
        return postgres_work(engine, inbox)
    claim, steps = sqlite_steps(engine, inbox.claim_next)
    assert claim is not None and claim.address == "test:wait-0000"
    return (steps,)


def test_a_claim_does_little_more_work_with_128_turns_in_flight_than_with_4(
    engine: Engine,
) -> None:
    """A worker keeps up to 128 turns in flight. The claim used to look first at the 8 oldest
    unfinished items, which were then all claimed ones, so every claim walked the first
    item of every waiting address (200 here): on SQLite 28,740 instructions against about
    400 with 4 in flight, and on Postgres 2,325 pages against 7. It looks at the oldest
    pending items now: the claimed ones in front cost a look each on the way (877
    instructions; 14 pages), not a walk."""
    few, many = in_flight_work(engine, 4), in_flight_work(engine, 128)
    print(f"claim work ({engine.dialect.name}): {few} with 4 in flight, {many} with 128")
    work = -1  # SQLite's instructions; Postgres's pages (its rows grow with the look)
    assert many[work] <= 3 * few[work], f"claim work: {few} with 4 in flight, {many} with 128"


def empty_claim_work(engine: Engine, claimed: int) -> tuple[int, ...]:
    """The work of a claim that finds nothing with `claimed` turns in flight and no message
    waiting (a poll at a busy worker), checking it finds nothing."""
    inbox = queue_in_flight(engine, claimed, 0)
    if engine.dialect.name == "postgresql":
        return postgres_work(engine, inbox)
    claim, steps = sqlite_steps(engine, inbox.claim_next)
    assert claim is None
    return (steps,)


def test_a_claim_that_finds_nothing_walks_no_address_in_flight(engine: Engine) -> None:
    """With nothing claimable, the claim does not walk the first item of every address in
    flight (the walk that finds a message held back behind a burst): it looks through the
    unfinished items in id order for one claimable at all, a row each, and stops there.
    Before, an empty claim at 128 turns in flight visited 17,026 rows and 655 pages on
    Postgres (68 and 17 at 4 in flight), and cost SQLite 11,277 instructions (489); now 256
    rows and 6 pages, and 1,615 instructions."""
    few, many = empty_claim_work(engine, 4), empty_claim_work(engine, 128)
    print(f"empty claim work ({engine.dialect.name}): {few} with 4 in flight, {many} with 128")
    if engine.dialect.name == "postgresql":
        assert many[1] <= 4 * few[1], f"pages: {few} with 4 in flight, {many} with 128"
        assert many[0] <= 3 * 128, f"rows: {few} with 4 in flight, {many} with 128"
    else:
        assert many[0] <= 20 * 128, f"instructions: {few} with 4 in flight, {many} with 128"


def test_the_replys_look_for_a_waiting_message_reads_one_row_behind_a_burst(
    engine: Engine,
) -> None:
    """Every reply's write asks whether another inbox message waits (`INBOX_READY`). Behind a
    burst of 10,000 pending items it reads the first and stops (2 rows, 5 pages): written as
    an EXISTS, Postgres scanned every unfinished item (5,001 rows, 70 pages)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite's plan reads the index in order by itself")
    queue_a_burst(engine, 10_000, 5_000)
    ready = select(INBOX_READY).params(now=datetime.now(UTC))
    rows, pages = query_work(engine, ready)
    print(f"INBOX_READY behind a burst: {rows} rows, {pages} pages")
    assert rows <= 10 and pages <= 10, f"{rows} rows, {pages} pages"
