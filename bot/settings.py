"""Pam's configuration: read once from the environment into one typed object."""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.llm_requests import Effort, StructuredOutput
from memory.config import MemoryConfig

# Platforms redeliver an unacknowledged message for up to a day; finished queue items are kept
# at least this long so that a redelivery is still recognised.
MIN_QUEUE_RETENTION_HOURS = 24


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Every knob Pam has. Build it with `Settings()` at the edge; tests pass values directly."""

    # An empty variable (`TELEGRAM_WEBHOOK_SECRET=` as .env.example has it) means unset: the
    # default applies, instead of an empty string failing validation for every command.
    model_config = SettingsConfigDict(
        frozen=True, populate_by_name=True, extra="ignore", env_ignore_empty=True
    )

    database_url: str = Field(
        default="sqlite:///pam.db", validation_alias=_env("DATABASE_URL", "database_url")
    )

    openai_api_key: str | None = Field(
        default=None, validation_alias=_env("OPENAI_API_KEY", "openai_api_key")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=_env("OPENAI_BASE_URL", "openai_base_url")
    )
    model: str = Field(default="gpt-4o-mini", validation_alias=_env("PAM_MODEL", "model"))
    memory_model_override: str | None = Field(
        default=None, validation_alias=_env("PAM_MEMORY_MODEL", "memory_model_override")
    )
    llm_timeout_seconds: float = Field(
        default=30.0, gt=0, validation_alias=_env("PAM_LLM_TIMEOUT", "llm_timeout_seconds")
    )
    llm_max_retries: int = Field(
        default=3, ge=0, le=10, validation_alias=_env("PAM_LLM_MAX_RETRIES", "llm_max_retries")
    )
    reply_max_tokens: int = Field(
        default=700, gt=0, validation_alias=_env("PAM_REPLY_MAX_TOKENS", "reply_max_tokens")
    )
    # auto: JSON schema where the provider has it, else JSON mode, else the prompt's word,
    # learned per model from the provider's 400; any other value pins that mode.
    structured_output: StructuredOutput = Field(
        default="auto", validation_alias=_env("PAM_STRUCTURED_OUTPUT", "structured_output")
    )
    # Sent to OpenAI's reasoning models (o-series, gpt-5*) only; "off" sends none.
    reasoning_effort: Effort = Field(
        default="low", validation_alias=_env("PAM_REASONING_EFFORT", "reasoning_effort")
    )
    memory_reasoning_effort: Effort = Field(
        default="low",
        validation_alias=_env("PAM_MEMORY_REASONING_EFFORT", "memory_reasoning_effort"),
    )

    rate_limit_per_minute: int = Field(
        default=20,
        ge=0,
        validation_alias=_env("PAM_RATE_LIMIT_PER_MINUTE", "rate_limit_per_minute"),
    )
    learner_daily_tokens: int = Field(
        default=200_000,
        ge=0,
        validation_alias=_env("PAM_LEARNER_DAILY_TOKENS", "learner_daily_tokens"),
    )
    daily_tokens: int = Field(
        default=0, ge=0, validation_alias=_env("PAM_DAILY_TOKENS", "daily_tokens")
    )

    window_messages: int = Field(
        default=10, ge=2, validation_alias=_env("PAM_WINDOW_MESSAGES", "window_messages")
    )
    summary_trigger_tokens: int = Field(
        default=600,
        gt=0,
        validation_alias=_env("PAM_SUMMARY_TRIGGER_TOKENS", "summary_trigger_tokens"),
    )
    summary_max_tokens: int = Field(
        default=120, gt=0, validation_alias=_env("PAM_SUMMARY_MAX_TOKENS", "summary_max_tokens")
    )
    fold_batch_messages: int = Field(
        default=6,
        ge=1,
        validation_alias=_env("PAM_FOLD_BATCH_MESSAGES", "fold_batch_messages"),
    )
    profile_every: int = Field(
        default=5, ge=1, validation_alias=_env("PAM_PROFILE_EVERY", "profile_every")
    )
    job_lease_seconds: float = Field(
        default=60.0, gt=0, validation_alias=_env("PAM_JOB_LEASE_SECONDS", "job_lease_seconds")
    )
    shutdown_wait_seconds: float = Field(
        default=60.0,
        ge=0,
        validation_alias=_env("PAM_SHUTDOWN_WAIT_SECONDS", "shutdown_wait_seconds"),
    )

    # -- the service: web, workers, queues ---------------------------------------------------
    port: int = Field(default=8000, ge=1, le=65535, validation_alias=_env("PORT", "port"))
    db_pool_size: int = Field(
        default=5, ge=1, le=100, validation_alias=_env("PAM_DB_POOL_SIZE", "db_pool_size")
    )
    worker_threads: int = Field(
        default=4, ge=1, le=64, validation_alias=_env("PAM_WORKER_THREADS", "worker_threads")
    )
    delivery_threads: int = Field(
        default=2, ge=1, le=32, validation_alias=_env("PAM_DELIVERY_THREADS", "delivery_threads")
    )
    poll_seconds: float = Field(
        default=0.25, gt=0, le=60, validation_alias=_env("PAM_POLL_SECONDS", "poll_seconds")
    )
    inbox_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        validation_alias=_env("PAM_INBOX_LEASE_SECONDS", "inbox_lease_seconds"),
    )
    delivery_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        validation_alias=_env("PAM_DELIVERY_LEASE_SECONDS", "delivery_lease_seconds"),
    )
    max_turn_attempts: int = Field(
        default=5, ge=1, validation_alias=_env("PAM_MAX_TURN_ATTEMPTS", "max_turn_attempts")
    )
    max_send_attempts: int = Field(
        default=8, ge=1, validation_alias=_env("PAM_MAX_SEND_ATTEMPTS", "max_send_attempts")
    )
    queue_retention_hours: float = Field(
        default=168.0,
        ge=0,
        validation_alias=_env("PAM_QUEUE_RETENTION_HOURS", "queue_retention_hours"),
    )

    admin_token: str | None = Field(
        default=None, validation_alias=_env("PAM_ADMIN_TOKEN", "admin_token")
    )

    # -- the HTTP API channel (custom front-ends; also what the service tests drive) --------
    api_token: str | None = Field(default=None, validation_alias=_env("PAM_API_TOKEN", "api_token"))
    api_callback_url: str | None = Field(
        default=None, validation_alias=_env("PAM_API_CALLBACK_URL", "api_callback_url")
    )

    # -- Telegram ---------------------------------------------------------------------------
    telegram_bot_token: str | None = Field(
        default=None, validation_alias=_env("TELEGRAM_BOT_TOKEN", "telegram_bot_token")
    )
    telegram_webhook_secret: str | None = Field(
        default=None,
        validation_alias=_env("TELEGRAM_WEBHOOK_SECRET", "telegram_webhook_secret"),
        pattern=r"^[A-Za-z0-9_-]{1,256}$",  # what Telegram allows in a secret token
    )
    telegram_api_url: str | None = Field(
        default=None, validation_alias=_env("TELEGRAM_API_URL", "telegram_api_url")
    )
    # -- WhatsApp through Twilio ------------------------------------------------------------
    twilio_account_sid: str | None = Field(
        default=None, validation_alias=_env("TWILIO_ACCOUNT_SID", "twilio_account_sid")
    )
    twilio_auth_token: str | None = Field(
        default=None, validation_alias=_env("TWILIO_AUTH_TOKEN", "twilio_auth_token")
    )
    twilio_whatsapp_number: str | None = Field(
        default=None, validation_alias=_env("TWILIO_WHATSAPP_NUMBER", "twilio_whatsapp_number")
    )
    twilio_webhook_shared_key: str | None = Field(
        default=None,
        validation_alias=_env("TWILIO_WEBHOOK_SHARED_KEY_SECRET", "twilio_webhook_shared_key"),
    )
    twilio_api_url: str | None = Field(
        default=None, validation_alias=_env("TWILIO_API_URL", "twilio_api_url")
    )

    public_url: str | None = Field(
        default=None, validation_alias=_env("PAM_PUBLIC_URL", "public_url")
    )
    # Reverse proxies in front of the web app whose X-Forwarded-* headers are trusted; unset:
    # one on Heroku and Fly (they set DYNO and FLY_APP_NAME on every process), else none.
    proxy_hops_override: int | None = Field(
        default=None, ge=0, le=10, validation_alias=_env("PAM_PROXY_HOPS", "proxy_hops_override")
    )
    heroku_dyno: str | None = Field(default=None, validation_alias=_env("DYNO", "heroku_dyno"))
    fly_app_name: str | None = Field(
        default=None, validation_alias=_env("FLY_APP_NAME", "fly_app_name")
    )

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

    @property
    def memory_model(self) -> str:
        """The model for summary and profile jobs: `PAM_MEMORY_MODEL`, else `PAM_MODEL`."""
        return self.memory_model_override or self.model

    @property
    def proxy_hops(self) -> int:
        """How many proxies' X-Forwarded-* headers to trust: `PAM_PROXY_HOPS`, else 1 on
        Heroku and Fly (their router or proxy), else 0 (a client's own headers count for
        nothing)."""
        if self.proxy_hops_override is not None:
            return self.proxy_hops_override
        return 1 if self.heroku_dyno or self.fly_app_name else 0

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI key or an OpenAI-compatible base URL is set."""
        return bool(self.openai_api_key or self.openai_base_url)

    def memory_config(self) -> MemoryConfig:
        """The memory knobs as the memory package sees them."""
        return MemoryConfig(
            window_messages=self.window_messages,
            summary_trigger_tokens=self.summary_trigger_tokens,
            summary_max_tokens=self.summary_max_tokens,
            fold_batch_messages=self.fold_batch_messages,
            profile_every=self.profile_every,
            job_lease_seconds=self.job_lease_seconds,
            memory_model=self.memory_model,
        )
