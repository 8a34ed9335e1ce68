"""The memory jobs' own process. Folding a summary and learning a profile are long stretches of
Python work; on a thread next to a worker's reply lanes they held the GIL the lanes wait for,
and replies got slower whenever a job ran. So `pam worker`, `pam serve` and `pam telegram` run
their memory jobs in a child process (forked from the worker, else `pam memory-jobs --stdin`)
at a lower CPU priority:

- the worker marks a job in the database when a turn makes it due (the durable request), then
  hands it to the child as a line "learner_id kind" on the child's stdin, through a bounded
  queue and a writer thread: a dead, restarting or slow child never holds up a reply lane. A
  hand-off that is dropped loses nothing, because the child starts every marked job when it
  starts and in its sweep every RECOVER_EVERY_SECONDS;
- the child claims and runs the jobs on its APScheduler pool, as the worker did in-process;
- the worker restarts a child that exits (after a backoff), stops it with SIGTERM at shutdown
  within the worker's own deadline, and kills it past that deadline. A child whose worker died
  sees its stdin end, and stops.

The first child is forked (`fork_child`) where it can be: before the worker builds anything or
starts a thread, once the modules and the token encoding both processes use are loaded. It then
shares those pages with the worker instead of loading its own copy (measured in
docs/benchmarks/memory.md). It waits for its "start" line before it does anything, so it starts
when a spawned one would: after the worker's build migrated. A child restarted after it died is
spawned (`child_command`): a process running threads is not forked."""

from __future__ import annotations

import gc
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import IO, Protocol

from memory.jobs.coordinator import JobRunner

log = logging.getLogger("pam.memory_process")

NICE_INCREMENT = 10  # the jobs yield the CPU to the reply lanes, yet still run on an idle one
QUEUE_SIZE = 10_000  # hand-offs waiting for the writer; beyond, they wait for the sweep
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
STABLE_SECONDS = 60.0  # a child that lived this long starts the backoff afresh when it dies
# What a stopping child keeps of its shutdown wait to hand unfinished jobs back to the database
# before its worker's deadline (past which the worker kills it).
HAND_BACK_SECONDS = 1.0
START_LINE = b"start\n"  # what a forked child waits for before it builds anything
STDIN = 0
POLL_SECONDS = 0.02  # how often a wait with a timeout looks at a forked child


class Child(Protocol):
    """What the worker's side needs of a child process: a spawned one (subprocess.Popen) or a
    forked one (ForkedChild)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdin(self) -> IO[bytes] | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class ForkedChild:
    """A child made by `fork_child`, driven as a subprocess.Popen is: its stdin, waiting for
    it (from two threads at once: a blocking wait holds the lock, one with a timeout looks),
    signals."""

    def __init__(self, pid: int, stdin_fd: int) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = os.fdopen(stdin_fd, "wb")
        self.returncode: int | None = None
        self._waitpid_lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (negative: the signal that ended it); TimeoutExpired past `timeout`."""
        if timeout is None:
            with self._waitpid_lock:
                self._reap(0)
            assert self.returncode is not None
            return self.returncode
        deadline = time.monotonic() + timeout
        while self.returncode is None:
            if self._waitpid_lock.acquire(blocking=False):
                try:
                    self._reap(os.WNOHANG)
                finally:
                    self._waitpid_lock.release()
                if self.returncode is not None:
                    break
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired([f"pid {self.pid}"], timeout)
            time.sleep(POLL_SECONDS)
        return self.returncode

    def _reap(self, flags: int) -> None:
        if self.returncode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): its status is lost
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with suppress(ProcessLookupError):  # reaped, its code not yet recorded
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_child(preload: Callable[[], object], run: Callable[[], int]) -> ForkedChild | None:
    """Fork the memory process now, to run `run` once its worker sends START_LINE; None where
    this process cannot fork safely (a thread other than this one runs, or no os.fork), and
    the worker spawns its child instead.

    `preload` first imports and loads what both processes use; then gc.freeze() moves every
    object made so far out of the collector's reach, as Python's gc docs advise before a fork:
    a collection in either process would otherwise write to each object's header, and the
    kernel copy every page the two shared."""
    if not hasattr(os, "fork") or not single_threaded():
        return None
    preload()
    if not single_threaded():  # `preload` left one running (its deadline passed, say)
        return None
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    # A stop signal arriving as it forks waits for the child's own dispositions, not the
    # worker's handler (whose `stop` event, copied, nobody would look at).
    stops = {signal.SIGTERM, signal.SIGINT}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        pid = os.fork()
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(read)
        os.close(write)
        log.warning("memory process could not be forked (%s); spawning it", type(exc).__name__)
        return None
    if pid == 0:  # the child: it never returns into its worker's code
        code = 1
        try:
            # Until its handlers are set, a signal ends it, as it would a spawned one.
            for stop in stops:
                signal.signal(stop, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(write)
            if read != STDIN:  # the worker started with no stdin: the pipe is fd 0 already
                os.dup2(read, STDIN)
                os.close(read)
            _close_inherited_fds()
            code = run() if _read_start_line(STDIN) else 0
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            log.exception("memory process failed")
        finally:
            logging.shutdown()
            with suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(read)
    return ForkedChild(pid, write)


def _close_inherited_fds() -> None:
    """Close what the worker's launcher passed it beyond stdin, stdout and stderr (a spawned
    child never got those: Popen closes them), so a launcher waiting for a pipe's end is not
    kept waiting by the child. Pam's own files are not inheritable, and stay open."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: leave them
        return
    for fd in fds:
        if fd > 2:
            with suppress(OSError):  # the listing's own fd, closed already
                if os.get_inheritable(fd):
                    os.close(fd)


def single_threaded() -> bool:
    """Whether this process runs one thread, and so may fork: a thread's locks (the logging
    module's, a connection pool's) would stay held forever in the copy."""
    return threading.active_count() == 1


def _read_start_line(fd: int) -> bool:
    """Wait on `fd` for START_LINE, a byte at a time (what follows is the requests' reader's);
    False if its input ended first (the worker exited before it started the child)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return False
        line += byte
    return line == START_LINE


def child_command() -> list[str]:
    """How a worker starts its memory process: this Python, the same `pam`, the same env."""
    return [sys.executable, "-m", "webhooks.cli", "memory-jobs", "--stdin"]


class MemoryProcess:
    """A worker's side: starts the child, hands it requests, restarts it, stops it."""

    def __init__(
        self,
        argv: Sequence[str] | None = None,
        *,
        queue_size: int = QUEUE_SIZE,
        first_backoff: float = FIRST_BACKOFF_SECONDS,
        max_backoff: float = MAX_BACKOFF_SECONDS,
    ) -> None:
        self.argv = list(argv) if argv is not None else child_command()
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self._queue: queue.Queue[tuple[int, str] | None] = queue.Queue(queue_size)
        self._lock = threading.Lock()  # a child is never spawned once stopping is set
        self._stopping = threading.Event()
        self._child: Child | None = None
        self._spawned_at = 0.0
        self._dropping = False
        self._supervisor = threading.Thread(
            target=self._supervise, name="memory-process", daemon=True
        )
        self._writer = threading.Thread(target=self._write, name="memory-hand-off", daemon=True)

    @property
    def pid(self) -> int | None:
        """The current child's process id (None before the first start)."""
        child = self._child
        return child.pid if child is not None else None

    def start(self, forked: ForkedChild | None = None) -> None:
        """Start the child (`forked`, made by `fork_child` before this process ran a thread,
        else a spawned one), and the threads that restart it and feed it requests."""
        self._spawn(forked)
        self._supervisor.start()
        self._writer.start()

    def hand_off(self, learner_id: int, kind: str) -> None:
        """Pass a marked job on to the child. Never blocks: when the queue is full (the child
        is stuck or gone), the job waits in the database for the child's next sweep."""
        if self._stopping.is_set():
            return
        try:
            self._queue.put_nowait((learner_id, kind))
        except queue.Full:
            if not self._dropping:
                log.warning("memory process is not keeping up; jobs wait for its next sweep")
            self._dropping = True
        else:
            self._dropping = False

    def terminate(self) -> None:
        """Stop restarting the child and ask it to stop (SIGTERM): it lets its running jobs
        finish within its shutdown wait and hands the rest back to the database."""
        with self._lock:
            if self._stopping.is_set():
                return  # SIGTERM once: a second one could reach the child past its handler
            self._stopping.set()
            child = self._child
        with suppress(queue.Full):
            self._queue.put_nowait(None)  # else the writer sees `_stopping` after its item
        if child is not None:
            with suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)

    def stop(self, wait_seconds: float) -> bool:
        """`terminate`, wait up to `wait_seconds` for the child to exit, kill it after that.
        True if it stopped by itself in time."""
        self.terminate()
        child = self._child
        if child is None:
            return True
        try:
            code = child.wait(timeout=max(0.0, wait_seconds))
        except subprocess.TimeoutExpired:
            log.warning(
                "memory process pid=%d outlived the shutdown wait; killed (its running jobs "
                "are taken over when their leases expire)",
                child.pid,
            )
            child.kill()
            child.wait()
            stopped = False
        else:
            log.info("memory process pid=%d stopped status=%d", child.pid, code)
            stopped = True
        _close_stdin(child)
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=1.0)
        return stopped

    def _spawn(self, forked: ForkedChild | None = None) -> None:
        with self._lock:
            if self._stopping.is_set():
                if forked is not None:
                    _close_stdin(forked)  # it ends at the end of its input, never started
                return
            child: Child
            if forked is not None and _started(forked):
                child = forked
            else:
                # Same process group: an operator's or a platform's signal to the group
                # reaches the child too. Its stdout and stderr are the worker's.
                child = subprocess.Popen(self.argv, stdin=subprocess.PIPE)
            self._child, self._spawned_at = child, time.monotonic()
        how = "forked" if isinstance(child, ForkedChild) else "spawned"
        log.info("memory process started pid=%d %s", child.pid, how)

    def _supervise(self) -> None:
        delay = self.first_backoff
        while not self._stopping.is_set():
            child = self._child
            if child is not None:
                code = child.wait()
                if self._stopping.is_set():
                    return
                _close_stdin(child)
                if time.monotonic() - self._spawned_at >= STABLE_SECONDS:
                    delay = self.first_backoff
                log.warning(
                    "memory process pid=%d exited with status %d; restarting it in %.0fs",
                    child.pid,
                    code,
                    delay,
                )
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, self.max_backoff)
            try:
                self._spawn()
            except OSError as exc:
                self._child = None
                log.warning("memory process could not start: %s", type(exc).__name__)

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._stopping.is_set():
                return
            child = self._child
            if child is None or child.stdin is None:
                continue  # its successor's start-up sweep runs the marked job
            try:
                child.stdin.write(f"{item[0]} {item[1]}\n".encode())
                child.stdin.flush()
            except (OSError, ValueError):  # the child died (broken pipe), or was replaced
                continue


def _started(forked: ForkedChild) -> bool:
    """Send a forked child its start line; False if it is gone (and reaped), to spawn one."""
    try:
        assert forked.stdin is not None
        forked.stdin.write(START_LINE)
        forked.stdin.flush()
    except (OSError, ValueError) as exc:
        log.warning("forked memory process gone before its start (%s)", type(exc).__name__)
        _close_stdin(forked)
        with suppress(subprocess.TimeoutExpired):
            forked.wait(timeout=1.0)
        return False
    return True


def _close_stdin(child: Child) -> None:
    if child.stdin is not None:
        with suppress(OSError, ValueError):
            child.stdin.close()


# -- the child's side ----------------------------------------------------------------------


def lower_priority(increment: int = NICE_INCREMENT) -> int | None:
    """Lower this process's CPU priority; its niceness now, or None where that fails."""
    try:
        return os.nice(increment)
    except (AttributeError, OSError):  # no os.nice (Windows), or not allowed
        return None


def _lines(fd: int) -> Iterator[bytes]:
    """The lines read from `fd` until its end. Plain os.read: a thread blocked in it holds no
    lock that the interpreter needs at exit (sys.stdin's buffer would)."""
    pending = b""
    while chunk := os.read(fd, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        yield from lines


class JobRequests:
    """The child's end of the hand-off: a thread that reads "learner_id kind" lines from `fd`
    and starts each job on `runner`. The end of the input (the worker is gone) sets `ended`."""

    def __init__(self, runner: JobRunner, fd: int, ended: threading.Event) -> None:
        self.runner = runner
        self.fd = fd
        self.ended = ended
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._read, name="memory-requests", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Start no job after this returns (shutting down): later requests stay marked."""
        with self._lock:
            self._closed = True

    def _read(self) -> None:
        try:
            for line in _lines(self.fd):
                with self._lock:
                    if self._closed:
                        return
                    self._start(line)
        except OSError as exc:
            log.warning("memory job requests unreadable: %s", type(exc).__name__)
        finally:
            self.ended.set()

    def _start(self, line: bytes) -> None:
        try:
            learner, kind = line.decode().split()
            learner_id = int(learner)
        except ValueError:
            log.warning("ignored a malformed memory job request (%d bytes)", len(line))
            return
        if kind not in self.runner.jobs:
            log.warning("ignored a request for an unknown memory job kind")
            return
        try:
            self.runner.start(learner_id, kind)
        except Exception as exc:  # the database went away, say: the sweep starts it later
            log.warning(
                "memory job %s for learner %s not started: %s",
                kind,
                learner_id,
                type(exc).__name__,
            )
