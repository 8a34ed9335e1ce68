"""The service as operators run it: real `gunicorn`, `pam worker`, `pam serve` and `pam db upgrade`
processes, a real OpenAI-compatible server and a real callback server on 127.0.0.1.

The acceptance test of the service backbone runs on Postgres: one web process, two workers, 200
messages from 20 learners with duplicate deliveries, and one worker killed with SIGKILL mid-run.
Every message must be answered exactly once, in per-learner order, with nothing lost from memory."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import Engine, select

from bench.fault_servers import reply_answer
from bot import phrases
from bot.corrections import parse_answer, render
from bot.turn import forgetting
from loopback.harness import (
    PAM_CMD,
    free_port,
    gunicorn,
    postgres_schema,
    processes,
    progress,
    service_env,
    sqlite_url,
    wait_for,
    wait_healthy,
)
from loopback.local_server import Answer, LocalServer
from loopback.openai_server import OpenAIServer, default_answer
from memory.database import db
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER, PAM
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.message_store import Store
from tests.conftest import PG_URL
from tests.support import HANG_SECONDS, migrate
from webhooks.api.payload import chat_address
from webhooks.api.signing import signature

pytestmark = pytest.mark.slow

TOKEN = "test-api-token-0c5e"
MARKER = re.compile(r"\b[LS]\d{2}-M\d{2}\b")
SLOW = "SLOW"  # a message containing this makes the fake LLM think for SLOW_SECONDS
SLOW_SECONDS = 2.0
TEMPLATES = [
    "Hola Pam, yo es muy contento hoy. ({marker})",
    "Ayer fui al mercado y compré tomates. ({marker})",
    "Mi hermana trabaja en un hospital grande. ({marker})",
    "El fin de semana yo es en la playa con amigos. ({marker})",
    "¿Tú sabes cocinar paella? Yo no. ({marker})",
]


# -- the fake LLM: echoes the marker of the learner's message, so replies map to messages ----


def shown(marker: str, text: str) -> str:
    """What Pam sends and stores for the message `text` carrying `marker`: reply plus
    correction line (bench.fault_servers.reply_answer: the fake corrects "yo es" where the
    message has it, and answers a learner's next message in other words)."""
    return render(parse_answer(reply_answer(marker, text)))


def echo_answer(task: str, body: dict[str, Any], count: int) -> str:
    """Replies think for 20–80 ms and echo the marker of the last learner message; memory jobs
    get the server's default answers."""
    if task != "reply":
        return default_answer(task, body, count)
    messages = body.get("messages", [])
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    time.sleep(SLOW_SECONDS if SLOW in last else random.uniform(0.02, 0.08))
    match = MARKER.search(last)
    return reply_answer(match.group(0) if match else "no-marker", last)


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=echo_answer) as server:
        yield server


# -- the operator's callback: records every delivered reply ----------------------------------


@dataclass(frozen=True)
class Delivery:
    """One reply POSTed to the callback URL."""

    id: str
    user: str
    text: str
    signed: bool  # X-Pam-Signature was right
    at: float  # arrival, time.time()

    @property
    def marker(self) -> str | None:
        match = MARKER.search(self.text)
        return match.group(0) if match else None


class Callback(LocalServer):
    """The operator's endpoint on 127.0.0.1: records deliveries in arrival order, answers 200.

    `record_into` makes it record into another Callback's list (one worker's own endpoint,
    feeding the shared record). While `gate` is clear it answers 503 without recording: the
    receiver is briefly unavailable, and the sender retries later."""

    def __init__(self, token: str, record_into: Callback | None = None) -> None:
        self.token = token
        self.deliveries: list[Delivery] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.ids: list[str] = []  # what this endpoint itself recorded
        self.recorder = record_into or self
        super().__init__()

    def receive(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        payload = json.loads(raw)
        signed = headers.get("X-Pam-Signature") == signature(self.token, raw)
        with self.recorder.lock:
            accepted = self.gate.is_set()
            if accepted:
                self.ids.append(payload["id"])
                self.recorder.deliveries.append(
                    Delivery(payload["id"], payload["user"], payload["text"], signed, time.time())
                )
        return (200 if accepted else 503), {}, b"{}"

    def recorded_ids(self) -> list[str]:
        with self.lock:
            return list(self.ids)

    @property
    def url(self) -> str:
        return f"{self.origin}/replies"

    def snapshot(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)

    def texts(self, user: str) -> list[str]:
        """The texts delivered to `user`, in arrival order."""
        return [d.text for d in self.snapshot() if d.user == user]


@pytest.fixture
def callback() -> Iterator[Callback]:
    with Callback(TOKEN) as server:
        yield server


def pam_knobs(llm: OpenAIServer, callback: Callback) -> dict[str, str]:
    """LLM, API channel, and short polls and leases so that a dead worker's work comes back fast."""
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test",
        "PAM_API_TOKEN": TOKEN,
        "PAM_API_CALLBACK_URL": callback.url,
        "PAM_POLL_SECONDS": "0.05",
        "PAM_INBOX_LEASE_SECONDS": "3",
        "PAM_DELIVERY_LEASE_SECONDS": "3",
        "PAM_JOB_LEASE_SECONDS": "5",
        "PAM_LLM_MAX_RETRIES": "0",
        "PAM_LLM_TIMEOUT": "10",
        "PAM_SUMMARY_TRIGGER_TOKENS": "150",
        "PAM_FOLD_BATCH_MESSAGES": "2",
        "PAM_SHUTDOWN_WAIT_SECONDS": "5",
    }


# -- learners' messages ----------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    id: str
    user: str
    text: str

    @property
    def key(self) -> str:
        """The inbox's platform id for it: the API deduplicates per user and id."""
        return chat_address(self.user, self.id)

    @property
    def marker(self) -> str:
        match = MARKER.search(self.text)
        assert match
        return match.group(0)


class Client:
    """Posts messages to the API channel from any number of threads; keeps every answer."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/api/messages"
        self.answers: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.local = threading.local()

    def post(self, message: Message) -> int:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        response = session.post(
            self.url,
            json={"id": message.id, "user": message.user, "text": message.text},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        with self.lock:
            self.answers.append((message.id, response.status_code))
        return response.status_code

    def assert_each_accepted_once(self, messages: list[Message]) -> None:
        """Every POST was acknowledged; each message was accepted (202) exactly once and every
        redelivery was recognised (200)."""
        with self.lock:
            answers = list(self.answers)
        assert {status for _, status in answers} <= {200, 202}, Counter(s for _, s in answers)
        accepted = Counter(mid for mid, status in answers if status == 202)
        assert accepted == Counter(m.id for m in messages), "a message accepted twice or never"


def conversation(user: str, marker_prefix: str, count: int) -> list[Message]:
    """`count` chat messages from `user`, each carrying a marker like L07-M03."""
    return [
        Message(
            f"{user}-{uuid.uuid4().hex[:8]}",
            user,
            TEMPLATES[n % len(TEMPLATES)].format(marker=f"{marker_prefix}-M{n + 1:02d}"),
        )
        for n in range(count)
    ]


# -- database inspection ---------------------------------------------------------------------


def outbox_rows(engine: Engine, outbox_ids: list[int]) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        rows = connection.execute(select(OutboxItem).where(OutboxItem.id.in_(outbox_ids)))
        return [dict(row._mapping) for row in rows]


def inbox_rows(engine: Engine, platform_ids: list[str]) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                InboxItem.id,
                InboxItem.platform_id,
                InboxItem.status,
                InboxItem.attempts,
                InboxItem.last_error,
            ).where(InboxItem.platform_id.in_(platform_ids))
        )
        return [dict(row._mapping) for row in rows]


def unfinished(engine: Engine) -> int:
    """Inbox and outbox items not yet answered or delivered."""
    counts = Counter(Inbox(engine, 1).counts()) + Counter(Outbox(engine, 1).counts())
    return counts["pending"] + counts["claimed"]


def all_sent(engine: Engine, delivery_ids: list[str]) -> bool:
    """Whether every delivery (id "pam-<outbox id>") is committed as sent in the outbox."""
    outbox_ids = [int(i.removeprefix("pam-")) for i in delivery_ids]
    return all(row["status"] == "sent" for row in outbox_rows(engine, outbox_ids))


def assert_delivered_once_in_order(
    engine: Engine,
    callback: Callback,
    sent: dict[str, list[Message]],
    killed_at: float | None = None,
) -> None:
    """Each message has exactly one reply, of the right text, signed, in per-learner order."""
    deliveries = callback.snapshot()
    assert all(d.signed for d in deliveries), "a delivery had a wrong X-Pam-Signature"
    per_marker = Counter(d.marker for d in deliveries)
    twice = sorted(m for m, n in per_marker.items() if m and n > 1)
    if twice:
        repeated = [d for d in deliveries if d.marker in twice]
        ids = sorted({int(d.id.removeprefix("pam-")) for d in repeated})
        since_kill = [
            (d.id, d.marker, f"{d.at - killed_at:+.4f}s" if killed_at else "-") for d in repeated
        ]
        raise AssertionError(
            f"{len(twice)} message(s) answered more than once: {twice}\n"
            f"deliveries (id, marker, arrival relative to the SIGKILL): {since_kill}\n"
            f"their outbox rows: {outbox_rows(engine, ids)}"
        )
    expected = {m.marker for messages in sent.values() for m in messages}
    missing = sorted(expected - set(per_marker))
    assert not missing, f"unanswered: {missing}"
    assert set(per_marker) == expected, f"replies to unknown messages: {set(per_marker) - expected}"
    for user, messages in sent.items():
        assert callback.texts(user) == [shown(m.marker, m.text) for m in messages], (
            f"{user}'s replies are out of order or wrong: "
            f"{[d.marker for d in deliveries if d.user == user]}"
        )


def assert_memory_holds(store: Store, user: str, messages: list[Message]) -> None:
    """The learner's conversation: each of their messages once, in order, each followed by
    exactly one reply from Pam."""
    learner = store.learners.find_learner(f"api:{user}")
    assert learner is not None, f"no learner for {user}"
    stored = [(m.role, m.content) for m in store.conversation.messages(learner.id)]
    expected = [
        turn for m in messages for turn in ((LEARNER, m.text), (PAM, shown(m.marker, m.text)))
    ]
    assert stored == expected, f"{user}'s memory differs from what was said"


# -- 1. the acceptance test ------------------------------------------------------------------

LEARNERS = 20
PER_LEARNER = 10
SENDER_THREADS = 5


def send_all(
    client: Client, sent: dict[str, list[Message]], rng: random.Random, stop: threading.Event
) -> None:
    """Interleave every learner's messages across SENDER_THREADS threads (each learner's from one
    thread, in order), with 20% duplicate deliveries: half re-POSTed concurrently with the
    original from another thread, half redelivered a round later."""
    everything = [m for messages in sent.values() for m in messages]
    duplicated = rng.sample(everything, len(everything) // 5)
    racing = {m.id for m in duplicated[::2]}
    later = {m.id for m in duplicated[1::2]}
    users = list(sent)
    owners = [users[n::SENDER_THREADS] for n in range(SENDER_THREADS)]
    errors: list[BaseException] = []

    def sender(owned: list[str], pool: ThreadPoolExecutor) -> None:
        try:
            redeliver: list[Message] = []
            for turn in range(PER_LEARNER):
                if stop.is_set():
                    return
                again, redeliver = redeliver, []
                for user in owned:
                    message = sent[user][turn]
                    race: Future[int] | None = None
                    if message.id in racing:
                        race = pool.submit(client.post, message)
                    client.post(message)
                    if race is not None:
                        race.result(timeout=HANG_SECONDS)
                    if message.id in later:
                        redeliver.append(message)
                for message in again:
                    client.post(message)
                time.sleep(0.05)
            for message in redeliver:
                client.post(message)
        except BaseException as exc:
            errors.append(exc)

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="duplicate") as pool:
        threads = [
            threading.Thread(target=sender, args=(owned, pool), name=f"sender-{n}")
            for n, owned in enumerate(owners)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HANG_SECONDS)
            assert not thread.is_alive(), "a sender thread hung"
    if errors:
        raise errors[0]


class TurnWatch:
    """The fake LLM's answer for one worker's own server: signals when a reply call starts, so
    that the worker can be killed in the middle of a turn."""

    def __init__(self) -> None:
        self.reply_started = threading.Event()

    def __call__(self, task: str, body: dict[str, Any], count: int) -> str:
        if task == "reply":
            self.reply_started.set()
        return echo_answer(task, body, count)


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_two_workers_one_killed_answer_every_message_once_in_order(
    tmp_path: Path, llm: OpenAIServer, callback: Callback
) -> None:
    assert PG_URL
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    kill_at = rng.randint(30, 80)
    progress(f"acceptance test: seed={seed}; a worker is killed mid-turn after {kill_at} replies")
    sent = {
        f"learner{n:02d}": conversation(f"learner{n:02d}", f"L{n:02d}", PER_LEARNER)
        for n in range(1, LEARNERS + 1)
    }
    everything = [m for messages in sent.values() for m in messages]
    watch = TurnWatch()
    stop = threading.Event()

    with (
        OpenAIServer(answer=watch) as doomed_llm,  # the doomed worker's own LLM endpoint
        Callback(TOKEN, record_into=callback) as doomed_callback,  # ... and its own callback
        postgres_schema(PG_URL) as url,
        processes(tmp_path) as group,
    ):
        env = service_env(
            url, **pam_knobs(llm, callback), PAM_WORKER_THREADS="4", PAM_DELIVERY_THREADS="2"
        )
        migrate(env["DATABASE_URL"])
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        group.start("web", gunicorn(port), env)
        doomed = group.start(
            "worker-1",
            [*PAM_CMD, "worker"],
            {
                **env,
                "OPENAI_BASE_URL": doomed_llm.base_url,
                "PAM_API_CALLBACK_URL": doomed_callback.url,
            },
        )
        survivor = group.start("worker-2", [*PAM_CMD, "worker"], env)
        wait_healthy(base, group, timeout=HANG_SECONDS)
        for worker in (doomed, survivor):
            wait_for(
                lambda w=worker: "worker started" in w.tail(),
                HANG_SECONDS,
                f"{worker.name} to start",
            )
        progress("web and workers are up; sending 200 messages from 20 learners, 20% duplicated")

        client = Client(base)
        sending = threading.Thread(target=send_all, args=(client, sent, rng, stop), daemon=True)
        sending.start()
        engine = db.make_engine(url)
        try:
            wait_for(lambda: callback.count() >= kill_at, HANG_SECONDS, f"{kill_at} replies")
            # Kill worker-1 mid-turn, but not in the one gap no system can close: between a
            # platform accepting a reply and the outbox recording it (docs: "Delivery").
            # Its receiver turns it away (503) for a moment, and every reply it did deliver
            # is first seen committed as sent.
            doomed_callback.gate.clear()
            wait_for(
                lambda: all_sent(engine, doomed_callback.recorded_ids()),
                HANG_SECONDS,
                "worker-1's deliveries to be recorded as sent",
            )
            watch.reply_started.clear()
            wait_for(
                watch.reply_started.is_set, HANG_SECONDS, "worker-1 to start a turn", poll=0.001
            )
            group.kill(doomed)  # SIGKILL while its turn waits for the LLM
            killed_at = time.time()
            assert doomed.popen.wait(timeout=10) == -signal.SIGKILL
            doomed_callback.gate.set()
            progress(f"SIGKILLed worker-1 mid-turn after {callback.count()} replies")
            sending.join(timeout=HANG_SECONDS)
            assert not sending.is_alive(), "the senders did not finish"
            client.assert_each_accepted_once(everything)
            progress(f"all {len(client.answers)} POSTs acknowledged")

            markers = {m.marker for m in everything}
            deadline = time.monotonic() + 120
            last_report = 0.0
            while True:
                answered = {d.marker for d in callback.snapshot()} & markers
                if len(answered) == len(markers) and unfinished(engine) == 0:
                    break
                assert time.monotonic() < deadline, (
                    f"after 120s, {len(markers - answered)} message(s) still unanswered: "
                    f"{inbox_rows(engine, [m.key for m in everything if m.marker not in answered])}"
                )
                if time.monotonic() - last_report > 3:
                    last_report = time.monotonic()
                    progress(f"{len(answered)}/{len(markers)} messages answered")
                assert survivor.popen.poll() is None, f"worker-2 died:\n{survivor.tail()}"
                time.sleep(0.1)
            time.sleep(1.0)  # a late redelivery would show up here
            progress(f"all answered; {callback.count()} deliveries; checking")

            assert_delivered_once_in_order(engine, callback, sent, killed_at)
            assert Inbox(engine, 1).counts() == {"done": len(everything)}
            assert Outbox(engine, 1).counts() == {"sent": len(everything)}
            store = Store(engine)
            for user, messages in sent.items():
                assert_memory_holds(store, user, messages)
            rows = inbox_rows(engine, [m.key for m in everything])
            reclaimed = [r for r in rows if r["attempts"] > 1]
            assert reclaimed, "no message was taken over from the killed worker"

            # The memory jobs run in the background, at a lower CPU priority: on a loaded
            # machine the last replies can go out before the first fold or profile is asked.
            def jobs_asked() -> tuple[int, int]:
                folds = len(llm.of("summary")) + len(doomed_llm.of("summary"))
                return folds, len(llm.of("profile")) + len(doomed_llm.of("profile"))

            wait_for(lambda: all(jobs_asked()), 120, "the memory jobs to run")
            folds, profiles = jobs_asked()
            assert folds and profiles, "the memory jobs did not run"
            progress(
                f"passed: {len(reclaimed)} message(s) taken over from the killed worker; "
                f"{folds} folds, {profiles} profile updates"
            )
        finally:
            stop.set()
            engine.dispose()


# -- 2. `pam serve`: web and worker in one process, on SQLite ---------------------------------

PROFILE_REPLY = re.compile(r"^Here's what I know about you:\n")


ASKED = re.compile(re.escape(forgetting.ASK))
CONFIRMS = "-confirms"  # the key's end of a /forget that confirms the one before it


def command(user: str, text: str, confirms: bool = False) -> Message:
    return Message(f"{user}-{uuid.uuid4().hex[:8]}{CONFIRMS if confirms else ''}", user, text)


def expected_reply(message: Message) -> str | re.Pattern[str]:
    """What Pam answers to `message`: the echoed chat reply, or the command's answer (on the
    API, a first /forget asks and a second confirms)."""
    if message.text == "/forget":
        return phrases.FORGOTTEN if message.key.endswith(CONFIRMS) else ASKED
    if message.text == "/profile":
        return PROFILE_REPLY
    return shown(message.marker, message.text)


def replies_match(texts: list[str], messages: list[Message]) -> bool:
    expected = [expected_reply(m) for m in messages]
    return len(texts) == len(expected) and all(
        e.match(t) if isinstance(e, re.Pattern) else t == e
        for t, e in zip(texts, expected, strict=True)
    )


def serve_env(
    tmp_path: Path, llm: OpenAIServer, callback: Callback, **knobs: str
) -> dict[str, str]:
    return service_env(sqlite_url(tmp_path), **pam_knobs(llm, callback), **knobs)


def test_pam_serve_answers_each_message_once_in_order_then_stops_on_sigterm(
    tmp_path: Path, llm: OpenAIServer, callback: Callback
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = serve_env(tmp_path, llm, callback, PORT=str(port))
    sam = conversation("sam", "S01", 7)
    sam.insert(5, command("sam", "/profile"))
    ana = conversation("ana", "S02", 7)
    kai_before = conversation("kai", "S03", 5)
    kai_forget = command("kai", "/forget")
    kai_confirm = command("kai", "/forget", confirms=True)  # the API's yes: /forget again
    kai_after = kai_before[3:]
    kai_before = kai_before[:3]
    sent = {"sam": sam, "ana": ana, "kai": [*kai_before, kai_forget, kai_confirm, *kai_after]}
    everything = [m for messages in sent.values() for m in messages]
    rng = random.Random()

    with processes(tmp_path) as group:
        serve = group.start("serve", [*PAM_CMD, "serve", "--host", "127.0.0.1"], env)
        wait_healthy(base, group, timeout=HANG_SECONDS)
        client = Client(base)

        def send(messages: list[Message], pool: ThreadPoolExecutor) -> None:
            for message in messages:
                race = pool.submit(client.post, message) if rng.random() < 0.25 else None
                client.post(message)
                if race is not None:
                    race.result(timeout=HANG_SECONDS)
                if rng.random() < 0.15:
                    client.post(message)  # a plain redelivery

        def kai(pool: ThreadPoolExecutor) -> None:
            send(kai_before, pool)
            wait_for(lambda: len(callback.texts("kai")) >= 3, 30, "kai's first replies")
            send([kai_forget, kai_forget], pool)  # /forget, delivered twice: asked once
            wait_for(lambda: len(callback.texts("kai")) >= 4, HANG_SECONDS, "/forget's question")
            send([kai_confirm, kai_confirm], pool)  # confirmed, delivered twice: erased once
            wait_for(
                lambda: phrases.FORGOTTEN in callback.texts("kai"), HANG_SECONDS, "/forget's answer"
            )
            send(kai_after, pool)

        with ThreadPoolExecutor(max_workers=6) as pool:
            futures = [
                pool.submit(send, sam, pool),
                pool.submit(send, ana, pool),
                pool.submit(kai, pool),
            ]
            for future in futures:
                future.result(timeout=HANG_SECONDS)
        client.assert_each_accepted_once(everything)

        engine = db.make_engine(env["DATABASE_URL"])
        try:
            wait_for(
                lambda: callback.count() >= len(everything) and unfinished(engine) == 0,
                HANG_SECONDS,
                "every reply to be delivered",
            )
            time.sleep(0.5)  # a duplicate would show up here
            for user, messages in sent.items():
                texts = callback.texts(user)
                assert replies_match(texts, messages), f"{user} got {texts}"
            assert callback.count() == len(everything)
            assert all(d.signed for d in callback.snapshot())
            store = Store(engine)
            assert_memory_holds(store, "sam", [m for m in sam if m.text != "/profile"])
            assert_memory_holds(store, "ana", ana)
            assert_memory_holds(store, "kai", kai_after)  # nothing from before /forget
        finally:
            engine.dispose()

        progress("pam serve answered everything; sending SIGTERM")
        stopping = time.monotonic()
        os.kill(serve.popen.pid, signal.SIGTERM)
        try:
            code = serve.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"pam serve ignored SIGTERM for 20s:\n{serve.tail()}") from None
        assert code == 0, f"pam serve exited {code}:\n{serve.tail()}"
        assert "Traceback" not in serve.log.read_text(errors="replace"), serve.tail()
        progress(f"pam serve stopped in {time.monotonic() - stopping:.1f}s")


def test_message_sent_right_after_forget_is_answered(
    tmp_path: Path, llm: OpenAIServer, callback: Callback
) -> None:
    """The learner writes /forget, confirms it (on the API: /forget again) and, at once, a new
    message; Pam's confirmation says "if you write again, we start fresh", so the new message
    must be answered (and kept), not erased as if it were part of the past. One inbox lane,
    busy with another learner's slow turn, makes the new message wait in the inbox while the
    commands lane answers /forget."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = serve_env(tmp_path, llm, callback, PORT=str(port), PAM_WORKER_THREADS="1")
    kai = conversation("kai", "S03", 2)
    forget = command("kai", "/forget")
    confirm = command("kai", "/forget", confirms=True)
    slow = Message("ana-slow", "ana", f"S02-M01 {SLOW}: cuéntame algo largo")

    with processes(tmp_path) as group:
        group.start("serve", [*PAM_CMD, "serve", "--host", "127.0.0.1"], env)
        wait_healthy(base, group, timeout=HANG_SECONDS)
        client = Client(base)
        client.post(kai[0])
        wait_for(lambda: len(callback.texts("kai")) == 1, 30, "kai's first reply")
        client.post(slow)
        wait_for(
            lambda: any("S02-M01" in json.dumps(r) for r in llm.of("reply")),
            HANG_SECONDS,
            "the slow turn to reach the LLM",
        )
        assert client.post(forget) == 202
        wait_for(lambda: len(callback.texts("kai")) == 2, HANG_SECONDS, "/forget's question")
        assert client.post(confirm) == 202
        assert client.post(kai[1]) == 202  # written right after the confirmation

        engine = db.make_engine(env["DATABASE_URL"])
        try:
            wait_for(
                lambda: len(callback.texts("ana")) == 1 and unfinished(engine) == 0,
                HANG_SECONDS,
                "the queues to drain",
            )
            time.sleep(0.3)
            texts = callback.texts("kai")
            assert texts[0] == shown(kai[0].marker, kai[0].text), texts
            assert ASKED.match(texts[1]) and texts[2] == phrases.FORGOTTEN, texts
            assert texts[3:] == [shown(kai[1].marker, kai[1].text)], (
                f"the message sent right after /forget got no answer: {texts[3:]}; its inbox "
                f"row: {inbox_rows(engine, [kai[1].key])} (gone means /forget erased it)"
            )
            assert_memory_holds(Store(engine), "kai", kai[1:])
        finally:
            engine.dispose()


# -- 3. configuration errors and the Heroku database URL --------------------------------------


def test_worker_without_llm_config_exits_with_setup_instructions(tmp_path: Path) -> None:
    env = service_env(sqlite_url(tmp_path))
    assert not any(name.startswith("OPENAI_") for name in env)
    done = subprocess.run(
        [*PAM_CMD, "worker"], env=env, cwd=tmp_path, capture_output=True, timeout=60, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode != 0, stderr
    assert "OPENAI_API_KEY" in stderr and "OPENAI_BASE_URL" in stderr, stderr
    assert "Traceback" not in stderr, stderr


@pytest.mark.skipif(not PG_URL, reason="PAM_TEST_DATABASE_URL is not set")
def test_gunicorn_app_runs_on_heroku_style_postgres_url(tmp_path: Path) -> None:
    assert PG_URL
    with postgres_schema(PG_URL) as url, processes(tmp_path) as group:
        heroku = re.sub(r"^postgresql(\+\w+)?://", "postgres://", url)
        assert heroku.startswith("postgres://"), heroku
        env = service_env(heroku, PAM_API_TOKEN=TOKEN)
        migrate(env["DATABASE_URL"])
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        group.start("web", gunicorn(port), env)
        wait_healthy(base, group, timeout=HANG_SECONDS)
        client = Client(base)
        message = Message("heroku-1", "zoe", "Hola desde Heroku (S09-M01)")
        assert client.post(message) == 202
        assert client.post(message) == 200
        engine = db.make_engine(url)
        try:
            rows = inbox_rows(engine, [message.key])
            assert [r["platform_id"] for r in rows] == [message.key]
        finally:
            engine.dispose()
