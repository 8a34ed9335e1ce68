"""Helpers the tests share: queue rows, settings with knobs, inbound messages, bounded waits,
lease expiry on a manual clock, a recording sender. Fixtures built on them live in
tests/conftest.py."""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from loopback.harness import Process, wait_for
from memory.clock import ManualClock
from memory.database import db
from memory.database.claims import Lease
from memory.database.models_queue import InboxItem, OutboxItem
from memory.messages import Inbound, Sent

Q = TypeVar("Q", InboxItem, OutboxItem)
C = TypeVar("C", bound=Lease)  # a queue's claim type
WAIT = 20.0  # a safety bound for polling loops, never an expectation about speed
# The bound of a wait on real processes (wait_for_event): a hang, never a loaded machine.
HANG_SECONDS = 600.0
API_TOKEN = "test-api-token-5f2c"


def handle(
    pam: Pam, address: str, text: str, display_name: str | None = None, **request: Any
) -> list[str]:
    """The texts Pam answers `text` with, the whole turn taken as `pam chat` takes it: the
    reply stored, then its after-send work (`request`: the TurnRequest's other fields)."""
    return pam.local_turns().take(TurnRequest(address, text, display_name, **request)).replies


def forget(pam: Pam, address: str, command: str = "/forget", **request: Any) -> list[str]:
    """/forget as a learner says it now (`command`): the question, then a tap on its confirm
    button (the command it carries, with the question's one-time code); the texts Pam answers
    the tap with (`request`: the TurnRequest's other fields, for both)."""
    asked = pam.local_turns().take(TurnRequest(address, command, **request))
    confirm = [b.command for b in asked.buttons if b.command.startswith("/forget yes ")]
    assert len(confirm) == 1, f"/forget asked no confirmation: {asked.replies}"
    return handle(pam, address, confirm[0], **request)


def queue_items(engine: Engine, model: type[Q], *conditions: Any, order_by: Any = None) -> list[Q]:
    """Detached inbox or outbox rows matching `conditions`, in id order (or `order_by`)."""
    with Session(engine) as session:
        rows = list(
            session.scalars(
                select(model)
                .where(*conditions)
                .order_by(model.id if order_by is None else order_by)
            )
        )
        session.expunge_all()
        return rows


def explained_plan(explained: Any) -> dict[str, Any]:
    """The top node of an `EXPLAIN (ANALYZE, FORMAT JSON)` result (psycopg hands the JSON
    back parsed, or as text)."""
    return dict((json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"])


def rows_visited(node: dict[str, Any], table: str) -> int:
    """The rows a plan's scans of `table` and of any index visit: each one's rows returned
    or removed by a filter, times its loops, over the whole tree under `node`."""
    visited = 0
    if node.get("Relation Name") == table or "Index Name" in node:
        seen = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
        visited = int(seen * node["Actual Loops"])
    return visited + sum(rows_visited(child, table) for child in node.get("Plans", []))


def inbound(address: str, text: str = "Hola", *, channel: str = "test", pid: str = "") -> Inbound:
    """An inbound message for `address` with a fresh platform id (unless `pid` is given)."""
    return Inbound(
        channel=channel,
        platform_id=pid or uuid.uuid4().hex,
        address=address,
        chat_id=address.split(":", 1)[-1],
        text=text,
    )


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    wait_for(condition, timeout, what, poll=0.01)


def wait_for_event(condition: Callable[[], bool], what: str, *watched: Process) -> None:
    """Wait until `condition` holds: an event that the `watched` processes bring about. Fails
    as soon as one of them has exited, else only after HANG_SECONDS, the guard against a hang:
    on a loaded machine a process takes a minute to start or to answer where an idle one takes
    seconds, and a wait bounded by the clock would fail there (polls gently, every 50 ms)."""

    def happened() -> bool:
        if condition():
            return True
        for process in watched:
            code = process.popen.poll()
            assert code is None, f"{process.name} exited ({code}) before {what}:\n{process.tail()}"
        return False

    wait_for(happened, HANG_SECONDS, what, poll=0.05)


def migrate(database_url: str) -> None:
    """Bring the database at `database_url` to the newest migration in this process, as `pam
    db upgrade` does before a service starts, without starting one more process (the command
    itself: tests/webhooks/test_release.py, and the release commands in tests/system/)."""
    engine = db.make_engine(database_url)
    try:
        db.upgrade(engine)
    finally:
        engine.dispose()


def outlive(clock: ManualClock, lease: timedelta) -> None:
    """Move `clock` just past a `lease` taken now: the claim holding it is void, its item
    claimable again (instead of the test sleeping through the lease)."""
    clock.advance(lease + timedelta(milliseconds=1))


def claim_eventually(take: Callable[[], C | None], clock: ManualClock, lease: timedelta) -> C:
    """The next claim from `take` (a queue's claim_next) once the `lease` an earlier claim
    holds has run out on `clock`."""
    outlive(clock, lease)
    claim = take()
    assert claim is not None, "nothing was claimable once the lease ran out"
    return claim


@dataclass(frozen=True)
class Delivery:
    """One reply a RecordingSender was asked to send."""

    chat_id: str
    text: str
    idempotency_key: str


@dataclass
class RecordingSender:
    """A Sender that records every call; queued exceptions are raised by the next calls."""

    calls: list[Delivery] = field(default_factory=list)
    failures: deque[Exception] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)
    max_chars: int = 4096

    def length(self, text: str) -> int:
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        with self.lock:
            self.calls.append(Delivery(chat_id, text, idempotency_key))
            failure = self.failures.popleft() if self.failures else None
        if failure is not None:
            raise failure
        return Sent(platform_id=f"p-{idempotency_key}")

    def texts_to(self, chat_id: str) -> list[str]:
        """The texts sent to `chat_id`, in order."""
        with self.lock:
            return [d.text for d in self.calls if d.chat_id == chat_id]


def forged(token: str) -> str:
    """A signed link's token with its signature changed in a character that carries only
    signature bits: the signature's first (its last may hold base64 padding bits that no
    decoder reads, and changing those would forge nothing)."""
    head, _, signature = token.rpartition(".")
    first = "B" if signature[0] == "A" else "A"
    return f"{head}.{first}{signature[1:]}"
