"""Check-ins through the Procfile's processes (issue 31): on Postgres, a web process and two
`pam worker`s with PAM_CHECKINS on, the loopback Telegram and Twilio servers and an
OpenAI-compatible server that takes its time over each check-in. Learners on both channels
have a check-in due now (planned through the store, as a round plans one); one worker is
SIGKILLed while check-ins are being claimed and composed, and the other, once the dead one's
leases run out, finishes. Each due check-in reaches Telegram or Twilio exactly once — none
lost, none twice but the one the kill may leave unrecorded between the platform's accepting
it and the outbox's record, as for any reply (the fault run's rule) — WhatsApp's inside the
24-hour window as a plain message and outside it through the operator's template."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Engine, func, select

from bench.fault_chaos import worker_started
from loopback import telegram_server, twilio_server
from loopback.harness import (
    PAM_CMD,
    db_upgrade,
    free_port,
    gunicorn,
    healthy,
    postgres_schema,
    processes,
    progress,
    service_env,
    wait_for,
)
from loopback.openai_server import OpenAIServer, default_answer
from loopback.telegram_server import TelegramServer
from loopback.twilio_server import TwilioServer
from memory.clock import ManualClock
from memory.database import db
from memory.database.claims import SENT
from memory.database.models_checkins import ANSWERED, CLAIMED, QUEUED, SCHEDULED, Checkin
from memory.database.models_queue import OutboxItem
from memory.store.message_store import Store
from tests.conftest import PG_URL
from tests.helpers.checkins import arrived

pytestmark = [pytest.mark.slow, pytest.mark.serial]

MADRID = ZoneInfo("Europe/Madrid")
TEMPLATE_SID = "HX0c5e1f9b7a3d4e2f8c6b5a4d3e2f1a0b"
LEARNERS = 36  # a third on Telegram, a third on WhatsApp inside the window, a third outside
COMPOSE_SECONDS = (0.4, 0.9)  # how long the model takes over one check-in
NAME = re.compile(r"account name: (CK\d{3})\b")


def checkin_answer(task: str, body: dict[str, Any], count: int) -> str:
    """A check-in naming its learner (the account name in the prompt), after a while."""
    if task != "checkin":
        return default_answer(task, body, count)
    time.sleep(random.uniform(*COMPOSE_SECONDS))
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    found = NAME.search(system)
    name = found.group(1) if found else "??"
    message = f"¡Hola {name}! Hace días que no hablamos. ¿Qué tal fue tu semana?"
    return json.dumps({"message": message, "topic": "their week"}, ensure_ascii=False)


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=checkin_answer) as server:
        yield server


def knobs(llm: OpenAIServer, tg: TelegramServer, twilio: TwilioServer, port: int) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "checkins",
        "TELEGRAM_BOT_TOKEN": telegram_server.TOKEN,
        "TELEGRAM_WEBHOOK_SECRET": "checkin-secret-5e0c7a1b9d",
        "TELEGRAM_API_URL": tg.base_url,
        "TWILIO_ACCOUNT_SID": twilio_server.ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": twilio_server.AUTH_TOKEN,
        "TWILIO_WHATSAPP_NUMBER": twilio_server.NUMBER,
        "TWILIO_API_URL": twilio.base_url,
        "PAM_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PAM_CHECKIN_WHATSAPP_TEMPLATE_SID": TEMPLATE_SID,
        "PAM_CHECKINS": "true",
        # A round a second, two check-ins composed at once per worker, and a dead worker's
        # claims taken up 3 s after it stopped renewing them.
        "PAM_CHECKINS_ROUND_SECONDS": "1",
        "PAM_CHECKINS_THREADS": "2",
        "PAM_CHECKINS_LEASE_SECONDS": "3",
        # Whatever the hour the test runs at, no learner is in their quiet hours.
        "PAM_CHECKINS_QUIET_START": "0",
        "PAM_CHECKINS_QUIET_END": "0",
        "PAM_POLL_SECONDS": "0.1",
        "PAM_INBOX_LEASE_SECONDS": "3",
        "PAM_DELIVERY_LEASE_SECONDS": "3",
        "PAM_JOB_LEASE_SECONDS": "5",
        "PAM_LLM_MAX_RETRIES": "0",
        "PAM_LLM_TIMEOUT": "10",
        "PAM_SHUTDOWN_WAIT_SECONDS": "5",
        "PAM_LOG_LEVEL": "INFO",
    }


def seed(engine: Engine) -> dict[str, str]:
    """Learners with a check-in due now: a third on Telegram, a third on WhatsApp who wrote 8
    hours ago (inside the window), a third who wrote 30 hours ago (outside it). Their names
    (CK000…) by address."""
    now = datetime.now(UTC)
    clock = ManualClock(now)
    store = Store(engine, clock)
    names = {}
    for n in range(LEARNERS):
        kind = n % 3
        address = f"telegram:{7_100_000_000 + n}" if kind == 0 else f"whatsapp:+3461{n:07d}"
        name = f"CK{n:03d}"
        clock.now = now - timedelta(hours=30 if kind == 2 else 8)
        learner = store.learners.learner(address, display_name=name)
        store.learners.update_settings(
            learner.id, target_language="Spanish", native_language="English", level="A2"
        )
        store.checkins.set_preference(learner.id, on=True)
        store.checkins.set_timezone(learner.id, "Europe/Madrid", stated=True)
        store.conversation.add_learner_message(learner.id, "Hoy trabajé mucho", 5)
        arrived(engine, address, clock.now)  # the window runs from when it reached Pam
        clock.now = now - timedelta(minutes=1)
        day = clock.now.astimezone(MADRID).date().isoformat()
        assert store.checkins.schedule(learner.id, day, clock.now)
        names[address] = name
    return names


def states(engine: Engine) -> Counter[str]:
    with engine.connect() as connection:
        rows = connection.execute(select(Checkin.state, func.count()).group_by(Checkin.state))
        return Counter({state: count for state, count in rows})


def reached(tg: TelegramServer, twilio: TwilioServer) -> Counter[str]:
    """How many check-ins reached each learner (by the name each one carries)."""
    texts = tg.sent_texts() + twilio.bodies()
    return Counter(m.group(0) for t in texts if (m := re.search(r"CK\d{3}", t)))


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_each_due_checkin_reaches_its_learner_once_through_a_worker_kill(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    assert PG_URL
    with (
        TelegramServer() as tg,
        TwilioServer() as twilio,
        postgres_schema(PG_URL, prefix="pam_checkins") as url,
        processes(tmp_path, who="checkins") as group,
    ):
        port = free_port()
        env = service_env(url, **knobs(llm, tg, twilio, port))
        db_upgrade(env, tmp_path)
        engine = db.make_engine(url)
        try:
            names = seed(engine)
            web = group.start("web", gunicorn(port, workers=1, threads=2), env)
            wait_for(lambda: healthy(f"http://127.0.0.1:{port}"), 60, "the web app")
            workers = [group.start(f"worker-{n}", [*PAM_CMD, "worker"], env) for n in (1, 2)]
            for worker in workers:
                wait_for(lambda w=worker: worker_started(w), 60, f"{worker.name} to start")

            # Kill one worker while check-ins are being claimed and composed: a few written,
            # others held under a claim, most still due.
            wait_for(lambda: states(engine)[QUEUED] >= 4, 60, "the first check-ins to be written")
            before = states(engine)
            group.kill(workers[0])
            # What had reached the platforms by the kill (a send on its way then lands within
            # moments; a second copy cannot come before the dead worker's 3 s leases end).
            time.sleep(0.5)
            at_kill = reached(tg, twilio)
            progress(f"SIGKILL {workers[0].name}: {dict(before)}", "checkins")
            assert before[CLAIMED] >= 1 or before[SCHEDULED] >= 1, before

            def finished() -> bool:
                done = states(engine)
                return (
                    done[QUEUED] + done[ANSWERED] == LEARNERS
                    and sum(reached(tg, twilio).values()) >= LEARNERS
                )

            wait_for(finished, 120, "every check-in to be written and delivered")
            time.sleep(3.0)  # a second copy from a retried delivery would arrive now
            assert workers[1].popen.poll() is None, workers[1].tail()
            assert web.popen.poll() is None, web.tail()

            counts = reached(tg, twilio)
            twice = {name: n for name, n in counts.items() if n > 1}
            lost = set(names.values()) - set(counts)
            # The one gap the design documents (docs/how/checkins.md, "Exactly once"; the fault
            # run allows the same for replies): a worker SIGKILLed after the platform accepted
            # a check-in but before its outbox row recorded it leaves it to be sent again. So
            # the kill may explain one check-in sent exactly twice, its first copy already
            # there at the kill; any other duplicate fails.
            in_gap = {name for name, n in twice.items() if n == 2 and at_kill[name] == 1}
            assert set(twice) == in_gap and len(in_gap) <= 1, f"delivered more than once: {twice}"
            assert not lost, f"never delivered: {sorted(lost)}"
            assert set(counts) == set(names.values())

            with engine.connect() as connection:
                rows = connection.execute(
                    select(
                        Checkin.learner_id, Checkin.local_day, Checkin.attempts, Checkin.template
                    ).where(Checkin.state.in_((QUEUED, ANSWERED)))
                ).all()
                pending = connection.execute(
                    select(func.count()).where(OutboxItem.checkin, OutboxItem.status != SENT)
                ).scalar()
            # One check-in written per learner and local day (the next, planned after it,
            # waits for a later day); the dead worker's claims were taken up again by the
            # live one (a second attempt), and written once all the same.
            assert len({(r.learner_id, r.local_day) for r in rows}) == LEARNERS == len(rows)
            assert any(r.attempts >= 2 for r in rows), "the kill hit no claimed check-in"
            assert pending == 0
            # WhatsApp: a plain message inside the 24-hour window, the template outside it.
            for message in twilio.messages:
                name = names[message["To"]]
                outside = int(name[2:]) % 3 == 2
                assert (message.get("ContentSid") == TEMPLATE_SID) == outside, message
                assert ("Body" in message) != outside, message
        finally:
            engine.dispose()
