"""How many round trips to the database a message costs: each one is a wait, and the worker
pays them for every message. On Postgres a transaction adds BEGIN and COMMIT (or ROLLBACK)
to its statements, and one-statement work runs without them (`db.autocommit`); SQLite's are
in-process, so there the statements are what counts. A change that adds one should mean to.

Issue 30 (item 4) gave both backends one write path where Postgres' fused statements did not
pay (bench/write_paths.py, docs/benchmarks/speed.md "One write path"): a turn now stores the
learner's message and reads its context in two statements on Postgres too, one round trip
more than the fused statement's (about 1.7 ms of wall and 0.4 ms of CPU under this machine's
load: a thousandth of a real model's 1.5 s, a fiftieth of the worker's 20 ms of CPU a reply),
for about 50 lines of SQL and a fallback path fewer. The reply's write stays one statement
(it saves 6 to 9 round trips a message), and so does the web's accept with its NOTIFY.

The context's read also says whether review could offer anything (an item due, a /review
under way); when not, as on most turns, review's own read is skipped: one round trip fewer
(`ReviewOutlook`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event

from bot.channels import Sent
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, ManualExecutor, failing, reply_json
from tests.support import RecordingSender, handle, inbound
from webhooks.settings import Settings
from webhooks.wiring import build


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
    """Find the learner; store their message; read learner, summary, profile, unfolded
    messages, the limits' counts and review's outlook (on Postgres one statement once: see
    the module's docstring), which finds nothing due, so review's own read is skipped; store
    the reply with its usage and corrections and read the memory backlog (on SQLite: three or
    four statements in a transaction)."""
    user, inbox_id = unique_user(), uuid.uuid4().int % 2**62
    handle(pam, user, "Hola")  # the learner exists; no memory job is due after turn 2
    turn = cost.of(lambda: handle(pam, user, "¿Qué tal?", inbox_id=inbox_id))
    assert turn == by_backend(engine, sqlite=6, postgres=4)
    # Run again after a crash: find the learner; the insert fails; message and reply in one
    # (on Postgres one round trip fewer than before: the fused statement failed first).
    rerun = cost.of(lambda: handle(pam, user, "¿Qué tal?", inbox_id=inbox_id))
    assert rerun == by_backend(engine, sqlite=3, postgres=3)


@pytest.fixture
def later() -> ManualExecutor:
    return ManualExecutor()


@pytest.fixture
def pam_later(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, later: ManualExecutor
) -> Pam:
    """Pam whose memory jobs wait for `later.run_all()`."""
    return build(settings, model=fake_model, submit=later, engine=engine)


CORRECTION = {"original": "yo es", "corrected": "yo soy", "explanation": "ser"}


def test_a_turn_with_corrections_costs_a_plain_turns_four_on_postgres(
    pam_later: Pam, engine: Engine, fake_model: FakeChatModel, cost: Cost, later: ManualExecutor
) -> None:
    """A plain turn's four: the corrections, the grades left for the review job and the ask
    for that job go into the reply's one statement (on SQLite: three statements more in its
    transaction). Grading is the review job's, in the background: the claim of the job, one
    transaction that reads the grades left, the corrections, the learner's items with
    whether this message graded them already, writes the new item, its grade's log and its
    card (a pattern seen before: the card's update and the log) and deletes the grades left,
    and the job's release."""
    pam = pam_later
    user = unique_user()
    handle(pam, user, "Hola")
    later.run_all()
    fake_model.queue("reply", reply_json("¡Hola, Lena!", [CORRECTION | {"category": "grammar"}]))
    turn = cost.of(lambda: handle(pam, user, "Yo es Lena"))
    assert turn == by_backend(engine, sqlite=9, postgres=4)
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    [stored] = pam.store.ledger.corrections(learner.id)
    assert (stored.original, stored.corrected, stored.category) == ("yo es", "yo soy", "grammar")
    assert pam.store.reviews.patterns(learner.id) == []  # not graded yet
    job = cost.of(later.run_all)
    assert job == by_backend(engine, sqlite=9, postgres=13)
    [pattern] = pam.store.reviews.patterns(learner.id)
    assert pattern.mistakes == 1


def test_an_apology_costs_four_round_trips_on_postgres(
    pam: Pam, engine: Engine, fake_model: FakeChatModel, cost: Cost
) -> None:
    """Find the learner; store the message; read the context (nothing due for review);
    the memory backlog."""
    user = unique_user()
    handle(pam, user, "Hola")
    fake_model.queue("reply", failing())
    apology = cost.of(lambda: handle(pam, user, "¿Qué tal?"))
    assert apology == by_backend(engine, sqlite=4, postgres=4)


def test_a_message_from_inbox_to_sent_costs_five_round_trips_on_postgres(
    pam: Pam, engine: Engine, cost: Cost
) -> None:
    """Claim it, with its learner; store the message; read the context (the claim found the
    learner), which finds nothing due for review; store the reply and finish the claim and
    queue the reply, in one statement (on SQLite: one transaction, which also reads whether
    another message waits); record the send. On SQLite the claim first reads, without the
    write lock, whether anything is ready (issue 27: idle lanes never hold up the web's
    writes), one statement more."""
    worker = Worker(pam, {"test": RecordingSender()})
    user = unique_user()
    worker.inbox.accept(inbound(user, "Hola"))
    worker.drain()  # the learner exists
    worker.inbox.accept(inbound(user, "¿Qué tal?"))
    assert cost.of(worker.answer_next) == by_backend(engine, sqlite=11, postgres=5)


@dataclass
class Watching:
    """A sender that notes the round trips `cost` has counted when it sends."""

    cost: Cost
    inner: RecordingSender
    max_chars: int = 4096
    at_send: int = 0

    def length(self, text: str) -> int:
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        self.at_send = self.cost.statements + 2 * self.cost.transactions
        return self.inner.send(chat_id, text, idempotency_key=idempotency_key)


def test_a_corrected_reply_costs_its_lane_nothing_of_grading_after_the_send(
    pam_later: Pam,
    engine: Engine,
    fake_model: FakeChatModel,
    cost: Cost,
    later: ManualExecutor,
) -> None:
    """Between the send and the lane's next claim, a reply with corrections costs only the
    send's record, as a plain one does: its grades were left with the reply's write, and
    the review job that grades them is only handed to the executor. From the inbox to sent
    it costs a plain message's five round trips on Postgres (SQLite: the write's three
    statements more)."""
    pam = pam_later
    sender = RecordingSender()
    watching = Watching(cost, sender)
    worker = Worker(pam, {"test": watching})  # type: ignore[dict-item]
    user = unique_user()
    worker.inbox.accept(inbound(user, "Hola"))
    worker.drain()
    later.run_all()
    fake_model.queue("reply", reply_json("¡Hola, Lena!", [CORRECTION]))
    worker.inbox.accept(inbound(user, "Yo es Lena"))
    whole = cost.of(worker.answer_next)
    assert whole - watching.at_send == 1  # the send's record (mark_sent), nothing else
    assert whole == by_backend(engine, sqlite=14, postgres=5)
    assert len(later.pending) == 1  # the review job, handed over unstarted
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    assert pam.store.reviews.patterns(learner.id) == []
    later.run_all()
    [pattern] = pam.store.reviews.patterns(learner.id)
    assert pattern.mistakes == 1
