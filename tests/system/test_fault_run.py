"""The fault-injection run (bench/faults.py) at a smaller scale: real gunicorn and `pam worker`
processes on Postgres, fake LLM, Telegram and Twilio servers, duplicate deliveries, LLM and
Telegram failures, two worker SIGKILLs, a web SIGKILL and (in CI) a Postgres restart. Every
failure column must be zero. The full 2,000-message run is `python3 dev.py bench faults`.

It asserts what the design promises, no more: a worker SIGKILLed between the platform
accepting a reply and the outbox recording it leaves that reply to be sent again (docs:
"Delivery"). So each worker kill may explain one reply sent twice for each learner whose reply
was in flight (a lane records a send before it sends that learner anything else); a duplicate
at any other moment, a third copy, or one its learner got something after before the kill
fails the test."""

from __future__ import annotations

import os

import pytest

from bench.fault_servers import LLM_FAULTS
from bench.faults import Options, run
from tests.conftest import PG_URL

# Serial: it kills and restarts processes on the shared Postgres (and in CI restarts the server),
# so `python3 dev.py test` runs it while no other test runs.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

# Restarting the shared Postgres would break other test runs on the same machine: CI (which
# runs alone) opts in.
RESTART_POSTGRES = os.environ.get("PAM_TEST_RESTART_POSTGRES") == "1"


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_every_message_is_answered_once_in_order_through_crashes_and_faults() -> None:
    assert PG_URL
    options = Options(
        messages=300,
        learners=20,
        duration=25.0,
        database_url=PG_URL,
        postgres_restart=RESTART_POSTGRES,
        settle=120.0,
        # On a machine shared with other CPU-heavy work an honest call took 1.9 s and one 2 s
        # timeout too many got a learner an apology: 5 s (injected stalls last 6 s, and a
        # memory job's call still ends well within its 10 s lease).
        llm_timeout=5.0,
        out=None,
        plot=False,
    )

    report = run(options)

    print(report.table())
    assert report.passed(), f"{report.failures()}\n" + "\n".join(report.details)
    assert report.accepted == 300
    # Every message answered exactly once, except those a kill's send-to-record gap explains.
    assert report.answered_once + report.twice_at_a_kill == report.accepted, report.details
    assert len(report.twice_per_kill) == 2, report.details
    assert report.webhook_posts > 300, "duplicates and retries were delivered"
    assert set(report.llm_faults) == set(LLM_FAULTS), report.llm_faults
    assert report.telegram_429s > 0 and report.folded_messages > 0
    kills = [e["what"] for e in report.events if e["what"].startswith("SIGKILL")]
    assert len(kills) == 3, report.events
    if RESTART_POSTGRES:
        assert any(e["what"] == "Postgres back" for e in report.events), report.events
