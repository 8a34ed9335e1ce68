"""/forget in chat, scrubbed by the worker (bot/worker/scrubbing.py): the yes that confirms a
/forget and Pam's confirmation carry the learner's address and name until the confirmation is
sent (or given up) and both are unlinked, so the checkpoint that clears the files waits for
that, and then no byte of the SQLite files names the learner. A scrub that cannot complete is
tried again with a growing pause."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bot import phrases
from bot.channels import PermanentSendError
from bot.worker.runtime import Pam
from bot.worker.scrubbing import (
    IDLE_POLL_SECONDS,
    MAX_RETRY_SECONDS,
    WAITING_POLL_SECONDS,
    Scrubbing,
)
from bot.worker.worker import Worker
from memory.database import db
from memory.messages import Inbound
from memory.store.scrubs import Outcome, Scrubs
from tests.fakes import FakeChatModel
from tests.support import RecordingSender, handle
from webhooks.settings import Settings
from webhooks.wiring import build

CHANNEL = "test"
ADDRESS = "test:+34612000999"
CHAT = "+34612000999"
NAME = "Lucía Zarzamora-Quetzal"
PHRASE = "mi loro Pumpernickel canta tangos"


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'pam.db'}")
    db.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def on_sqlite(sqlite_engine: Engine, fake_model: FakeChatModel) -> Pam:
    settings = Settings(database_url=str(sqlite_engine.url), llm={"api_key": "test-key"})
    return build(settings, model=fake_model, submit=lambda work: work(), engine=sqlite_engine)


def say(worker: Worker, text: str) -> None:
    message = Inbound(CHANNEL, uuid.uuid4().hex, ADDRESS, CHAT, text, NAME)
    assert worker.inbox.accept(message)


def naming(engine: Engine) -> list[str]:
    path = db.sqlite_file(str(engine.url))
    assert path is not None
    beside = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    data = b"".join(p.read_bytes() for p in (path, *beside) if p.exists())
    return [needle for needle in (CHAT, NAME, PHRASE) if needle.encode() in data]


@pytest.mark.parametrize("confirmation", ["sent", "given up"])
def test_a_chat_forget_is_scrubbed_once_its_confirmation_is_out(
    on_sqlite: Pam, sender: RecordingSender, confirmation: str
) -> None:
    pam = on_sqlite
    worker = Worker(pam, {CHANNEL: sender})
    say(worker, f"Hola, {PHRASE}")
    worker.drain()
    say(worker, "/forget")
    worker.drain()  # the question, answered and sent
    say(worker, "yes")
    # The yes is answered, its confirmation queued for a delivery lane but not sent yet.
    claim = worker.inbox.claim_next()
    assert claim is not None and claim.text == "yes"
    replies = handle(pam, claim.address, claim.text, claim.display_name, inbox_id=claim.id)
    assert worker.inbox.complete(claim, replies)
    assert pam.store.learners.find_learner(ADDRESS) is None

    # The confirmation still names the learner: the scrub waits for it.
    assert pam.store.scrubs.run() is Outcome.WAITING
    assert CHAT in naming(pam.engine)

    if confirmation == "given up":
        sender.failures.append(PermanentSendError("the learner blocked the bot"))
    worker.drain()  # delivers (or gives up), then scrubs

    assert sender.texts_to(CHAT)[-1] == phrases.FORGOTTEN
    assert pam.store.scrubs.pending() == []
    assert naming(pam.engine) == []


class ScriptedScrubs(Scrubs):
    """Scrubs whose runs come out as scripted."""

    def __init__(self, engine: Engine, *outcomes: Outcome) -> None:
        super().__init__(engine)
        self.outcomes = list(outcomes)

    def run(self, within: float = 0.0) -> Outcome:
        return self.outcomes.pop(0)


def test_a_scrub_that_cannot_complete_is_retried_with_a_growing_pause(
    sqlite_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.worker.scrubbing")
    busy = [Outcome.BUSY] * 12
    outcomes = (Outcome.NONE, Outcome.WAITING, *busy, Outcome.DONE, Outcome.NONE)
    scrubbing = Scrubbing(ScriptedScrubs(sqlite_engine, *outcomes))
    assert scrubbing.step() == IDLE_POLL_SECONDS
    assert scrubbing.step() == WAITING_POLL_SECONDS
    pauses = [scrubbing.step() for _ in busy]
    assert pauses[0] <= 1.2 and pauses[3] > pauses[0] * 2  # doubling, with jitter
    assert max(pauses) == MAX_RETRY_SECONDS == pauses[-1]
    warnings = [r for r in caplog.records if "forget scrub pending" in r.getMessage()]
    assert len(warnings) == len(busy)  # each failed attempt is reported
    assert scrubbing.step() == 0.0  # done: look again at once
    assert "failed_attempts=12" in caplog.records[-1].getMessage()
    assert scrubbing.step() == IDLE_POLL_SECONDS and scrubbing.failures == 0
