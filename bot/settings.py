"""Pam's configuration is read once from the environment into one typed object of sections.
Here are the sections the core reads (`CoreSettings`) and how every section is declared; the
web's and each channel's sections, and the whole object the commands build, belong to the
outer layer (webhooks/settings.py), which bot/ does not import.

Each section reads the variables named by its prefix and its fields' names in capitals
(`VoiceSettings.speech_model` is `PAM_SPEECH_MODEL`); the few older names that do not fit
their section's prefix are given where the field is. A value that fails validation is
reported under the variable's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from pydantic import AliasGenerator, BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.logs import Level
from memory.config import DEFAULT_MODEL, MIN_CHAT_RETENTION_DAYS, MemoryConfig
from memory.llm import Effort, StructuredOutput

# Platforms redeliver an unacknowledged message for up to a day; finished queue items are kept
# at least this long so that a redelivery is still recognised.
MIN_QUEUE_RETENTION_HOURS = 24

# The shortest secret Pam takes where it checks one (a bearer token, a webhook's secret, a
# signing key): shorter is guessable. `openssl rand -hex 32`, which the docs suggest, and
# Heroku's generated secrets give 64 characters.
MIN_SECRET_CHARS = 16

M = TypeVar("M", bound=BaseModel)


def section(prefix: str) -> SettingsConfigDict:
    """The configuration of a section whose variables are `prefix` + a field's name in
    capitals. The variable's name is each field's alias, so that a validation error names it;
    code and tests still pass values by the fields' names."""
    return SettingsConfigDict(
        env_prefix=prefix,
        alias_generator=AliasGenerator(validation_alias=lambda name: prefix + name.upper()),
        validate_by_name=True,
        # An empty variable (`TELEGRAM_WEBHOOK_SECRET=` as .env.example has it) means unset:
        # the default applies, instead of an empty string failing validation.
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        # Each field's docstring is its description: the docs' configuration reference is
        # generated from them (docs/hooks.py).
        use_attribute_docstrings=True,
        # A refused value is never repeated in the error (it may be a secret).
        hide_input_in_errors=True,
    )


def variable_of(model: type[BaseModel], info: ValidationInfo) -> str:
    """The environment variable of the field being validated."""
    assert info.field_name is not None
    return str(model.model_fields[info.field_name].validation_alias)


def long_enough(variable: str, secret: str | None, minimum: int = MIN_SECRET_CHARS) -> str | None:
    """`secret`, unless it is too short to be one (never said: only its variable)."""
    if secret and len(secret) < minimum:
        raise ValueError(
            f"{variable} is too short to be a secret: it must be at least {minimum} "
            "characters (make one with `openssl rand -hex 32`)"
        )
    return secret


class LLMSettings(BaseSettings):
    """The chat model: where it is, which model answers, how requests are made."""

    model_config = section("PAM_")

    api_key: str | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    """Key for OpenAI (or any value for local servers)."""
    base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    """Unset: OpenAI. Any OpenAI-compatible endpoint: Ollama, vLLM, LM Studio, Azure OpenAI
    (`https://<resource>.openai.azure.com/openai/v1/`)."""
    model: str = DEFAULT_MODEL
    """Model for replies."""
    # Seconds to wait for an answer. Long enough for a small local model on a CPU (a reply
    # there takes up to a minute); a request that times out is not sent again at once
    # (bot/llm/retries.py), and a server slower than half of it is told to the operator once.
    timeout_seconds: float = Field(default=120.0, gt=0, validation_alias="PAM_LLM_TIMEOUT")
    """Seconds to wait for an LLM answer (the connection alone gets 10); long enough for a
    small local model on a CPU. A timeout, or an answer slower than half of it, is logged
    once with this advice."""
    max_retries: int = Field(default=3, ge=0, le=10, validation_alias="PAM_LLM_MAX_RETRIES")
    """Retries (exponential backoff, honours `Retry-After` up to 60 s) on a connection never
    made, 408, 409, 429, 500, 502 and 503 — never on a timeout or a 504, where the server
    may still be working on the request; unusable answers are asked again apart from
    these, 4 calls at most."""
    reply_max_tokens: int = Field(default=700, gt=0)
    """Cap on a reply's output tokens (reasoning models get room for their reasoning on top)."""
    structured_output: StructuredOutput = "auto"
    """`auto`: a JSON schema where the provider has it, else the schema inside JSON mode
    (llama.cpp's servers enforce it there), else JSON mode, else the prompt's words (learned
    per model); or pin `json_schema`, `json_object_schema`, `json_object`, `off`."""
    reasoning_effort: Effort = "low"
    """`reasoning_effort` for OpenAI's reasoning models (o-series, `gpt-5*`) on replies:
    `none`…`xhigh`, or `off` to send none."""
    memory_reasoning_effort: Effort = "low"
    """The same for the summary and profile jobs."""

    @property
    def configured(self) -> bool:
        """True when an OpenAI key or an OpenAI-compatible base URL is set."""
        return bool(self.api_key or self.base_url)


class MemorySettings(BaseSettings, MemoryConfig):
    """memory/config.py's knobs, read from PAM_WINDOW_MESSAGES, PAM_MEMORY_MODEL and the rest."""

    model_config = section("PAM_")


class LimitSettings(BaseSettings):
    """Cost and abuse limits; 0 disables each."""

    model_config = section("PAM_")

    rate_limit_per_minute: int = Field(default=20, ge=0)
    """Learner messages answered per minute (0: no limit; `pam chat` has none)."""
    learner_daily_tokens: int = Field(default=200_000, ge=0)
    """LLM tokens (all calls, input + output) per learner per UTC day (0: no limit)."""
    daily_tokens: int = Field(default=0, ge=0)
    """LLM tokens for everyone together per UTC day (0: no limit)."""
    max_queued_per_address: int = Field(default=20, ge=0)
    """A learner's messages waiting to be answered, at most: the web turns more away without
    storing them (200 to Telegram and Twilio, so they do not retry; 429 on the API) and the
    learner is told once to slow down (0: no bound)."""


class ServiceSettings(BaseSettings):
    """The long-running processes: connections, lanes, leases, retries, retention, shutdown."""

    model_config = section("PAM_")

    db_pool_size: int = Field(default=5, ge=1, le=100)
    """Database connections per process, web, worker and memory jobs alike: each opens up to
    twice this many as its threads need them, and keeps them open (see "Scaling")."""
    worker_threads: int | None = Field(default=None, ge=1, le=512)
    """Inbox lanes per worker: turns in flight at once, each waiting on the model without a
    database connection (plus one lane that answers only slash commands, so `/help` and
    `/forget` never wait behind model calls). Unset: 128 on Postgres, 16 on SQLite (one
    writer at a time)."""
    memory_threads: int | None = Field(default=None, ge=1, le=256)
    """Memory jobs (folds, profile learning, review grading) each worker runs at once, in its
    memory process or on its own threads: each mostly waits on the model, holding no database
    connection meanwhile. Unset: 32 on Postgres, 4 on SQLite. Too few and the jobs fall
    behind a busy worker: a learner's profile is learned, and their chat folded, less often
    than `PAM_PROFILE_EVERY` and `PAM_SUMMARY_TRIGGER_TOKENS` say."""
    delivery_threads: int = Field(default=2, ge=1, le=32)
    """Delivery lanes per worker."""
    poll_seconds: float = Field(default=0.25, gt=0, le=60)
    """How often a worker's idle lanes of one kind look for new work, all together: each of
    n idle lanes looks every n × this on average (on Postgres, new messages also wake
    workers at once)."""
    inbox_lease_seconds: float = Field(default=60.0, gt=0)
    """A message whose worker died is answered by another after this long (live workers renew
    it)."""
    delivery_lease_seconds: float = Field(default=60.0, gt=0)
    """The same for a reply being delivered."""
    max_turn_attempts: int = Field(default=5, ge=1)
    """A message that crashed its worker this often gets an apology instead."""
    max_send_attempts: int = Field(default=8, ge=1)
    """Delivery attempts (exponential backoff, honouring the platform's retry-after)."""
    queue_retention_hours: float = Field(default=168.0, ge=0)
    """Finished inbox and outbox items are deleted this long after they finished (at least
    24; 0 keeps them)."""
    chat_retention_days: int = Field(default=90, ge=0)
    """Chat older than this many days is pruned once the summary has folded it and the profile
    has read it: its messages and their corrections (recall keeps what it finds of them), its
    LLM usage rolled into one row per month, its review grades cut to what review and
    `/progress` read (at least 57: `/progress` shows 8 weeks; 0 keeps everything)."""
    shutdown_wait_seconds: float = Field(default=60.0, ge=0)
    """How long a stopping worker waits, in all, for the turns and memory jobs it is running
    (and `pam chat` for memory jobs at exit)."""
    memory_process: bool = True
    """`on`: the memory jobs run in a child process at a lower CPU priority, forked from the
    worker so that it shares its pages, and a fold never holds up a reply; `off`: on the
    worker's own threads, one process and 60-70 MB less, replies slower when busy (see
    Measured → Memory and start-up)."""

    @field_validator("queue_retention_hours")
    @classmethod
    def _retention_outlasts_redeliveries(cls, hours: float) -> float:
        # A redelivery is recognised by its finished inbox row: pruned sooner, a message a
        # platform delivers again would be answered twice.
        if 0 < hours < MIN_QUEUE_RETENTION_HOURS:
            raise ValueError(
                f"PAM_QUEUE_RETENTION_HOURS is {hours:g}, but must be at least "
                f"{MIN_QUEUE_RETENTION_HOURS}: Telegram and Twilio redeliver a message for up "
                "to 24 hours, and Pam recognises a redelivery only while it keeps the finished "
                "message (0 keeps finished messages forever)"
            )
        return hours

    @field_validator("chat_retention_days")
    @classmethod
    def _retention_outlasts_progress(cls, days: int) -> int:
        # /progress counts the learner's messages and corrections of its 8 weeks: pruned
        # sooner, a chart would show weeks emptier than they were.
        if 0 < days < MIN_CHAT_RETENTION_DAYS:
            raise ValueError(
                f"PAM_CHAT_RETENTION_DAYS is {days}, but must be at least "
                f"{MIN_CHAT_RETENTION_DAYS}: /progress shows the last 8 weeks of messages, "
                "corrections and review grades, and pruning sooner would empty its first "
                "weeks (0 keeps the chat history forever)"
            )
        return days


class ChartSettings(BaseSettings):
    """/progress charts: their signed links (WhatsApp's media and the API's image URL, under
    PAM_PUBLIC_URL) and where `pam chat` writes them."""

    model_config = section("PAM_")

    link_secret: str | None = None
    """The key chart links are signed with (at least 16 characters); unset, Pam makes a random
    one once and keeps it in the database (`service_keys`), shared by every process."""
    chart_link_seconds: int = Field(default=86400, ge=60, le=30 * 86400)
    """How long a chart or voice-reply link works; charts and spoken replies older than this
    are deleted by retention."""
    chart_dir: Path | None = None
    """Unset: the working directory. Where `pam chat` writes `/progress` charts."""

    @field_validator("link_secret")
    @classmethod
    def _a_secret(cls, secret: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), secret)


class VoiceSettings(BaseSettings):
    """Voice notes in (transcribed) and spoken replies out, through an OpenAI-compatible audio
    API: OpenAI's, or a local server's (speaches, LocalAI) when the chat server has none."""

    model_config = section("PAM_")

    voice_notes: bool = True
    """Voice notes are transcribed and `/voice on` speaks replies; `false`: a voice note gets
    "I can only read text for now"."""
    audio_base_url: str | None = None
    """Unset: the chat's `OPENAI_BASE_URL`. An OpenAI-compatible server with
    `/audio/transcriptions` and `/audio/speech` (OpenAI, speaches, LocalAI), for chat
    servers that have none."""
    audio_api_key: str | None = None
    """Unset: the chat's `OPENAI_API_KEY` (only while `PAM_AUDIO_BASE_URL` is unset). The
    audio server's key."""
    # A transcription's limit (the turn waits for it).
    audio_timeout_seconds: float = Field(default=60.0, gt=0, validation_alias="PAM_AUDIO_TIMEOUT")
    """Seconds per transcription request (retried twice by the SDK, then the turn from the
    inbox)."""
    # A spoken copy's limit: it is made after the text went out, so it may take a CPU speech
    # server's time (about 2 s per spoken second: 120 s speaks ~900 characters).
    speech_timeout_seconds: float = Field(
        default=120.0, gt=0, le=3600, validation_alias="PAM_SPEECH_TIMEOUT"
    )
    """Seconds a reply's spoken copy may take (made after its text went out, once; a CPU
    speech server needs about 2 s per spoken second)."""
    transcription_model: str = "gpt-4o-mini-transcribe"
    """The model that transcribes voice notes (`whisper-1`, or a local server's Whisper)."""
    speech_model: str = "gpt-4o-mini-tts"
    """The model that speaks replies after `/voice on` (`tts-1`, `kokoro`, …)."""
    speech_voice: str = "coral"
    """The voice it speaks with."""
    # A longer or bigger note gets a friendly word instead of a transcription. OpenAI takes
    # files up to 25 MB; Telegram's Bot API downloads files up to 20 MB.
    voice_max_seconds: int = Field(default=300, ge=1, le=3600)
    """The longest voice note Pam listens to; longer gets a friendly word."""
    voice_max_bytes: int = Field(default=10_000_000, ge=1000, le=25_000_000)
    """The biggest voice note Pam downloads (checked before and while downloading; Telegram's
    Bot API stops at 20 MB, OpenAI at 25 MB)."""
    media_deadline_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias="PAM_MEDIA_DEADLINE"
    )
    """Seconds a voice note's whole download may take (every hop and read; a slower one is
    tried again later, then apologised for)."""
    # At most this much of a reply is spoken (OpenAI's speech input takes up to 4096).
    speech_max_chars: int = Field(default=1000, ge=50, le=4096)
    """At most this much of a reply is spoken (cut after a sentence)."""
    # What audio counts toward the token budgets (PAM_LEARNER_DAILY_TOKENS, PAM_DAILY_TOKENS),
    # by price against gpt-4o-mini's tokens: see docs/how/voice.md.
    transcription_tokens_per_second: float = Field(default=250.0, ge=0)
    """What a second of transcribed audio counts toward the token budgets (see
    [Voice](how/voice.md))."""
    speech_tokens_per_char: float = Field(default=80.0, ge=0)
    """What a spoken character counts toward the token budgets."""


class CheckinSettings(BaseSettings):
    """Check-ins: Pam writes first, to learners who said `/checkins on` (see
    [Check-ins](how/checkins.md))."""

    model_config = section("PAM_CHECKINS_")

    # Off by default: an upgraded deployment must not start writing to learners unasked, nor
    # send WhatsApp templates (billed per conversation) before its operator decided to.
    enabled: bool = Field(default=False, validation_alias="PAM_CHECKINS")
    """`true`: Pam writes first to learners who opted in with `/checkins on` (off by default, so
    an upgraded deployment never starts writing to learners, or paying for WhatsApp templates,
    before its operator decides to)."""
    quiet_start: int = Field(default=21, ge=0, le=23)
    """The local hour quiet hours begin at (no check-in from then)."""
    quiet_end: int = Field(default=9, ge=0, le=23)
    """The local hour quiet hours end at (equal to the start: no quiet hours)."""
    default_hour: int = Field(default=18, ge=0, le=23)
    """The local hour of a check-in while Pam has not learned when the learner writes."""
    recent_chat_hours: float = Field(default=6.0, ge=0, le=72)
    """No check-in on a day the learner wrote in the last this many hours before it."""
    backoff_days: float = Field(default=2.0, gt=0, le=60)
    """After an unanswered check-in, the next waits this many days, doubled for each more
    unanswered in a row."""
    max_unanswered: int = Field(default=3, ge=0, le=30)
    """After this many unanswered check-ins in a row Pam stops writing first, until the
    learner writes again (0: no such limit; a back-off longer than the 60 days a plan
    looks ahead stops them all the same)."""
    per_minute: int = Field(default=600, ge=1, le=100_000)
    """Check-ins written per minute, by all workers together: within Telegram's ~30 messages
    a second with room for replies, however many are due at once."""
    threads: int = Field(default=4, ge=1, le=64)
    """Check-ins each worker composes at once (each waits on the model)."""
    round_seconds: float = Field(default=30.0, ge=1, le=3600)
    """How often each worker looks for due check-ins."""
    lease_seconds: float = Field(default=120.0, gt=0)
    """A check-in whose worker died is taken up by another after this long."""


class CoreSettings(BaseSettings):
    """The sections the core reads: the database, the log level, the model, memory, limits, the
    worker, charts, voice and check-ins. bot/ takes these (or one of its sections) and nothing
    else; the whole configuration, with the web's and each channel's sections, extends it in the
    outer layer (webhooks/settings.py)."""

    model_config = section("PAM_")

    database_url: str = Field(default="sqlite:///pam.db", validation_alias="DATABASE_URL")
    """SQLAlchemy URL; `postgres://…` and `postgresql://…` are accepted (psycopg 3)."""
    log_level: Level | None = None
    """Default: `WARNING` (`pam chat`), `INFO` (services). Log level (DEBUG, INFO, WARNING,
    ERROR or CRITICAL; anything else stops the command and says so); logs never contain
    message bodies or secrets at INFO."""
    llm: LLMSettings = Field(default_factory=LLMSettings)
    memory: MemoryConfig = Field(default_factory=MemorySettings, validate_default=True)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    charts: ChartSettings = Field(default_factory=ChartSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    # Named `checkin`, not `checkins`: a section is also read from the variable its name
    # makes (PAM_<NAME>), and PAM_CHECKINS is the switch inside it (`enabled`).
    checkin: CheckinSettings = Field(default_factory=CheckinSettings)

    # Each section's settings class, by its field (`memory` is read as MemorySettings, given as
    # a MemoryConfig); the fields not named here are the top level's.
    SECTIONS: ClassVar[dict[str, type[BaseModel]]] = {
        "llm": LLMSettings,
        "memory": MemorySettings,
        "limits": LimitSettings,
        "service": ServiceSettings,
        "charts": ChartSettings,
        "voice": VoiceSettings,
        "checkin": CheckinSettings,
    }

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_capitals(cls, level: object) -> object:
        return level.strip().upper() if isinstance(level, str) else level

    @field_validator("memory")
    @classmethod
    def _memory_model_defaults_to_the_reply_model(
        cls, memory: MemoryConfig, info: ValidationInfo
    ) -> MemoryConfig:
        # PAM_MEMORY_MODEL (or a memory_model given), else PAM_MODEL.
        if "memory_model" in memory.model_fields_set or "llm" not in info.data:
            return memory
        return memory.model_copy(update={"memory_model": info.data["llm"].model})

    @classmethod
    def variables(cls) -> dict[str, tuple[str | None, str]]:
        """Every environment variable these settings read, section by section: its section
        (None: the top level) and field."""
        top = {
            str(field.validation_alias): (None, name)
            for name, field in cls.model_fields.items()
            if name not in cls.SECTIONS
        }
        return top | {
            str(field.validation_alias): (section, name)
            for section, model in cls.SECTIONS.items()
            for name, field in model.model_fields.items()
        }

    def value_of(self, variable: str) -> object:
        """The value of the setting the environment variable `variable` sets."""
        section, field = self.variables()[variable]
        return getattr(getattr(self, section) if section else self, field)

    def replace(self, **changes: Any) -> Self:
        """These settings with some values replaced (they are frozen): a top-level value, or
        for a section a dict of the fields to replace in it, e.g.
        `settings.replace(limits={"rate_limit_per_minute": 0})`. Nothing is derived again: a
        new `llm.model` leaves `memory.memory_model` as it was."""
        update: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in type(self).model_fields:
                raise TypeError(f"{type(self).__name__} has no {name!r}")
            if isinstance(value, dict):
                value = _replaced(getattr(self, name), value)
            update[name] = value
        return self.model_copy(update=update)


def _replaced(section: M, values: dict[str, Any]) -> M:
    """`section` with the fields in `values` replaced."""
    unknown = set(values) - set(type(section).model_fields)
    if unknown:
        raise TypeError(f"{type(section).__name__} has no {', '.join(sorted(unknown))}")
    return section.model_copy(update=values)
