"""How many transactions and statements a tutor turn costs: each one is a wait on the database
(on Postgres a transaction adds a ping, BEGIN and COMMIT/ROLLBACK to its statements), and the
worker pays them for every message. A change that adds one should mean to."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, event

from bot.runtime import Pam
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, failing


@dataclass
class Cost:
    """The transactions begun and the statements sent while it was on."""

    transactions: int = 0
    statements: int = 0
    on: bool = False

    def of(self, work: Callable[[], object]) -> tuple[int, int]:
        """(transactions, statements) that `work` cost."""
        self.transactions = self.statements = 0
        self.on = True
        try:
            work()
        finally:
            self.on = False
        return self.transactions, self.statements


@pytest.fixture
def cost(engine: Engine) -> Iterator[Cost]:
    counted = Cost()

    def began(*_: Any) -> None:
        if counted.on:
            counted.transactions += 1

    def executed(*_: Any) -> None:
        if counted.on:
            counted.statements += 1

    event.listen(engine, "begin", began)
    event.listen(engine, "before_cursor_execute", executed)
    yield counted
    event.remove(engine, "begin", began)
    event.remove(engine, "before_cursor_execute", executed)


def test_a_turn_costs_five_transactions(pam: Pam, cost: Cost) -> None:
    """Find the learner; store their message; the limits' counts; learner, summary and profile
    then the unfolded messages; the reply, its usage and the memory backlog."""
    user, inbox_id = unique_user(), uuid.uuid4().int % 2**62
    pam.tutor.handle(user, "Hola")  # the learner exists; no memory job is due after turn 2
    assert cost.of(lambda: pam.tutor.handle(user, "¿Qué tal?", inbox_id=inbox_id)) == (5, 8)
    # Run again after a crash: find the learner; the insert fails; message and reply in one.
    assert cost.of(lambda: pam.tutor.handle(user, "¿Qué tal?", inbox_id=inbox_id)) == (3, 3)


def test_an_apology_costs_five_transactions(
    pam: Pam, fake_model: FakeChatModel, cost: Cost
) -> None:
    user = unique_user()
    pam.tutor.handle(user, "Hola")
    fake_model.queue("reply", failing())
    assert cost.of(lambda: pam.tutor.handle(user, "¿Qué tal?")) == (5, 6)
