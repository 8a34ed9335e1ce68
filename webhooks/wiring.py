"""The composition root: the one place where Pam's real parts (database, OpenAI client,
scheduler, memory process, the channels' senders) are built from the settings and wired into
the layers below. Every other module sees only the layer it is in and those under it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from bot.channels import Sender
from bot.checkins.compose import Composer, MemoryComposer
from bot.checkins.rounds import CheckinRounds
from bot.llm.openai_audio import OpenAISpeaker, OpenAITranscriber, audio_client
from bot.llm.openai_chat import OpenAIChatModel, openai_client
from bot.turn.after_send import AfterSending
from bot.turn.limits import Limits
from bot.turn.tutor import Tutor
from bot.voice.ports import Speaker, Transcriber
from bot.worker.memory_process import MemoryProcess
from bot.worker.runtime import Pam
from memory.clock import Clock, utcnow
from memory.database import db
from memory.database.backends import backend_for
from memory.jobs.coordinator import FOLD, PROFILE, REVIEW, Coordinator, JobRunner, Submit
from memory.jobs.profile import learn_profile
from memory.jobs.summary import fold
from memory.llm import ChatModel
from memory.metrics import MeteredChatModel
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from memory.turns import TurnWriter
from webhooks.api import CHANNEL as API
from webhooks.api.sender import ApiCallbackSender
from webhooks.charts import SignedLinks
from webhooks.checkin_routes import ChannelRoutes
from webhooks.settings import Settings
from webhooks.telegram import CHANNEL as TELEGRAM
from webhooks.whatsapp import CHANNEL as WHATSAPP

log = logging.getLogger(__name__)

RECOVER_EVERY_SECONDS = 60
# A job folds at most this many chunks per run (a long backlog after an outage takes several).
MAX_FOLDS_PER_RUN = 10


def background_scheduler(threads: int) -> BackgroundScheduler:
    """APScheduler's background scheduler, running up to `threads` memory jobs at once."""
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    return BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max_workers=threads)},
        # Memory jobs are queued "now" and must run however late the pool gets to them.
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1000},
        timezone=UTC,
    )


def memory_threads(settings: Settings, engine: Engine) -> int:
    """How many memory jobs run at once: PAM_MEMORY_THREADS, else the database's default."""
    return settings.service.memory_threads or backend_for(engine).memory_lanes


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
    clock: Clock = utcnow,
    transcriber: Transcriber | None = None,
    speaker: Speaker | None = None,
) -> Pam:
    """Assemble Pam from `settings`. Tests pass a fake `model`, an inline `submit` and a clock
    of their own (every lease, rest, backoff, retention cutoff and limit window goes by it);
    without
    `submit` an APScheduler background scheduler runs the memory jobs. With `memory_process`
    (the services) they run in a child process instead, which `pam.memory_process.start()`
    starts: this Pam only marks the jobs its turns make due and hands them over.
    `replayable`: for `pam worker`, whose every write can be replayed from the inbox (see
    `db.make_engine`). Voice notes are transcribed, and replies spoken, through the audio
    API the settings name (PAM_AUDIO_BASE_URL, else the chat model's server) when Pam builds
    its own model; tests give a `transcriber` and a `speaker` of their own, or none."""
    if memory_process and submit is not None:
        raise ValueError("give either `submit` or `memory_process`, not both")
    # 2 × PAM_DB_POOL_SIZE bounds every process's connections, the worker's and its memory
    # process's as much as the web's: docs/deploy/scaling.md counts on it (db.pooled_engine).
    engine = engine or db.pooled_engine(
        settings.database_url, settings.service.db_pool_size, replayable=replayable
    )
    if migrate:
        db.upgrade(engine)
    store = Store(engine, clock)
    counter = TokenCounter(settings.llm.model)
    if model is None:
        client = openai_client(
            settings.llm.api_key,
            settings.llm.base_url,
            settings.llm.timeout_seconds,
            settings.llm.max_retries,
        )
        model = OpenAIChatModel(
            client,
            counter,
            structured_output=settings.llm.structured_output,
            reasoning_effort=settings.llm.reasoning_effort,
            memory_reasoning_effort=settings.llm.memory_reasoning_effort,
        )
        if settings.voice.voice_notes:
            audio = audio_client(settings.voice, settings.llm)
            transcriber = transcriber or OpenAITranscriber(
                audio, settings.voice.transcription_model
            )
            # A spoken copy is made after its text went out, within PAM_SPEECH_TIMEOUT; not
            # retried: a call that timed out would take as long again.
            speech = audio.with_options(
                timeout=settings.voice.speech_timeout_seconds, max_retries=0
            )
            speaker = speaker or OpenAISpeaker(
                speech, settings.voice.speech_model, settings.voice.speech_voice
            )
    memory = settings.memory
    # Every billed call is counted for /metrics, whichever part of Pam makes it.
    chat_model = MeteredChatModel(model)

    def fold_job(learner_id: int) -> None:
        for _ in range(MAX_FOLDS_PER_RUN):
            if not fold(learner_id, store=store, model=chat_model, counter=counter, config=memory):
                return

    def profile_job(learner_id: int) -> None:
        learn_profile(learner_id, store=store, model=chat_model, config=memory)

    def review_job(learner_id: int) -> None:
        store.reviews.record_pending(learner_id)

    scheduler = None
    process = None
    if memory_process:
        process = MemoryProcess()
        submit = _run_in_the_memory_process
    elif submit is None:
        scheduler = background_scheduler(memory_threads(settings, engine))
        sched = scheduler

        def submit_to_scheduler(work: Callable[[], None]) -> None:
            sched.add_job(work)

        submit = submit_to_scheduler
    runner = JobRunner(
        Coordinator(engine, settings.memory.job_lease_seconds, clock),
        {FOLD: fold_job, PROFILE: profile_job, REVIEW: review_job},
        submit,
        hand_off=process.hand_off if process is not None else None,
    )
    if scheduler is not None:
        scheduler.add_job(
            runner.recover, "interval", seconds=RECOVER_EVERY_SECONDS, id="memory-recover"
        )
    writer = TurnWriter(store, settings.service.delivery_lease_seconds, memory, clock)
    tutor = Tutor(
        store,
        chat_model,
        counter,
        settings,
        clock,
        searcher=store.recall,
        transcriber=transcriber,
        speaker=speaker,
    )
    links = SignedLinks(
        store.charts, settings.charts, settings.web.public_url, clock, store.voice_clips
    )
    return Pam(
        settings,
        engine,
        store,
        counter,
        model,
        runner,
        tutor,
        writer,
        AfterSending(runner),
        clock,
        scheduler,
        process,
        links,
    )


def senders(settings: Settings) -> dict[str, Sender]:
    """One sender per channel that has its outbound configuration."""
    # The channels' SDKs are imported here, by the processes that send: the memory-jobs
    # process builds Pam too, and python-telegram-bot alone would cost it some 17 MB.
    from webhooks.telegram.client import TelegramClient
    from webhooks.whatsapp.sender import TwilioSender

    built: dict[str, Sender] = {}
    if settings.api.token and settings.api.callback_url:
        built[API] = ApiCallbackSender(settings.api.callback_url, settings.api.token)
    elif settings.api.token:
        log.warning(
            "PAM_API_TOKEN is set but PAM_API_CALLBACK_URL is not: API replies will wait "
            "in the outbox until it is"
        )
    if settings.whatsapp.account_sid and settings.whatsapp.auth_token:
        if settings.whatsapp.number:
            built[WHATSAPP] = TwilioSender(
                settings.whatsapp.account_sid,
                settings.whatsapp.auth_token,
                settings.whatsapp.number,
                api_url=settings.whatsapp.api_url,
                media_deadline=settings.voice.media_deadline_seconds,
                checkin_template_sid=settings.whatsapp.checkin_template_sid,
                status_callback=(
                    f"{settings.web.public_url.rstrip('/')}/whatsapp/status"
                    if settings.web.public_url
                    else None
                ),
            )
        else:
            log.warning(
                "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are set but TWILIO_WHATSAPP_NUMBER is "
                "not: WhatsApp replies will wait in the outbox until it is"
            )
    if settings.telegram.bot_token:
        built[TELEGRAM] = TelegramClient(
            settings.telegram.bot_token,
            settings.telegram.api_url,
            local_files=settings.telegram.local_files_dir,
            media_deadline=settings.voice.media_deadline_seconds,
        )
    return built


def checkin_rounds(
    pam: Pam,
    settings: Settings,
    senders: Mapping[str, Sender],
    composer: Composer | None = None,
) -> CheckinRounds | None:
    """The worker's check-in rounds, when PAM_CHECKINS is on (None when off): through the
    channels that have a sender, by their rules (webhooks/checkin_routes.py), with the words of
    `composer` (by default the one that writes from the learner's memory with the reply model,
    every call counted in the metrics), within the same budgets as replies."""
    if not settings.checkin.enabled:
        return None
    store = pam.store
    if composer is None:
        composer = MemoryComposer(store, MeteredChatModel(pam.model), settings)
    routes = ChannelRoutes(senders, settings.whatsapp.checkin_template_sid)
    limits = Limits(settings.limits, store.conversation, store.learners, pam.clock)
    return CheckinRounds(store, composer, routes, settings.checkin, limits, pam.counter, pam.clock)
