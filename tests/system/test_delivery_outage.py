"""A reply the platform accepted is recorded as sent even when the database fails right after
the send (a Postgres restart or failover): it is not sent a second time."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, make_url, text
from sqlalchemy.exc import OperationalError

from memory.database import db
from memory.database.claims import SENT
from memory.database.models_queue import OutboxItem
from memory.messages import Sent
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from tests.conftest import unique_user
from tests.support import inbound, queue_items

LEASE = 30.0


def queued_reply(engine: Engine, text_: str = "¡Hola!") -> int:
    """One message accepted and answered with one reply; the reply's outbox id."""
    inbox = Inbox(engine, LEASE)
    inbox.accept(inbound(unique_user(), "Hola"))
    claim = inbox.claim_next()
    assert claim is not None and inbox.complete(claim, [text_])
    [reply] = queue_items(engine, OutboxItem, OutboxItem.inbox_id == claim.id)
    return reply.id


def test_postgres_connection_lost_after_the_send_still_records_it_once(
    database_url: str, engine: Engine
) -> None:
    if make_url(db.normalize_url(database_url)).get_backend_name() != "postgresql":
        pytest.skip("cuts the delivering connection with pg_terminate_backend")
    name = f"pam-outage-{threading.get_ident()}"
    url = make_url(db.normalize_url(database_url))
    options = url.query.get("options", "")
    tagged = db.make_engine(
        url.update_query_dict({"application_name": name, "options": options}).render_as_string(
            hide_password=False
        )
    )
    try:
        reply_id = queued_reply(engine)
        outbox = Outbox(tagged, LEASE)
        claim = outbox.claim_next()
        assert claim is not None and claim.id == reply_id
        sends: list[str] = []

        def send() -> Sent:
            sends.append(claim.text)
            # The platform has it; now the server drops the delivering connection.
            with engine.begin() as connection:
                killed = connection.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                ).scalar_one()
            assert killed >= 1
            return Sent(platform_id="tg-77")

        outbox.deliver(claim, send)
        assert sends == ["¡Hola!"]
        [row] = queue_items(engine, OutboxItem, OutboxItem.id == reply_id)
        assert (row.status, row.platform_message_id, row.text) == (SENT, "tg-77", "")
        assert outbox.claim_next() is None, "a recorded delivery is never claimed again"
    finally:
        tagged.dispose()


def test_a_failed_record_after_the_send_is_retried_until_it_lands(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply_id = queued_reply(engine)
    outbox = Outbox(engine, LEASE)
    claim = outbox.claim_next()
    assert claim is not None
    failures = iter([True, True, False])
    real_mark_sent = Outbox.mark_sent

    def flaky_mark_sent(self: Outbox, claim_: object, platform_id: str | None) -> bool:
        if next(failures):
            raise OperationalError("UPDATE outbox", {}, Exception("server closed the connection"))
        return real_mark_sent(self, claim_, platform_id)  # type: ignore[arg-type]

    monkeypatch.setattr(Outbox, "mark_sent", flaky_mark_sent)
    outbox.deliver(claim, lambda: Sent(platform_id="wa-1"))
    [row] = queue_items(engine, OutboxItem, OutboxItem.id == reply_id)
    assert (row.status, row.platform_message_id) == (SENT, "wa-1")


def test_a_send_that_fails_records_nothing_and_propagates(engine: Engine) -> None:
    reply_id = queued_reply(engine)
    outbox = Outbox(engine, LEASE)
    claim = outbox.claim_next()
    assert claim is not None

    def send() -> Sent:
        raise OperationalError("SELECT 1", {}, Exception("database is down"))

    with pytest.raises(OperationalError):
        outbox.deliver(claim, send)
    [row] = queue_items(engine, OutboxItem, OutboxItem.id == reply_id)
    assert row.status != SENT and row.sent_at is None
