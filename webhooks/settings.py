"""The whole configuration that every `pam` command and the web process read from the
environment: the core's sections (bot/settings.py, all that bot/ is given), the web app's own
and each channel's (webhooks/api/settings.py, webhooks/telegram/settings.py,
webhooks/whatsapp/settings.py). Assembled here, in the outer layer, because only this layer
knows the web and the channels."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from bot.settings import CoreSettings, long_enough, section, variable_of
from webhooks.api.settings import ApiSettings
from webhooks.telegram.settings import TelegramSettings
from webhooks.whatsapp.settings import WhatsAppSettings


class WebSettings(BaseSettings):
    """The web app: its port, its public address, the operator's token, the proxies trusted."""

    model_config = section("PAM_")

    port: int = Field(default=8000, ge=1, le=65535, validation_alias="PORT")
    """Port of `pam serve` (platforms set it; `pam serve --port` wins)."""
    public_url: str | None = None
    """The public https base URL the platforms call (Twilio signs it; Telegram's default
    webhook); also the base of `/progress` chart links (WhatsApp media, the API's
    `image_url`)."""
    admin_token: str | None = None
    """Enables the operator endpoints (`/admin/learners…`, `/metrics`); their bearer token
    (at least 16 characters: `openssl rand -hex 32`)."""
    # Reverse proxies in front of the web app whose X-Forwarded-* headers are trusted; unset:
    # one on Heroku and Fly (they set DYNO and FLY_APP_NAME on every process), else none.
    proxy_hops_override: int | None = Field(
        default=None, ge=0, le=10, validation_alias="PAM_PROXY_HOPS"
    )
    """Default: `1` on Heroku and Fly, else `0`. Reverse proxies in front of the web app
    whose `X-Forwarded-Proto`/`-For` are trusted (0: none, a client's own are ignored)."""
    heroku_dyno: str | None = Field(default=None, validation_alias="DYNO")
    """Set by Heroku on every process, not by operators: Pam reads it to trust Heroku's router
    (`PAM_PROXY_HOPS`)."""
    fly_app_name: str | None = Field(default=None, validation_alias="FLY_APP_NAME")
    """Set by Fly on every machine, not by operators: Pam reads it to trust Fly's proxy
    (`PAM_PROXY_HOPS`)."""

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


class Settings(CoreSettings):
    """Every knob Pam has, by section: the core's, the web's and the channels'. Build it with
    `Settings()` at the edge; tests pass values directly (`Settings(database_url=...,
    llm={"api_key": ...})`) or `replace` some."""

    web: WebSettings = Field(default_factory=WebSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    whatsapp: WhatsAppSettings = Field(default_factory=WhatsAppSettings)

    SECTIONS: ClassVar[dict[str, type[BaseModel]]] = CoreSettings.SECTIONS | {
        "web": WebSettings,
        "api": ApiSettings,
        "telegram": TelegramSettings,
        "whatsapp": WhatsAppSettings,
    }


def env_names() -> tuple[str, ...]:
    """Every environment variable the settings read."""
    return tuple(Settings.variables())
