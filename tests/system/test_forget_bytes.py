"""/forget through the Procfile's processes (real gunicorn web, `pam worker`) on SQLite, with
the loopback Telegram and Twilio: /forget asks first and erases nothing until it is confirmed;
once a WhatsApp learner (through Twilio's signed webhook, tapping the quick reply) and a
Telegram learner (tapping the inline button) have confirmed and heard Pam say it is done, no
byte of pam.db, its write-ahead log, its shared-memory index or a rollback journal holds their
phone number, Telegram id, name or a phrase they wrote — the yes and its answer included. A
stale button, a redelivered tap or a tap again afterwards erases nothing more and makes nobody
up. With another connection holding a read snapshot the files cannot be cleaned: the
operator's /forget says so (202, pending) instead of 200, the worker retries, and the scrub
completes once the reader lets go."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from bot import phrases
from bot.i18n import words_for
from bot.turn import forgetting
from loopback.harness import sqlite_url, wait_for
from loopback.openai_server import OpenAIServer
from loopback.telegram_server import TelegramServer
from loopback.twilio_server import MediaCDN, TwilioServer, sign, tap_form
from tests.helpers.channels import Running, channel_services
from tests.support import HANG_SECONDS
from tests.webhooks.telegram import updates
from tests.webhooks.whatsapp.conftest import text_form

pytestmark = pytest.mark.slow

SECRET = "pam-forget-webhook-secret"
ADMIN = "pam-forget-admin-token-5d1e"
WAIT = HANG_SECONDS  # each wait ends on its event; the bound is a hang guard
# The WhatsApp learner's number is Spanish (+34): Pam's own words to them are in Spanish.
SPANISH_FORGOTTEN = phrases.said(phrases.FORGOTTEN, "Spanish")
SPANISH_STALE = words_for("Spanish", forgetting.DOMAIN)(forgetting.STALE)


@dataclass
class Learners:
    """A WhatsApp learner and a Telegram learner, each with words only they used, and a
    Telegram bystander who stays."""

    wa_id: str
    wa_name: str
    wa_phrase: str
    telegram: dict[str, Any]
    tg_phrase: str
    bystander: dict[str, Any]

    @property
    def whatsapp(self) -> str:
        return f"whatsapp:+{self.wa_id}"

    def whatsapp_needles(self) -> list[str]:
        return [self.wa_id, self.wa_name, self.wa_phrase]

    def telegram_needles(self) -> list[str]:
        return [str(self.telegram["id"]), self.telegram["first_name"], self.tg_phrase]


def _learners() -> Learners:
    tag = uuid.uuid4().hex[:8]
    return Learners(
        wa_id="34" + str(uuid.uuid4().int)[:10],
        wa_name=f"Lucía Zarzamora{tag}",
        wa_phrase=f"mi loro Quetzal{tag} canta tangos",
        telegram=updates.learner(f"Lenora{tag}"),
        tg_phrase=f"meine Katze Pumpernickel{tag} schläft",
        bystander=updates.learner("Bruno"),
    )


def _database(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def _files(database: Path) -> list[Path]:
    """The database file and every file SQLite keeps beside it."""
    beside = [Path(f"{database}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    return [path for path in (database, *beside) if path.exists()]


def naming(database: Path, needles: Sequence[str]) -> list[tuple[str, str]]:
    """(file, needle) for every needle some byte of the database's files still holds."""
    found = []
    for path in _files(database):
        data = path.read_bytes()
        found += [(path.name, needle) for needle in needles if needle.encode() in data]
    return found


def assert_named_nowhere(database: Path, needles: Sequence[str], within: float) -> None:
    """The needles leave the files within `within` seconds (the worker scrubs them once the
    /forget's confirmation is out); which remain if they do not."""
    deadline = time.monotonic() + within
    while naming(database, needles) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert naming(database, needles) == []


def _telegram(base: str, body: dict[str, Any]) -> None:
    posted = requests.post(
        f"{base}/telegram/webhook",
        json=body,
        headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        timeout=10,
    )
    assert posted.status_code == 200, posted.text


def _whatsapp(base: str, form: dict[str, str]) -> None:
    url = f"{base}/whatsapp/webhook"
    posted = requests.post(
        url, data=form, headers={"X-Twilio-Signature": sign(url, form)}, timeout=10
    )
    assert posted.status_code == 200, posted.text


def _admin(method: str, url: str) -> requests.Response:
    return requests.request(method, url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)


@dataclass
class Service:
    running: Running
    telegram: TelegramServer
    twilio: TwilioServer
    database: Path

    @property
    def base(self) -> str:
        return self.running.base


@contextmanager
def service(tmp_path: Path) -> Iterator[Service]:
    """The web and the worker on a SQLite file of their own (whatever database the other
    tests use: the files are what is scanned)."""
    url = sqlite_url(tmp_path)
    with (
        OpenAIServer() as llm,
        TelegramServer() as telegram,
        MediaCDN() as cdn,
        TwilioServer(cdn) as twilio,
        channel_services(tmp_path, url, llm, telegram, twilio, SECRET, PAM_ADMIN_TOKEN=ADMIN) as (
            running
        ),
    ):
        yield Service(running, telegram, twilio, _database(url))
        running.group.assert_alive()


def converse(service: Service, who: Learners) -> None:
    """Both learners set a language and say something of their own; the bystander too."""
    base, telegram, twilio = service.base, service.telegram, service.twilio
    _whatsapp(base, text_form(who.wa_id, "/language Spanish", profile_name=who.wa_name))
    _whatsapp(base, text_form(who.wa_id, f"Hola, {who.wa_phrase}", profile_name=who.wa_name))
    _telegram(base, updates.command(who.telegram, "/language German English"))
    _telegram(base, updates.text(who.telegram, f"Hallo, {who.tg_phrase}"))
    _telegram(base, updates.text(who.bystander, "Hola, soy Bruno"))
    wait_for(lambda: len(twilio.bodies(who.whatsapp)) == 2, WAIT, "the WhatsApp replies")
    wait_for(lambda: len(telegram.sent_texts(who.telegram["id"])) == 2, WAIT, "Telegram replies")
    wait_for(lambda: len(telegram.sent_texts(who.bystander["id"])) == 1, WAIT, "Bruno's reply")
    # The scans are not vacuous: every needle is in the files now.
    needles = who.whatsapp_needles() + who.telegram_needles()
    found = {needle for _, needle in naming(service.database, needles)}
    assert found == set(needles), set(needles) - found


def confirm_of(commands: Sequence[str]) -> str:
    """The command of a /forget question's confirm button, among a message's buttons."""
    (found,) = [c for c in commands if c.startswith("/forget yes ")]
    return found


def telegram_yes(service: Service, who: Learners) -> dict[str, Any]:
    """The update a tap on the newest Telegram question's confirm button sends."""
    keyboard = service.telegram.keyboards(who.telegram["id"])[-1]
    data = confirm_of([button["callback_data"] for row in keyboard for button in row])
    return service.telegram.tap(who.telegram, updates.private_chat(who.telegram), 1, data)


def whatsapp_yes(service: Service, who: Learners) -> dict[str, str]:
    """The form a tap on the newest WhatsApp question's confirm quick reply posts."""
    _, actions = service.twilio.quick_replies(who.whatsapp)[-1]
    command = confirm_of([action["id"] for action in actions])
    title = next(action["title"] for action in actions if action["id"] == command)
    return tap_form(who.whatsapp, title, command, ProfileName=who.wa_name)


def ask_to_forget(service: Service, who: Learners, heard: int = 2) -> None:
    """Both learners say /forget and are asked (after `heard` answers each), with the buttons
    under the question: nothing is erased yet, every needle is still in the files."""
    base, telegram, twilio = service.base, service.telegram, service.twilio
    _whatsapp(base, text_form(who.wa_id, "/forget", profile_name=who.wa_name))
    _telegram(base, updates.command(who.telegram, "/forget"))
    wait_for(lambda: len(twilio.bodies(who.whatsapp)) == heard + 1, WAIT, "WhatsApp's question")
    wait_for(lambda: len(telegram.sent_texts(who.telegram["id"])) == heard + 1, WAIT, "Telegram's")
    assert telegram.sent_texts(who.telegram["id"])[-1].startswith(forgetting.ASK)
    needles = who.whatsapp_needles() + who.telegram_needles()
    assert {needle for _, needle in naming(service.database, needles)} == set(needles)


def forget_in_chat(service: Service, who: Learners) -> None:
    """Both learners say /forget, confirm it with the button under the question, and hear
    that it is done."""
    base, telegram, twilio = service.base, service.telegram, service.twilio
    ask_to_forget(service, who)
    _whatsapp(base, whatsapp_yes(service, who))
    _telegram(base, telegram_yes(service, who))
    wait_for(lambda: len(twilio.bodies(who.whatsapp)) == 4, WAIT, "WhatsApp's confirmation")
    wait_for(lambda: len(telegram.sent_texts(who.telegram["id"])) == 4, WAIT, "Telegram's")
    assert twilio.bodies(who.whatsapp)[-1] == SPANISH_FORGOTTEN
    assert telegram.sent_texts(who.telegram["id"])[-1] == phrases.FORGOTTEN


def test_forget_in_chat_leaves_no_byte_that_names_the_learner(tmp_path: Path) -> None:
    who = _learners()
    with service(tmp_path) as running:
        converse(running, who)
        forget_in_chat(running, who)
        assert_named_nowhere(running.database, who.whatsapp_needles() + who.telegram_needles(), 30)
        # The bystander is still answered, and still named.
        _telegram(running.base, updates.text(who.bystander, "¿Sigues ahí?"))
        wait_for(lambda: len(running.telegram.sent_texts(who.bystander["id"])) == 2, WAIT, "Bruno")
        assert naming(running.database, [who.bystander["first_name"]])


def test_forget_erases_nothing_until_confirmed_and_a_stale_or_repeated_yes_nothing_more(
    tmp_path: Path,
) -> None:
    who = _learners()
    with service(tmp_path) as running:
        base, telegram, twilio = running.base, running.telegram, running.twilio
        tid, needles = who.telegram["id"], who.whatsapp_needles() + who.telegram_needles()
        converse(running, who)
        ask_to_forget(running, who)
        stale_telegram, stale_whatsapp = telegram_yes(running, who), whatsapp_yes(running, who)
        # Asked again: the first question's buttons are stale now.
        ask_to_forget(running, who, heard=3)
        _telegram(base, stale_telegram)
        _whatsapp(base, stale_whatsapp)
        wait_for(lambda: len(telegram.sent_texts(tid)) == 5, WAIT, "Telegram's stale answer")
        wait_for(lambda: len(twilio.bodies(who.whatsapp)) == 5, WAIT, "WhatsApp's stale answer")
        assert telegram.sent_texts(tid)[-1] == forgetting.STALE
        assert twilio.bodies(who.whatsapp)[-1] == SPANISH_STALE
        assert {needle for _, needle in naming(running.database, needles)} == set(needles)

        # The newest buttons, each tap delivered twice (a webhook redelivered): erased once.
        telegram_tap, whatsapp_tap = telegram_yes(running, who), whatsapp_yes(running, who)
        for _ in range(2):
            _telegram(base, telegram_tap)
            _whatsapp(base, whatsapp_tap)
        wait_for(lambda: len(telegram.sent_texts(tid)) == 6, WAIT, "Telegram's confirmation")
        wait_for(lambda: len(twilio.bodies(who.whatsapp)) == 6, WAIT, "WhatsApp's confirmation")
        assert telegram.sent_texts(tid)[-1] == phrases.FORGOTTEN
        assert twilio.bodies(who.whatsapp)[-1] == SPANISH_FORGOTTEN
        assert_named_nowhere(running.database, needles, 30)

        # Tapped again later (a new callback query, a new Twilio message): nothing to confirm,
        # said kindly, and no learner made up to say it.
        _telegram(base, telegram_yes(running, who))  # the same button: a new query id
        _whatsapp(base, whatsapp_yes(running, who))  # the same quick reply: a new MessageSid
        wait_for(lambda: len(telegram.sent_texts(tid)) == 7, WAIT, "Telegram's answer")
        wait_for(lambda: len(twilio.bodies(who.whatsapp)) == 7, WAIT, "WhatsApp's answer")
        time.sleep(1.0)  # and nothing more
        assert len(telegram.sent_texts(tid)) == 7 and len(twilio.bodies(who.whatsapp)) == 7
        assert telegram.sent_texts(tid)[-1] == forgetting.STALE
        assert twilio.bodies(who.whatsapp)[-1] == SPANISH_STALE
        for address in (f"telegram:{tid}", who.whatsapp):
            assert _admin("GET", f"{base}/admin/learners/{address}").status_code == 404
        # The bystander is untouched.
        _telegram(base, updates.text(who.bystander, "¿Sigues ahí?"))
        wait_for(lambda: len(telegram.sent_texts(who.bystander["id"])) == 2, WAIT, "Bruno")


# Another process that reads the database inside a transaction and keeps it open until its
# stdin closes. A process of its own: POSIX drops every lock a process holds on a file when it
# closes any descriptor of it, so the scans below would end a reader of this process's own.
READER = """
import sqlite3, sys
reader = sqlite3.connect(sys.argv[1], isolation_level=None)
reader.execute("BEGIN")
print(reader.execute("SELECT count(*) FROM learners").fetchone()[0], flush=True)
sys.stdin.read()
"""


@contextmanager
def reader_with_a_snapshot(database: Path) -> Iterator[None]:
    """Another connection inside a read transaction: it keeps the snapshot it started with,
    so no checkpoint may overwrite the pages it reads from the database file."""
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdin is not None and reader.stdout is not None
    try:
        assert int(reader.stdout.readline()) >= 3  # it has read: the snapshot is taken
        yield
    finally:
        reader.stdin.close()
        reader.stdout.close()
        reader.wait(timeout=30)


def pending_scrubs(base: str) -> list[dict[str, Any]]:
    answer = _admin("GET", f"{base}/admin/scrubs")
    assert answer.status_code == 200, answer.text
    pending: list[dict[str, Any]] = answer.json()["pending"]
    return pending


def test_with_a_reader_holding_a_snapshot_forget_is_pending_until_the_retry_scrubs(
    tmp_path: Path,
) -> None:
    who = _learners()
    with service(tmp_path) as running:
        base, database = running.base, running.database
        converse(running, who)
        whatsapp = _admin("GET", f"{base}/admin/learners/{who.whatsapp}").json()["learner"]["id"]

        with reader_with_a_snapshot(database):
            # The operator erases the WhatsApp learner: the rows go, the bytes cannot yet.
            answer = _admin("POST", f"{base}/admin/learners/{whatsapp}/forget")
            assert answer.status_code == 202, answer.text
            body = answer.json()
            assert (body["status"], body["learner"]) == ("pending", whatsapp)
            assert "retr" in body["detail"]
            assert naming(database, who.whatsapp_needles())  # honestly pending
            assert _admin("GET", f"{base}/admin/learners/{whatsapp}").status_code == 404
            # The Telegram learner says /forget meanwhile, confirms it, and hears it is done.
            _telegram(base, updates.command(who.telegram, "/forget"))
            wait_for(
                lambda: len(running.telegram.sent_texts(who.telegram["id"])) == 3,
                WAIT,
                "Telegram's question",
            )
            _telegram(base, telegram_yes(running, who))
            wait_for(
                lambda: len(running.telegram.sent_texts(who.telegram["id"])) == 4,
                WAIT,
                "Telegram's confirmation",
            )
            # The worker tries again (and again) while the reader holds on.
            wait_for(
                lambda: (
                    len(pending_scrubs(base)) == 2
                    and all(p["attempts"] >= 2 for p in pending_scrubs(base))
                ),
                WAIT,
                "the worker to retry both scrubs",
            )
            assert naming(database, who.telegram_needles())

        # The reader let go: the next retry completes, and nothing is pending.
        wait_for(lambda: pending_scrubs(base) == [], WAIT, "the retried scrub to complete")
        assert naming(database, who.whatsapp_needles() + who.telegram_needles()) == []
