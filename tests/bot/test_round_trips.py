"""How many round trips to the database a message costs: each one is a wait, and the worker
pays them for every message. On Postgres a transaction adds BEGIN and COMMIT (or ROLLBACK)
to its statements, and one-statement work runs without them (`db.autocommit`); SQLite's are
in-process, so there the statements are what counts. A change that adds one should mean to."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event

from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, failing, reply_json
from tests.support import RecordingSender, handle, inbound


@dataclass
class Cost:
    """The statements sent, and the transactions that were more than one statement's own,
    while it was on."""

    transactions: int = 0
    statements: int = 0
    on: bool = False

    def of(self, work: Callable[[], object]) -> int:
        """The round trips `work` cost: its statements, and on Postgres the BEGIN and COMMIT
        of each transaction not in autocommit."""
        self.transactions = self.statements = 0
        self.on = True
        try:
            work()
        finally:
            self.on = False
        return self.statements + 2 * self.transactions


@pytest.fixture
def cost(engine: Engine) -> Iterator[Cost]:
    counted = Cost()
    postgres = engine.dialect.name == "postgresql"

    def began(connection: Connection) -> None:
        autocommit = connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        if counted.on and postgres and not autocommit:
            counted.transactions += 1

    def executed(*_: Any) -> None:
        if counted.on:
            counted.statements += 1

    event.listen(engine, "begin", began)
    event.listen(engine, "before_cursor_execute", executed)
    yield counted
    event.remove(engine, "begin", began)
    event.remove(engine, "before_cursor_execute", executed)


def by_backend(engine: Engine, *, sqlite: int, postgres: int) -> int:
    return postgres if engine.dialect.name == "postgresql" else sqlite


def test_a_turn_costs_four_round_trips_on_postgres(pam: Pam, engine: Engine, cost: Cost) -> None:
    """Find the learner; store their message and read learner, summary, profile, unfolded
    messages and the limits' counts (on SQLite: two statements); read what review adds to the
    prompt (a /review under way, or the items due: one statement); store the reply with its
    usage and corrections and read the memory backlog (on SQLite: three or four statements
    in a transaction)."""
    user, inbox_id = unique_user(), uuid.uuid4().int % 2**62
    handle(pam, user, "Hola")  # the learner exists; no memory job is due after turn 2
    turn = cost.of(lambda: handle(pam, user, "¿Qué tal?", inbox_id=inbox_id))
    assert turn == by_backend(engine, sqlite=7, postgres=4)
    # Run again after a crash: find the learner; the insert fails (on Postgres, both the
    # turn's first statement and the plain insert that tells why); message and reply in one.
    rerun = cost.of(lambda: handle(pam, user, "¿Qué tal?", inbox_id=inbox_id))
    assert rerun == by_backend(engine, sqlite=3, postgres=4)


def test_a_turn_with_corrections_costs_one_review_transaction_more_on_postgres(
    pam: Pam, engine: Engine, fake_model: FakeChatModel, cost: Cost
) -> None:
    """A plain turn's four, and once the reply is stored (on a channel: sent), off the
    reply's path, the corrections' patterns graded in one transaction: the learner's items
    with whether this message graded them already (one query), the new item, its grade's log
    and its card (a pattern seen before: the card's update and the log), BEGIN and
    COMMIT."""
    user = unique_user()
    handle(pam, user, "Hola")
    correction = {"original": "yo es", "corrected": "yo soy", "explanation": "ser"}
    fake_model.queue("reply", reply_json("¡Hola, Lena!", [correction | {"category": "grammar"}]))
    turn = cost.of(lambda: handle(pam, user, "Yo es Lena"))
    assert turn == by_backend(engine, sqlite=12, postgres=10)
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    [stored] = pam.store.ledger.corrections(learner.id)
    assert (stored.original, stored.corrected, stored.category) == ("yo es", "yo soy", "grammar")


def test_an_apology_costs_four_round_trips_on_postgres(
    pam: Pam, engine: Engine, fake_model: FakeChatModel, cost: Cost
) -> None:
    """Find the learner; store the message and read; what review adds to the prompt; the
    memory backlog."""
    user = unique_user()
    handle(pam, user, "Hola")
    fake_model.queue("reply", failing())
    apology = cost.of(lambda: handle(pam, user, "¿Qué tal?"))
    assert apology == by_backend(engine, sqlite=5, postgres=4)


def test_a_message_from_inbox_to_sent_costs_five_round_trips_on_postgres(
    pam: Pam, engine: Engine, cost: Cost
) -> None:
    """Claim it, with its learner; store the message and read the context (the claim found
    the learner); what review adds to the prompt; store the reply and finish the claim and
    queue the reply, in one statement (on SQLite: one transaction); record the send. On
    SQLite the claim first reads, without the write lock, whether anything is ready (issue
    27: idle lanes never hold up the web's writes), one statement more."""
    worker = Worker(pam, {"test": RecordingSender()})
    user = unique_user()
    worker.inbox.accept(inbound(user, "Hola"))
    worker.drain()  # the learner exists
    worker.inbox.accept(inbound(user, "¿Qué tal?"))
    assert cost.of(worker.answer_next) == by_backend(engine, sqlite=11, postgres=5)
