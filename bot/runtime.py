"""Wiring: the one place where Pam's real parts (database, OpenAI client, scheduler, memory
process) are built from the settings and handed to the core."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from bot.llm import ChatModel
from bot.memory_process import MemoryProcess
from bot.openai_chat import OpenAIChatModel, openai_client
from bot.settings import Settings
from bot.tutor import Tutor
from memory import db
from memory.jobs import FOLD, PROFILE, Coordinator, JobRunner, Submit
from memory.models import utcnow
from memory.profile import learn_profile
from memory.store import Store
from memory.summary import fold
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

RECOVER_EVERY_SECONDS = 60
# A job folds at most this many chunks per run (a long backlog after an outage takes several).
MAX_FOLDS_PER_RUN = 10


@dataclass
class Pam:
    """Pam's assembled parts."""

    settings: Settings
    engine: Engine
    store: Store
    counter: TokenCounter
    model: ChatModel
    runner: JobRunner
    tutor: Tutor
    scheduler: BackgroundScheduler | None = None
    memory_process: MemoryProcess | None = None

    def close(self, wait_seconds: float) -> bool:
        """Let running memory jobs finish for up to `wait_seconds` (here, or in the memory
        process), then stop. True if every job finished; jobs still running are handed back to
        the database for the next start."""
        deadline = time.monotonic() + wait_seconds
        finished = self.runner.wait_idle(wait_seconds)
        if not finished:
            count = self.runner.abandon_active()
            log.warning("stopped with %d memory job(s) unfinished; they resume next start", count)
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=finished)
        if self.memory_process is not None:
            stopped = self.memory_process.stop(max(0.0, deadline - time.monotonic()))
            finished = finished and stopped
        self.engine.dispose()
        return finished


def background_scheduler() -> BackgroundScheduler:
    """APScheduler's background scheduler, with a small thread pool for memory jobs."""
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max_workers=4)},
        # Memory jobs are queued "now" and must run however late the pool gets to them.
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1000},
        timezone=UTC,
    )


def _run_in_the_memory_process(work: Callable[[], None]) -> None:
    raise RuntimeError("this Pam hands its memory jobs to its memory process")


def build(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    submit: Submit | None = None,
    engine: Engine | None = None,
    migrate: bool = False,
    memory_process: bool = False,
    replayable: bool = False,
    clock: Callable[[], datetime] = utcnow,
) -> Pam:
    """Assemble Pam from `settings`. Tests pass a fake `model`, an inline `submit` and a clock
    of their own (the memory jobs' leases and rests go by it); without
    `submit` an APScheduler background scheduler runs the memory jobs. With `memory_process`
    (the services) they run in a child process instead, which `pam.memory_process.start()`
    starts: this Pam only marks the jobs its turns make due and hands them over.
    `replayable`: for `pam worker`, whose every write can be replayed from the inbox (see
    `db.make_engine`)."""
    if memory_process and submit is not None:
        raise ValueError("give either `submit` or `memory_process`, not both")
    # PAM_DB_POOL_SIZE (and as many overflow) bounds every process's connections, the
    # worker's and its memory process's as much as the web's: the README's formula counts on it.
    pool = settings.db_pool_size
    engine = engine or db.make_engine(
        settings.database_url, pool_size=pool, max_overflow=pool, replayable=replayable
    )
    if migrate:
        db.upgrade(engine)
    store = Store(engine)
    counter = TokenCounter(settings.model)
    if model is None:
        client = openai_client(
            settings.openai_api_key,
            settings.openai_base_url,
            settings.llm_timeout_seconds,
            settings.llm_max_retries,
        )
        model = OpenAIChatModel(
            client,
            counter,
            structured_output=settings.structured_output,
            reasoning_effort=settings.reasoning_effort,
            memory_reasoning_effort=settings.memory_reasoning_effort,
        )
    memory = settings.memory_config()
    chat_model = model

    def fold_job(learner_id: int) -> None:
        for _ in range(MAX_FOLDS_PER_RUN):
            if not fold(learner_id, store=store, model=chat_model, counter=counter, config=memory):
                return

    def profile_job(learner_id: int) -> None:
        learn_profile(learner_id, store=store, model=chat_model, config=memory)

    scheduler = None
    process = None
    if memory_process:
        process = MemoryProcess()
        submit = _run_in_the_memory_process
    elif submit is None:
        scheduler = background_scheduler()
        sched = scheduler

        def submit_to_scheduler(work: Callable[[], None]) -> None:
            sched.add_job(work)

        submit = submit_to_scheduler
    runner = JobRunner(
        Coordinator(engine, settings.job_lease_seconds, clock),
        {FOLD: fold_job, PROFILE: profile_job},
        submit,
        hand_off=process.hand_off if process is not None else None,
    )
    if scheduler is not None:
        scheduler.add_job(
            runner.recover, "interval", seconds=RECOVER_EVERY_SECONDS, id="memory-recover"
        )
    tutor = Tutor(store, model, counter, runner, settings)
    return Pam(settings, engine, store, counter, model, runner, tutor, scheduler, process)
