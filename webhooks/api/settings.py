"""The HTTP API channel's section of the settings (PAM_API_*), a part of the whole configuration
(webhooks/settings.py)."""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from bot.settings import long_enough, section, variable_of


class ApiSettings(BaseSettings):
    """The HTTP API channel (custom front-ends; also what the service tests drive)."""

    model_config = section("PAM_API_")

    token: str | None = None
    """Enables the HTTP API channel; its bearer token and reply-signing key (at least 16
    characters)."""
    callback_url: str | None = None
    """Where the HTTP API channel POSTs replies."""

    @field_validator("token")
    @classmethod
    def _a_secret(cls, token: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), token)
