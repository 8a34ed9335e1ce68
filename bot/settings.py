"""Pam's configuration: read once from the environment into one typed object of sections.

Each section reads the variables named by its prefix and its fields' names in capitals
(`TelegramSettings.bot_token` is `TELEGRAM_BOT_TOKEN`); the few older names that do not fit
their section's prefix are given where the field is. A value that fails validation is
reported under the variable's name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import AliasGenerator, BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.llm_requests import Effort, StructuredOutput
from bot.logs import Level
from memory.config import DEFAULT_MODEL, MemoryConfig

# Platforms redeliver an unacknowledged message for up to a day; finished queue items are kept
# at least this long so that a redelivery is still recognised.
MIN_QUEUE_RETENTION_HOURS = 24

# The shortest secret Pam takes where it checks one (a bearer token, a webhook's secret, a
# signing key): shorter is guessable. `openssl rand -hex 32`, which the README suggests, and
# Heroku's generated secrets give 64 characters.
MIN_SECRET_CHARS = 16
# Twilio's auth tokens are 32 hex digits.
TWILIO_AUTH_TOKEN_CHARS = 32
# A Telegram bot token: the bot's numeric id, ":" and the secret part, 35 characters of
# A-Z a-z 0-9 _ - in BotFather's tokens (30 here, to spare any shorter real one).
_TELEGRAM_BOT_TOKEN = re.compile(r"[0-9]+:[A-Za-z0-9_-]{30,}")

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
    base_url: str | None = Field(default=None, validation_alias="OPENAI_BASE_URL")
    model: str = DEFAULT_MODEL
    # Seconds to wait for an answer. Long enough for a small local model on a CPU (a reply
    # there takes up to a minute); a request that times out is not sent again at once
    # (bot/llm_retries.py), and a server slower than half of it is told to the operator once.
    timeout_seconds: float = Field(default=120.0, gt=0, validation_alias="PAM_LLM_TIMEOUT")
    max_retries: int = Field(default=3, ge=0, le=10, validation_alias="PAM_LLM_MAX_RETRIES")
    reply_max_tokens: int = Field(default=700, gt=0)
    # auto: JSON schema where the provider has it, else JSON mode, else the prompt's word,
    # learned per model from the provider's 400; any other value pins that mode.
    structured_output: StructuredOutput = "auto"
    # Sent to OpenAI's reasoning models (o-series, gpt-5*) only; "off" sends none.
    reasoning_effort: Effort = "low"
    memory_reasoning_effort: Effort = "low"

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
    learner_daily_tokens: int = Field(default=200_000, ge=0)
    daily_tokens: int = Field(default=0, ge=0)
    # Messages of one learner waiting to be answered, at most: the web turns more away
    # without storing them (a burst never fills the database nor slows anyone else down).
    max_queued_per_address: int = Field(default=20, ge=0)


class ServiceSettings(BaseSettings):
    """The long-running processes: connections, lanes, leases, retries, retention, shutdown."""

    model_config = section("PAM_")

    db_pool_size: int = Field(default=5, ge=1, le=100)
    worker_threads: int = Field(default=4, ge=1, le=64)
    delivery_threads: int = Field(default=2, ge=1, le=32)
    poll_seconds: float = Field(default=0.25, gt=0, le=60)
    inbox_lease_seconds: float = Field(default=60.0, gt=0)
    delivery_lease_seconds: float = Field(default=60.0, gt=0)
    max_turn_attempts: int = Field(default=5, ge=1)
    max_send_attempts: int = Field(default=8, ge=1)
    queue_retention_hours: float = Field(default=168.0, ge=0)
    shutdown_wait_seconds: float = Field(default=60.0, ge=0)
    # Memory jobs in a child process at a lower CPU priority (a fold never holds up a reply),
    # or on the worker's own threads: one Python process less, for machines of 512 MB.
    memory_process: bool = True

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


class WebSettings(BaseSettings):
    """The web app: its port, its public address, the operator's token, the proxies trusted."""

    model_config = section("PAM_")

    port: int = Field(default=8000, ge=1, le=65535, validation_alias="PORT")
    public_url: str | None = None
    admin_token: str | None = None
    # Reverse proxies in front of the web app whose X-Forwarded-* headers are trusted; unset:
    # one on Heroku and Fly (they set DYNO and FLY_APP_NAME on every process), else none.
    proxy_hops_override: int | None = Field(
        default=None, ge=0, le=10, validation_alias="PAM_PROXY_HOPS"
    )
    heroku_dyno: str | None = Field(default=None, validation_alias="DYNO")
    fly_app_name: str | None = Field(default=None, validation_alias="FLY_APP_NAME")

    @field_validator("admin_token")
    @classmethod
    def _a_secret(cls, token: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), token)

    @property
    def proxy_hops(self) -> int:
        """How many proxies' X-Forwarded-* headers to trust: `PAM_PROXY_HOPS`, else 1 on
        Heroku and Fly (their router or proxy), else 0 (a client's own headers count for
        nothing)."""
        if self.proxy_hops_override is not None:
            return self.proxy_hops_override
        return 1 if self.heroku_dyno or self.fly_app_name else 0


class ChartSettings(BaseSettings):
    """/progress charts: their signed links (WhatsApp's media and the API's image URL, under
    PAM_PUBLIC_URL) and where `pam chat` writes them."""

    model_config = section("PAM_")

    # Unset: a random key Pam makes once and keeps in the database (memory/charts.py).
    link_secret: str | None = None
    chart_link_seconds: int = Field(default=86400, ge=60, le=30 * 86400)
    # `pam chat` writes each chart here; unset: the working directory.
    chart_dir: Path | None = None

    @field_validator("link_secret")
    @classmethod
    def _a_secret(cls, secret: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), secret)


class VoiceSettings(BaseSettings):
    """Voice notes in (transcribed) and spoken replies out, through an OpenAI-compatible audio
    API: OpenAI's, or a local server's (speaches, LocalAI) when the chat server has none."""

    model_config = section("PAM_")

    # Off: a voice note gets "I can only read text for now", as before voice.
    voice_notes: bool = True
    # Unset: the chat model's (OPENAI_BASE_URL, OPENAI_API_KEY).
    audio_base_url: str | None = None
    audio_api_key: str | None = None
    # A transcription's limit (the turn waits for it).
    audio_timeout_seconds: float = Field(default=60.0, gt=0, validation_alias="PAM_AUDIO_TIMEOUT")
    # A spoken copy's limit: it is made after the text went out, so it may take a CPU speech
    # server's time (about 2 s per spoken second: 120 s speaks ~900 characters).
    speech_timeout_seconds: float = Field(
        default=120.0, gt=0, le=3600, validation_alias="PAM_SPEECH_TIMEOUT"
    )
    transcription_model: str = "gpt-4o-mini-transcribe"
    speech_model: str = "gpt-4o-mini-tts"
    speech_voice: str = "coral"
    # A longer or bigger note gets a friendly word instead of a transcription. OpenAI takes
    # files up to 25 MB; Telegram's Bot API downloads files up to 20 MB.
    voice_max_seconds: int = Field(default=300, ge=1, le=3600)
    voice_max_bytes: int = Field(default=10_000_000, ge=1000, le=25_000_000)
    # Seconds a note's whole download may take (each read has its own timeout as well): a
    # server that trickles the bytes cannot hold a lane longer.
    media_deadline_seconds: float = Field(
        default=30.0, gt=0, le=600, validation_alias="PAM_MEDIA_DEADLINE"
    )
    # At most this much of a reply is spoken (OpenAI's speech input takes up to 4096).
    speech_max_chars: int = Field(default=1000, ge=50, le=4096)
    # What audio counts toward the token budgets (PAM_LEARNER_DAILY_TOKENS, PAM_DAILY_TOKENS),
    # by price against gpt-4o-mini's tokens: see the README's "Voice" section.
    transcription_tokens_per_second: float = Field(default=250.0, ge=0)
    speech_tokens_per_char: float = Field(default=80.0, ge=0)


class ApiSettings(BaseSettings):
    """The HTTP API channel (custom front-ends; also what the service tests drive)."""

    model_config = section("PAM_API_")

    token: str | None = None
    callback_url: str | None = None

    @field_validator("token")
    @classmethod
    def _a_secret(cls, token: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), token)


class TelegramSettings(BaseSettings):
    """The Telegram channel."""

    model_config = section("TELEGRAM_")

    bot_token: str | None = None
    # What Telegram allows in a secret token.
    webhook_secret: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,256}$")
    api_url: str | None = None
    # The operator's own Bot API server in --local mode: the directory holding its files, as
    # Pam sees it. Only files under it are read from disk, and only with api_url set.
    local_files_dir: Path | None = None

    @field_validator("local_files_dir")
    @classmethod
    def _local_files_of_our_own_server(cls, path: Path | None, info: ValidationInfo) -> Path | None:
        if path is not None and not info.data.get("api_url"):
            raise ValueError(
                "it is the files directory of your own Bot API server in --local mode: set "
                "TELEGRAM_API_URL to that server too (Telegram's own names no local files)"
            )
        return path

    @field_validator("bot_token")
    @classmethod
    def _botfathers_shape(cls, token: str | None) -> str | None:
        if token and not _TELEGRAM_BOT_TOKEN.fullmatch(token):
            raise ValueError(
                "TELEGRAM_BOT_TOKEN is not a token from @BotFather: the bot's id, a colon and "
                "its secret of 35 letters, digits, _ or - (123456789:AAH…)"
            )
        return token

    @field_validator("webhook_secret")
    @classmethod
    def _a_secret(cls, secret: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), secret)


class WhatsAppSettings(BaseSettings):
    """The WhatsApp channel, through Twilio."""

    model_config = section("TWILIO_")

    account_sid: str | None = None
    auth_token: str | None = None
    number: str | None = Field(default=None, validation_alias="TWILIO_WHATSAPP_NUMBER")
    webhook_shared_key: str | None = Field(
        default=None, validation_alias="TWILIO_WEBHOOK_SHARED_KEY_SECRET"
    )
    api_url: str | None = None

    @field_validator("auth_token")
    @classmethod
    def _twilios_shape(cls, token: str | None) -> str | None:
        if token and len(token) < TWILIO_AUTH_TOKEN_CHARS:
            raise ValueError(
                f"TWILIO_AUTH_TOKEN is too short: Twilio's auth tokens are "
                f"{TWILIO_AUTH_TOKEN_CHARS} characters (the Twilio Console's Account Info)"
            )
        return token

    @field_validator("webhook_shared_key")
    @classmethod
    def _a_secret(cls, secret: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), secret)


class Settings(BaseSettings):
    """Every knob Pam has, by section. Build it with `Settings()` at the edge; tests pass
    values directly (`Settings(database_url=..., llm={"api_key": ...})`) or `replace` some."""

    model_config = section("PAM_")

    database_url: str = Field(default="sqlite:///pam.db", validation_alias="DATABASE_URL")
    # Unset: each process's own (WARNING for the terminal and one-off commands, INFO for the
    # services).
    log_level: Level | None = None
    llm: LLMSettings = Field(default_factory=LLMSettings)
    memory: MemoryConfig = Field(default_factory=MemorySettings, validate_default=True)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    charts: ChartSettings = Field(default_factory=ChartSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    whatsapp: WhatsAppSettings = Field(default_factory=WhatsAppSettings)

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

    def value_of(self, variable: str) -> object:
        """The value of the setting the environment variable `variable` sets."""
        section, field = variables()[variable]
        return getattr(getattr(self, section) if section else self, field)

    def replace(self, **changes: Any) -> Settings:
        """These settings with some values replaced (they are frozen): a top-level value, or
        for a section a dict of the fields to replace in it, e.g.
        `settings.replace(limits={"rate_limit_per_minute": 0})`. Nothing is derived again: a
        new `llm.model` leaves `memory.memory_model` as it was."""
        update: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in Settings.model_fields:
                raise TypeError(f"Settings has no {name!r}")
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


def variables() -> dict[str, tuple[str | None, str]]:
    """Every environment variable the settings read, section by section: its section (None:
    the top level) and field."""
    top = {
        str(field.validation_alias): (None, name)
        for name, field in Settings.model_fields.items()
        if name not in SECTIONS
    }
    return top | {
        str(field.validation_alias): (section, name)
        for section, model in SECTIONS.items()
        for name, field in model.model_fields.items()
    }


def env_names() -> tuple[str, ...]:
    """Every environment variable the settings read."""
    return tuple(variables())


# Each section's settings class (`memory` is read as MemorySettings, given as a MemoryConfig).
SECTIONS: dict[str, type[BaseModel]] = {
    "llm": LLMSettings,
    "memory": MemorySettings,
    "limits": LimitSettings,
    "service": ServiceSettings,
    "web": WebSettings,
    "charts": ChartSettings,
    "voice": VoiceSettings,
    "api": ApiSettings,
    "telegram": TelegramSettings,
    "whatsapp": WhatsAppSettings,
}
