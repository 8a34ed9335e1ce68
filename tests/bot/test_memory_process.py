"""The services run their memory jobs in a child process (bot/worker/memory_process.py): the worker
marks each job and hands it over without ever waiting for the child; the child runs it, is
restarted when it dies, runs what was marked while none ran, and stops with its worker.

The first tests drive MemoryProcess with small stand-in children; the rest run real `pam worker`
and `pam memory-jobs` processes against the fake LLM, on SQLite and on Postgres."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from bot.worker import memory_process
from bot.worker.memory_process import ForkedChild, JobRequests, MemoryProcess, fork_child
from loopback.harness import PAM_CMD, Process, Processes, processes, service_env
from loopback.local_server import Answer, LocalServer
from loopback.openai_server import Fault, OpenAIServer
from memory.database.models import MemoryJob
from memory.database.records import LEARNER, PAM
from memory.jobs.coordinator import FOLD, PROFILE, Coordinator, JobRunner
from memory.queue.inbox import Inbox
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.support import HANG_SECONDS, WAIT, inbound, wait_for_event


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


# Stand-in children: one copies the requests it reads to a file, one never reads them, one
# exits at once, one ignores SIGTERM.
ECHO = """import sys
for line in sys.stdin:
    with open(sys.argv[1], "a") as out:
        out.write(line)
"""
DEAF = "import time; time.sleep(600)"
STUBBORN = """import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").close()
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie waiting for its reaper counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat[stat.rindex(")") + 2] in "ZX"


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] not in "ZX":
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def supervised() -> Iterator[list[MemoryProcess]]:
    """MemoryProcesses to stop after the test, whatever happened."""
    started: list[MemoryProcess] = []
    yield started
    for process in started:
        process.stop(0)


def test_requests_reach_the_child_and_a_killed_child_is_replaced(
    tmp_path: Path, supervised: list[MemoryProcess]
) -> None:
    received = tmp_path / "received.txt"
    received.touch()
    process = MemoryProcess(python(ECHO, str(received)), first_backoff=0.01)
    supervised.append(process)
    process.start()
    first = process.pid
    assert first is not None

    process.hand_off(7, FOLD)
    wait_for_event(lambda: received.read_text() == "7 fold\n", "the first child to get it")
    os.kill(first, signal.SIGKILL)
    wait_for_event(lambda: process.pid != first, "a new child")
    process.hand_off(8, PROFILE)
    wait_for_event(lambda: "8 profile\n" in received.read_text(), "the new child to get one")

    second = process.pid
    assert second is not None
    assert process.stop(WAIT)
    assert gone(second)
    assert process.pid == second, "a child was started after stop"


def test_hand_off_never_blocks_when_the_child_reads_nothing(
    supervised: list[MemoryProcess],
) -> None:
    process = MemoryProcess(python(DEAF), queue_size=100)
    supervised.append(process)
    process.start()
    handing = threading.Thread(
        target=lambda: [process.hand_off(n, FOLD) for n in range(200_000)], daemon=True
    )
    handing.start()
    handing.join(WAIT)
    assert not handing.is_alive(), "hand_off blocked on a child that reads nothing"


def test_hand_off_never_blocks_or_fails_while_the_child_is_dead(
    supervised: list[MemoryProcess],
) -> None:
    process = MemoryProcess(python("pass"), queue_size=100, first_backoff=600)
    supervised.append(process)
    process.start()
    pid = process.pid
    assert pid is not None
    wait_for_event(lambda: gone(pid), "the child to exit")
    handing = threading.Thread(
        target=lambda: [process.hand_off(n, PROFILE) for n in range(20_000)], daemon=True
    )
    handing.start()
    handing.join(WAIT)
    assert not handing.is_alive(), "hand_off blocked while the child was dead"
    assert process.stop(WAIT)


def test_a_child_that_outlives_the_shutdown_wait_is_killed(
    tmp_path: Path, supervised: list[MemoryProcess]
) -> None:
    ready = tmp_path / "ready"
    process = MemoryProcess(python(STUBBORN, str(ready)))
    supervised.append(process)
    process.start()
    pid = process.pid
    assert pid is not None
    wait_for_event(ready.exists, "the child to ignore SIGTERM")
    assert not process.stop(0.2)
    assert gone(pid)


# -- the forked first child ------------------------------------------------------------------


@pytest.fixture
def forkable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let this test fork although pytest (xdist's channel, a test's server) runs threads: the
    children below run a few lines of their own and leave with os._exit."""
    monkeypatch.setattr(memory_process, "single_threaded", lambda: True)


def echo_requests(received: Path) -> int:
    """A forked child's work: copy each request line to `received`; exit 3 at the end."""
    with os.fdopen(0, "rb", closefd=False) as stdin:  # pytest's sys.stdin reads nothing
        for line in stdin:
            with received.open("ab") as out:
                out.write(line)
    return 3


def test_a_process_running_threads_does_not_fork() -> None:
    preloaded: list[bool] = []
    blocker = threading.Event()
    thread = threading.Thread(target=blocker.wait, daemon=True)
    thread.start()
    try:
        assert fork_child(lambda: preloaded.append(True), lambda: 0) is None
    finally:
        blocker.set()
    assert not preloaded, "nothing loaded for a child that is spawned instead"


def test_a_forked_child_waits_for_its_start_then_takes_requests(
    tmp_path: Path, forkable: None, supervised: list[MemoryProcess]
) -> None:
    received = tmp_path / "received.txt"
    preloaded: list[bool] = []
    forked = fork_child(lambda: preloaded.append(True), lambda: echo_requests(received))
    assert isinstance(forked, ForkedChild) and preloaded == [True]
    assert parent_of(forked.pid) == os.getpid()
    with pytest.raises(subprocess.TimeoutExpired):
        forked.wait(timeout=0.2)  # not started: it has run nothing yet
    assert not received.exists()

    process = MemoryProcess(python(ECHO, str(received)), first_backoff=600)
    supervised.append(process)
    process.start(forked)
    assert process.pid == forked.pid
    process.hand_off(7, FOLD)
    wait_for_event(lambda: received.exists() and received.read_text() == "7 fold\n", "the request")

    # The end of its input ends it, as when its worker is gone.
    assert forked.stdin is not None
    forked.stdin.close()
    assert forked.wait(timeout=WAIT) == 3
    assert gone(forked.pid)


def test_a_forked_child_never_started_leaves_quietly(tmp_path: Path, forkable: None) -> None:
    ran = tmp_path / "ran"
    forked = fork_child(lambda: None, lambda: int(bool(ran.touch())))
    assert forked is not None and forked.stdin is not None
    forked.stdin.close()  # the worker exited before it started the child (its build failed)
    assert forked.wait(timeout=WAIT) == 0
    assert not ran.exists()


def test_a_dead_forked_child_is_replaced_by_a_spawned_one(
    tmp_path: Path, forkable: None, supervised: list[MemoryProcess]
) -> None:
    received = tmp_path / "received.txt"
    received.touch()
    forked = fork_child(lambda: None, lambda: echo_requests(received))
    assert forked is not None
    os.kill(forked.pid, signal.SIGKILL)  # gone before its worker could start it
    assert forked.wait(timeout=WAIT) == -signal.SIGKILL

    process = MemoryProcess(python(ECHO, str(received)), first_backoff=0.01)
    supervised.append(process)
    process.start(forked)
    spawned = process.pid
    assert spawned is not None and spawned != forked.pid
    process.hand_off(8, PROFILE)
    wait_for_event(lambda: received.read_text() == "8 profile\n", "the spawned child to get it")
    assert process.stop(WAIT)


def test_a_preload_that_leaves_a_thread_running_means_no_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker waits a while for the token encoding's download on a thread of its own; a
    # download still out then must not be forked with its locks. (pytest runs threads of its
    # own: the look before the preload passes, the one after sees only the preload's.)
    release = threading.Event()
    left = threading.Thread(target=release.wait, daemon=True)
    looks = iter([True])
    monkeypatch.setattr(
        memory_process, "single_threaded", lambda: next(looks, False) or not left.is_alive()
    )
    try:
        assert fork_child(left.start, lambda: 0) is None
    finally:
        release.set()


def test_a_forked_child_keeps_no_descriptor_its_launcher_passed_on(
    tmp_path: Path, forkable: None
) -> None:
    # A spawned child never had them (Popen closes them); a launcher waiting for a pipe's end
    # must not wait for the memory process too.
    read, write = os.pipe()
    os.set_inheritable(write, True)
    own = os.open(tmp_path, os.O_RDONLY)  # Pam's own: not inheritable, stays open

    def run() -> int:
        try:
            os.fstat(write)
        except OSError:
            os.fstat(own)  # raises (exit 1) if it was closed too
            return 0
        return 4

    forked = fork_child(lambda: None, run)
    os.close(write)
    os.close(own)
    assert forked is not None and forked.stdin is not None
    forked.stdin.write(memory_process.START_LINE)
    forked.stdin.close()
    assert forked.wait(timeout=WAIT) == 0
    assert os.read(read, 1) == b"", "the pipe ended with the launcher's own copy"
    os.close(read)


def test_a_forked_child_that_exits_with_no_code_exits_0(forkable: None) -> None:
    forked = fork_child(lambda: None, lambda: sys.exit())
    assert forked is not None and forked.stdin is not None
    forked.stdin.write(memory_process.START_LINE)
    forked.stdin.close()
    assert forked.wait(timeout=WAIT) == 0


def test_two_threads_wait_for_one_forked_child(forkable: None) -> None:
    # The supervisor waits with no timeout while `stop` waits with one: both learn the code.
    forked = fork_child(lambda: None, lambda: 5)
    assert forked is not None and forked.stdin is not None
    codes: list[int] = []
    blocking = threading.Thread(target=lambda: codes.append(forked.wait()), daemon=True)
    blocking.start()
    with pytest.raises(subprocess.TimeoutExpired):
        forked.wait(timeout=0.1)
    forked.stdin.write(memory_process.START_LINE)
    forked.stdin.flush()
    assert forked.wait(timeout=WAIT) == 5
    blocking.join(WAIT)
    assert codes == [5]
    forked.stdin.close()


# -- the child's end of the hand-off --------------------------------------------------------


class Ran:
    """A job that records the learners it ran for."""

    def __init__(self) -> None:
        self.learners: list[int] = []

    def __call__(self, learner_id: int) -> None:
        self.learners.append(learner_id)


def test_the_child_starts_each_requested_job_and_ignores_garbage(
    store: Store, engine: Engine
) -> None:
    asked, unasked = store.learners.learner(unique_user()), store.learners.learner(unique_user())
    coordinator = Coordinator(engine, 300)
    assert coordinator.mark(asked.id, FOLD)
    fold, profile = Ran(), Ran()
    runner = JobRunner(coordinator, {FOLD: fold, PROFILE: profile}, lambda work: work())
    read, write = os.pipe()
    lines = [
        f"{asked.id} fold",
        "not a request",
        f"{asked.id} dance",
        f"{unasked.id} profile",  # nobody marked it: nothing to run
        f"{asked.id} fold",  # ran already, not asked again
        "",
    ]
    os.write(write, "\n".join(lines).encode())
    os.close(write)
    ended = threading.Event()
    requests = JobRequests(runner, read, ended)
    try:
        requests.start()
        assert ended.wait(WAIT), "the end of the input did not stop the child"
    finally:
        os.close(read)
    assert fold.learners == [asked.id]
    assert profile.learners == []


def test_the_child_starts_nothing_once_closed(store: Store, engine: Engine) -> None:
    learner = store.learners.learner(unique_user())
    coordinator = Coordinator(engine, 300)
    assert coordinator.mark(learner.id, FOLD)
    fold = Ran()
    runner = JobRunner(coordinator, {FOLD: fold}, lambda work: work())
    read, write = os.pipe()
    os.write(write, f"{learner.id} fold\n".encode())
    os.close(write)
    ended = threading.Event()
    requests = JobRequests(runner, read, ended)
    requests.close()
    try:
        requests.start()
        assert ended.wait(WAIT)
    finally:
        os.close(read)
    assert fold.learners == []  # it stays marked for the next start


# -- real processes -------------------------------------------------------------------------

TEXTS = [
    # Lena in Berlin: the loopback server's profile answer says so, and a fact needs her words.
    "Hola Pam, yo es Lena, enfermera en Berlin, y me gusta mucho cocinar paella.",
    "Ayer fui al mercado con mi hermana y compramos tomates y pimientos.",
    "El fin de semana yo es en la playa con amigos del trabajo.",
    "Mañana quiero aprender a jugar al ajedrez con mi vecino.",
]


class Callback(LocalServer):
    """The API channel's callback: accepts every reply."""

    def respond(self, path: str, content_type: str, raw: bytes) -> Answer:
        return 200, {}, b"{}"


@pytest.fixture
def callback() -> Iterator[Callback]:
    with Callback() as server:
        yield server


@pytest.fixture
def env(database_url: str, llm: OpenAIServer, callback: Callback) -> dict[str, str]:
    """A Pam process's environment: every turn makes a profile job due, every other a fold."""
    return service_env(
        database_url,
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test",
        PAM_API_TOKEN="test-api-token-4e1c",
        PAM_API_CALLBACK_URL=f"{callback.origin}/replies",
        PAM_POLL_SECONDS="0.05",
        PAM_LLM_MAX_RETRIES="0",
        PAM_JOB_LEASE_SECONDS="5",
        PAM_WINDOW_MESSAGES="2",
        PAM_SUMMARY_TRIGGER_TOKENS="40",
        PAM_FOLD_BATCH_MESSAGES="2",
        PAM_PROFILE_EVERY="1",
        PAM_SHUTDOWN_WAIT_SECONDS="5",
    )


# The memory process's line once it is up (after its first sweep).
STARTED = r"memory jobs started pid=(\d+)"


def pids(process: Process, pattern: str) -> list[int]:
    """The pids in `process`'s log lines matching `pattern` (with a `pid=(\\d+)` group)."""
    return [int(p) for p in re.findall(pattern, process.log.read_text(errors="replace"))]


def child_started(process: Process) -> int:
    """The pid of the worker's memory process, once it is up (it logs after its first sweep)."""
    wait_for_event(lambda: bool(pids(process, STARTED)), "the memory process to start", process)
    return pids(process, STARTED)[-1]


def send(engine: Engine, user: str, text: str) -> None:
    assert Inbox(engine, 60).accept(inbound(f"api:{user}", text, channel="api"))


def learned(store: Store, external_id: str, folds: int = 1, profiles: int = 1) -> bool:
    learner = store.learners.find_learner(external_id)
    return (
        learner is not None
        and store.memory.summary(learner.id).folds >= folds
        and store.memory.profile(learner.id).version >= profiles
    )


def wait_learned(store: Store, external_id: str, what: str, process: Process) -> None:
    """Wait until the learner has a fold and a profile update, which `process` makes."""
    wait_for_event(lambda: learned(store, external_id), what, process)


def jobs_running(engine: Engine, external_id: str) -> bool:
    """Whether a memory job of the learner is claimed (running, or held by a dead runner)."""
    learner = Store(engine).learners.find_learner(external_id)
    assert learner is not None
    with engine.connect() as connection:
        running = connection.scalar(
            select(func.count()).where(
                MemoryJob.learner_id == learner.id, MemoryJob.running.is_(True)
            )
        )
    return bool(running)


def start_worker(group: Processes, env: dict[str, str]) -> Process:
    """`pam worker` on the test's database (migrated: see `database_url`)."""
    return group.start("worker", [*PAM_CMD, "worker"], env)


def stops_cleanly(process: Process, *, group: bool = False) -> None:
    """SIGTERM to `process` alone (or to its whole process group, as platforms send it): it
    exits 0, without a traceback."""
    if group:
        os.killpg(process.popen.pid, signal.SIGTERM)
    else:
        os.kill(process.popen.pid, signal.SIGTERM)
    try:
        code = process.popen.wait(timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{process.name} ignored SIGTERM:\n{process.tail()}") from None
    assert code == 0, process.tail()
    assert "Traceback" not in process.log.read_text(errors="replace"), process.tail()


@pytest.mark.slow
def test_a_worker_runs_its_memory_jobs_in_a_lower_priority_child_and_stops_it(
    tmp_path: Path, engine: Engine, env: dict[str, str]
) -> None:
    user = f"lena-{uuid.uuid4().hex[:6]}"
    store = Store(engine)
    with processes(tmp_path) as group:
        worker = start_worker(group, env)
        child = child_started(worker)
        assert parent_of(child) == worker.popen.pid
        assert f"memory process started pid={child} forked" in worker.log.read_text()
        expected_nice = min(19, os.getpriority(os.PRIO_PROCESS, worker.popen.pid) + 10)
        assert os.getpriority(os.PRIO_PROCESS, child) == expected_nice

        for text in TEXTS:
            send(engine, user, text)
        wait_learned(store, f"api:{user}", "a fold and a profile update", worker)
        assert "worker started" in worker.log.read_text()

        stops_cleanly(worker)
        assert gone(child), "the memory process outlived its worker"
        assert pids(worker, r"memory process pid=(\d+) stopped status=0") == [child]


@pytest.mark.slow
def test_a_killed_memory_process_is_restarted_and_one_whose_worker_died_exits(
    tmp_path: Path, engine: Engine, env: dict[str, str]
) -> None:
    user = f"kai-{uuid.uuid4().hex[:6]}"
    store = Store(engine)
    with processes(tmp_path) as group:
        worker = start_worker(group, env)
        first = child_started(worker)
        send(engine, user, TEXTS[0])
        wait_for_event(
            lambda: (
                learned(store, f"api:{user}", folds=0) and not jobs_running(engine, f"api:{user}")
            ),
            "the first profile update to finish",
            worker,
        )

        # Killed between jobs: a job it held would wait for its lease to lapse and a sweep.
        os.kill(first, signal.SIGKILL)
        wait_for_event(lambda: pids(worker, STARTED)[-1] != first, "a new memory process", worker)
        second = child_started(worker)
        log = worker.log.read_text()
        assert f"memory process pid={first} exited with status -9" in log
        assert f"memory process started pid={first} forked" in log
        assert f"memory process started pid={second} spawned" in log
        learner = store.learners.find_learner(f"api:{user}")
        assert learner is not None
        before = store.memory.profile(learner.id).version
        send(engine, user, TEXTS[1])
        wait_for_event(
            lambda: store.memory.profile(learner.id).version > before,
            "a profile update by the new memory process",
            worker,
        )

        os.kill(worker.popen.pid, signal.SIGKILL)  # the worker alone, not its process group
        worker.popen.wait(timeout=HANG_SECONDS)
        wait_for_event(lambda: gone(second), "the orphaned memory process to exit")


@pytest.fixture
def marked(engine: Engine) -> tuple[Store, str]:
    """The store and the external id of a learner whose conversation needs a fold and a
    profile update, both marked as asked for while no memory process ran (a worker stopped,
    say, before it got to them)."""
    store = Store(engine)
    external_id = unique_user("marked")
    learner = store.learners.learner(external_id)
    for text in TEXTS:
        store.conversation.add_message(learner.id, LEARNER, text, 20)
        store.conversation.add_message(learner.id, PAM, "¡Qué bien! ¿Y luego qué hiciste?", 12)
    coordinator = Coordinator(engine, 60)
    assert coordinator.mark(learner.id, FOLD)
    assert coordinator.mark(learner.id, PROFILE)
    return store, external_id


@pytest.mark.slow
def test_jobs_marked_while_no_memory_process_ran_are_run_when_a_worker_starts(
    tmp_path: Path, env: dict[str, str], marked: tuple[Store, str]
) -> None:
    store, external_id = marked
    with processes(tmp_path) as group:
        worker = start_worker(group, env)
        wait_learned(store, external_id, "the marked fold and profile update", worker)
        child = child_started(worker)
        stops_cleanly(worker, group=True)  # the child gets SIGTERM twice: its own, the worker's
        assert gone(child)
        assert pids(worker, r"memory process pid=(\d+) stopped status=0") == [child]


@pytest.mark.slow
def test_with_memory_process_off_the_worker_runs_its_memory_jobs_itself(
    tmp_path: Path, engine: Engine, env: dict[str, str], marked: tuple[Store, str]
) -> None:
    # PAM_MEMORY_PROCESS=off, one process for the smallest machines: no child; the
    # worker's own scheduler runs the jobs marked before it started and those its turns ask for.
    store, external_id = marked
    user = f"noa-{uuid.uuid4().hex[:6]}"
    with processes(tmp_path) as group:
        worker = start_worker(group, dict(env, PAM_MEMORY_PROCESS="off"))
        wait_learned(store, external_id, "the marked fold and profile update", worker)
        for text in TEXTS:
            send(engine, user, text)
        wait_learned(store, f"api:{user}", "a fold and a profile update asked for by turns", worker)
        log = worker.log.read_text()
        assert "memory_jobs=threads" in log
        assert "memory jobs started" not in log and "memory process" not in log
        assert not children_of(worker.popen.pid), "no child process"
        stops_cleanly(worker, group=True)


@pytest.mark.slow
def test_with_memory_process_off_a_job_stuck_in_a_call_does_not_hold_up_the_exit(
    tmp_path: Path,
    engine: Engine,
    env: dict[str, str],
    llm: OpenAIServer,
    marked: tuple[Store, str],
) -> None:
    # The marked jobs' first calls answer only once the worker has exited; SIGTERM must end
    # the worker within its shutdown wait (2 s here), the jobs handed back for the next start,
    # not after the calls. Its client would give up on them only after PAM_LLM_TIMEOUT, longer
    # than any wait here: an exit that waited for the calls never comes.
    _, external_id = marked
    stuck = threading.Event()
    llm.fail_next(Fault(status=200, hold=stuck), Fault(status=200, hold=stuck))
    knobs = {
        "PAM_MEMORY_PROCESS": "off",
        "PAM_SHUTDOWN_WAIT_SECONDS": "2",
        "PAM_LLM_TIMEOUT": str(2 * HANG_SECONDS),
    }
    try:
        with processes(tmp_path) as group:
            worker = start_worker(group, dict(env, **knobs))
            wait_for_event(lambda: jobs_running(engine, external_id), "a memory job", worker)
            os.killpg(worker.popen.pid, signal.SIGTERM)
            code = worker.popen.wait(timeout=HANG_SECONDS)  # the stuck calls are still stuck
            assert code == 0, worker.tail()
            assert "Traceback" not in worker.log.read_text(errors="replace")
    finally:
        stuck.set()
    assert not jobs_running(engine, external_id), "handed back for the next start"


@pytest.mark.slow
def test_pam_memory_jobs_on_its_own_runs_marked_jobs_until_sigterm(
    tmp_path: Path, env: dict[str, str], marked: tuple[Store, str]
) -> None:
    store, external_id = marked
    with processes(tmp_path) as group:
        # Its stdin is /dev/null: without --stdin it does not stop at the end of it.
        jobs = group.start("memory-jobs", [*PAM_CMD, "memory-jobs"], env)
        wait_learned(store, external_id, "the marked fold and profile update", jobs)
        assert jobs.popen.poll() is None
        stops_cleanly(jobs)
