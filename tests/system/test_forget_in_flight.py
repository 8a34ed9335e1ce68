"""/forget through the real queues while a fold and a profile job are blocked inside the LLM:
afterwards no table holds anything about the learner, the jobs write nothing back, another
learner is untouched, and the learner hears exactly the confirmation."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, make_url, select

from bot import phrases
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.database.records import (
    LEARNER,
    PAM,
    CorrectionRecord,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
)
from memory.jobs.coordinator import REVIEW
from memory.llm import ChatMessage
from memory.messages import Inbound
from tests.conftest import unique_user
from tests.fakes import ENDINGS, FakeChatModel, Gate, fresh_ending, reply_json
from tests.support import WAIT, RecordingSender, handle, inbound
from webhooks.app import create_app
from webhooks.settings import Settings
from webhooks.wiring import build

CHANNEL = "test"
ADMIN = "admin-token-77c1"


class JobThreads:
    """A job executor that runs each memory job on a thread of its own, so it can block in the
    model while the worker carries on."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def __call__(self, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:
            self.errors.append(exc)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive(), "a memory job never finished"
        assert not self.errors, self.errors


def corrected(messages: Sequence[ChatMessage]) -> str:
    """A reply with one correction quoting the learner's message, so corrections name it too."""
    text = messages[-1]["content"]
    # Pam's reply names the message's own last word (its secret), so /forget must erase
    # Pam's replies too; not the whole message, which Pam would take for an echo, and in
    # other words than its previous reply.
    return reply_json(
        f"Anoto {text.split()[-1]}. {fresh_ending(messages)}",
        [{"original": text, "corrected": f"{text} (bien)", "category": "grammar"}],
    )


def reply_to(text: str, n: int) -> str:
    """What `corrected` answers to a learner's `n`-th message `text` (from 0): the endings
    take turns."""
    return f"Anoto {text.split()[-1]}. {ENDINGS[n % 2]}"


@dataclass
class Scene:
    """A learner with a fold and a profile job blocked in the model, one message of theirs
    waiting in the inbox and one reply waiting in the outbox; a bystander mid-conversation."""

    pam: Pam
    worker: Worker
    sender: RecordingSender
    model: FakeChatModel
    jobs: JobThreads
    fold_gate: Gate
    profile_gate: Gate
    user: str
    name: str
    texts: list[str]
    bystander: str
    bystander_texts: list[str]
    learner_id: int = 0
    secrets: list[str] = field(default_factory=list)

    def chat_id(self, user: str) -> str:
        return inbound(user).chat_id

    def send(self, user: str, text: str, name: str | None = None) -> None:
        message = Inbound(CHANNEL, uuid.uuid4().hex, user, self.chat_id(user), text, name)
        assert self.worker.inbox.accept(message)

    def answer_all(self) -> None:
        """Run every turn waiting in the inbox, their replies queued for the delivery lanes
        (as if the worker died before sending): nothing is delivered."""
        inbox = self.worker.inbox
        for _ in range(100):
            claim = inbox.claim_next()
            if claim is None:
                return
            replies = handle(
                self.pam, claim.address, claim.text, claim.display_name, inbox_id=claim.id
            )
            assert inbox.complete(claim, replies)
        raise AssertionError("the inbox never emptied")

    def release(self) -> None:
        self.fold_gate.release.set()
        self.profile_gate.release.set()


@pytest.fixture
def scene(settings: Settings, engine: Engine, sender: RecordingSender) -> Iterator[Scene]:
    tag = uuid.uuid4().hex[:10]
    fold_gate = Gate(f"SUMMARY-{tag}: Lena is a nurse in Bremen.")
    profile_gate = Gate(json.dumps({"who": f"PROFILE-{tag} Lena, nurse", "interests": ["chess"]}))
    model = FakeChatModel()
    model.defaults["reply"] = corrected
    model.queue("summary", fold_gate)
    model.queue("profile", profile_gate)
    jobs = JobThreads()
    knobs = settings.replace(
        memory={"summary_trigger_tokens": 40, "fold_batch_messages": 2, "profile_every": 5},
        limits={"rate_limit_per_minute": 0},
        web={"admin_token": ADMIN},
    )
    pam = build(knobs, model=model, submit=jobs, engine=engine)
    scene = Scene(
        pam=pam,
        worker=Worker(pam, {CHANNEL: sender}),
        sender=sender,
        model=model,
        jobs=jobs,
        fold_gate=fold_gate,
        profile_gate=profile_gate,
        user=unique_user("forgetme"),
        name=f"Lena Geheimname{tag}",
        texts=[f"Mensaje {n} de Lena: trabajo de enfermera, secreto{tag}n{n}" for n in range(7)],
        bystander=unique_user("bystander"),
        bystander_texts=[f"Hola, soy Bruno, mensaje {n}" for n in range(4)],
    )
    worker, user, name, texts = scene.worker, scene.user, scene.name, scene.texts
    bystander, bystander_texts = scene.bystander, scene.bystander_texts
    try:
        for text in bystander_texts[:3]:
            scene.send(bystander, text, "Bruno")
        worker.drain()
        # Five messages, answered and delivered: the fifth starts the profile job.
        for text in texts[:5]:
            scene.send(user, text, name)
            worker.drain()
        assert profile_gate.called.wait(WAIT), "the profile job never reached the model"
        # The sixth is answered but its reply not delivered yet; it starts the fold.
        scene.send(user, texts[5], name)
        scene.answer_all()
        assert fold_gate.called.wait(WAIT), "the fold never reached the model"
        # One more message of the learner's waits in the inbox, and one of the bystander's.
        scene.send(user, texts[6], name)
        scene.send(bystander, bystander_texts[3], "Bruno")
        found = pam.store.learners.find_learner(user)
        assert found is not None
        scene.learner_id = found.id
        scene.secrets = [
            *texts,
            user,
            scene.chat_id(user),
            name,
            f"SUMMARY-{tag}",
            f"PROFILE-{tag}",
        ]
        yield scene
    finally:
        scene.release()
        jobs.join()


@dataclass(frozen=True)
class Kept:
    """Everything the store keeps about one learner."""

    info: LearnerInfo
    summary: SummaryState
    profile: ProfileState
    messages: list[StoredMessage]
    corrections: list[CorrectionRecord]
    jobs: list[dict[str, object]]


def kept_about(pam: Pam, user: str) -> Kept:
    info = pam.store.learners.find_learner(user)
    assert info is not None
    return Kept(
        info,
        pam.store.memory.summary(info.id),
        pam.store.memory.profile(info.id),
        pam.store.conversation.messages(info.id),
        pam.store.ledger.corrections(info.id),
        pam.store.inspection.job_states(info.id),
    )


def assert_nothing_about(scene: Scene) -> None:
    counts = scene.pam.store.inspection.rows_about(scene.learner_id, scene.user)
    assert counts == dict.fromkeys(counts, 0), counts


def rows_naming(engine: Engine, needles: Sequence[str]) -> list[tuple[str, str, str]]:
    """(table, column, needle) for every value in every table of the database that contains
    one of `needles`: the tables are reflected, so a table added later is scanned too."""
    metadata = MetaData()
    metadata.reflect(engine)
    found = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                for column, value in zip(table.columns, row, strict=True):
                    if value is None:
                        continue
                    text = value if isinstance(value, str) else json.dumps(value, default=str)
                    found += [(table.name, column.name, n) for n in needles if n in text]
    return found


def sqlite_files(engine: Engine) -> list[Path]:
    """The database file and its write-ahead log (SQLite only)."""
    database = make_url(str(engine.url)).database
    assert database
    return [p for p in (Path(database), Path(f"{database}-wal")) if p.exists()]


def _of(kind: str, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [job for job in jobs if job["kind"] == kind]


def _but(kind: str, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [job for job in jobs if job["kind"] != kind]


def assert_forgotten_everywhere(scene: Scene, before: Kept) -> None:
    """The end state, whichever way /forget came: nothing about the learner anywhere, no
    write from the jobs, the bystander as they were plus their answered message."""
    pam, engine = scene.pam, scene.pam.engine
    assert_nothing_about(scene)
    assert pam.store.learners.find_learner(scene.user) is None
    # Each job called the model once, and then wrote nothing (not even its usage).
    assert len(scene.model.of("summary")) == 1
    assert len(scene.model.of("profile")) == 1
    assert rows_naming(engine, scene.secrets) == []
    if engine.dialect.name == "sqlite":
        for path in sqlite_files(engine):
            data = path.read_bytes()
            leaked = [t for t in scene.texts if t.encode() in data]
            assert leaked == [], (path.name, leaked)

    # The bystander: untouched, and their waiting message answered as usual.
    after = kept_about(pam, scene.bystander)
    assert (after.info, after.summary, after.profile) == (
        before.info,
        before.summary,
        before.profile,
    )
    assert after.messages[: len(before.messages)] == before.messages
    new = after.messages[len(before.messages) :]
    assert [(m.role, m.content.split("\n", 1)[0]) for m in new] == [
        (LEARNER, scene.bystander_texts[3]),
        (PAM, reply_to(scene.bystander_texts[3], 3)),
    ]
    last = scene.bystander_texts[3]
    assert after.corrections == [
        *before.corrections,
        CorrectionRecord(last, f"{last} (bien)", "", "grammar"),
    ]
    # Their fold and profile jobs as they were; the review job graded their corrected message.
    assert _but(REVIEW, after.jobs) == _but(REVIEW, before.jobs)
    [review_before], [review_after] = _of(REVIEW, before.jobs), _of(REVIEW, after.jobs)
    assert review_after["runs"] == review_before["runs"] + 1
    assert not (review_after["running"] or review_after["dirty"] or review_after["failures"])
    bystander_heard = scene.sender.texts_to(scene.chat_id(scene.bystander))
    assert [t.split("\n", 1)[0] for t in bystander_heard] == [
        reply_to(t, n) for n, t in enumerate(scene.bystander_texts)
    ]


def assert_found_before(scene: Scene) -> None:
    """The scans do find the learner before /forget: they are not vacuous."""
    tables = {table for table, _, _ in rows_naming(scene.pam.engine, scene.secrets)}
    assert {"learners", "messages", "corrections", "inbox", "outbox"} <= tables, tables
    if scene.pam.engine.dialect.name == "sqlite":
        data = b"".join(path.read_bytes() for path in sqlite_files(scene.pam.engine))
        assert scene.texts[0].encode() in data


def test_forget_through_the_inbox_while_both_jobs_are_in_flight(scene: Scene) -> None:
    pam = scene.pam
    assert_found_before(scene)
    before = kept_about(pam, scene.bystander)
    heard_before = scene.sender.texts_to(scene.chat_id(scene.user))
    assert len(heard_before) == 5  # the sixth reply waits in the outbox
    assert pam.store.inspection.job_states(scene.learner_id), "the jobs are running"

    # /forget and its yes, both behind the message waiting in the inbox: the question and the
    # replies before it wait behind the undelivered one, and the yes erases them all.
    scene.send(scene.user, "/forget", scene.name)
    scene.send(scene.user, "yes", scene.name)
    scene.worker.drain()
    assert not scene.fold_gate.release.is_set() and not scene.profile_gate.release.is_set()
    assert_nothing_about(scene)  # while the jobs are still inside the model

    scene.release()
    scene.jobs.join()
    assert pam.runner.wait_idle(WAIT)
    scene.worker.drain()

    assert_forgotten_everywhere(scene, before)
    heard = scene.sender.texts_to(scene.chat_id(scene.user))
    assert heard[: len(heard_before)] == heard_before
    assert heard[len(heard_before) :] == [phrases.FORGOTTEN]
    assert not any(scene.texts[n] in text for text in heard for n in (5, 6))


def test_forget_by_the_operator_while_both_jobs_are_in_flight(scene: Scene) -> None:
    pam = scene.pam
    assert_found_before(scene)
    before = kept_about(pam, scene.bystander)
    heard_before = scene.sender.texts_to(scene.chat_id(scene.user))
    client = create_app(pam.settings, engine=pam.engine).test_client()

    response = client.post(
        f"/admin/learners/{scene.learner_id}/forget",
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert response.status_code == 200
    assert response.get_json() == {"status": "forgotten", "learner": scene.learner_id}
    assert_nothing_about(scene)  # the waiting message and reply went too

    scene.worker.drain()
    scene.release()
    scene.jobs.join()
    assert pam.runner.wait_idle(WAIT)
    scene.worker.drain()

    assert_forgotten_everywhere(scene, before)
    # The operator's forget sends the learner nothing: not the reply that was waiting, not
    # an answer to the message that was waiting.
    assert scene.sender.texts_to(scene.chat_id(scene.user)) == heard_before
