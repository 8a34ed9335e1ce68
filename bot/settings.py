"""Pam's configuration: read once from the environment into one typed object."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.config import MemoryConfig


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Every knob Pam has. Build it with `Settings()` at the edge; tests pass values directly."""

    model_config = SettingsConfigDict(frozen=True, populate_by_name=True, extra="ignore")

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

    window_messages: int = Field(
        default=10, ge=2, validation_alias=_env("PAM_WINDOW_MESSAGES", "window_messages")
    )
    summary_trigger_tokens: int = Field(
        default=2000,
        gt=0,
        validation_alias=_env("PAM_SUMMARY_TRIGGER_TOKENS", "summary_trigger_tokens"),
    )
    summary_max_tokens: int = Field(
        default=500, gt=0, validation_alias=_env("PAM_SUMMARY_MAX_TOKENS", "summary_max_tokens")
    )
    profile_every: int = Field(
        default=5, ge=1, validation_alias=_env("PAM_PROFILE_EVERY", "profile_every")
    )
    job_lease_seconds: float = Field(
        default=300.0, gt=0, validation_alias=_env("PAM_JOB_LEASE_SECONDS", "job_lease_seconds")
    )
    shutdown_wait_seconds: float = Field(
        default=60.0,
        ge=0,
        validation_alias=_env("PAM_SHUTDOWN_WAIT_SECONDS", "shutdown_wait_seconds"),
    )

    @property
    def memory_model(self) -> str:
        """The model for summary and profile jobs: `PAM_MEMORY_MODEL`, else `PAM_MODEL`."""
        return self.memory_model_override or self.model

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
            profile_every=self.profile_every,
            job_lease_seconds=self.job_lease_seconds,
            memory_model=self.memory_model,
        )
