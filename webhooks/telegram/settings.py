"""The Telegram channel's section of the settings (TELEGRAM_*), a part of the whole
configuration (webhooks/settings.py)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from bot.settings import long_enough, section, variable_of

# A Telegram bot token: the bot's numeric id, ":" and the secret part, 35 characters of
# A-Z a-z 0-9 _ - in BotFather's tokens (30 here, to spare any shorter real one).
_TELEGRAM_BOT_TOKEN = re.compile(r"[0-9]+:[A-Za-z0-9_-]{30,}")


class TelegramSettings(BaseSettings):
    """The Telegram channel."""

    model_config = section("TELEGRAM_")

    bot_token: str | None = None
    """The bot's token from @BotFather (`<bot id>:<35 characters>`; another shape stops the
    start); enables the Telegram channel."""
    # What Telegram allows in a secret token.
    webhook_secret: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,256}$")
    """The secret Telegram sends with each webhook call (`A-Z a-z 0-9 _ -`, 16 to 256
    characters)."""
    api_url: str | None = None
    """Unset: Telegram. Bot API base before the token, for a local Bot API server (e.g.
    `http://localhost:8081/bot`)."""
    # The operator's own Bot API server in --local mode: the directory holding its files, as
    # Pam sees it. Only files under it are read from disk, and only with api_url set.
    local_files_dir: Path | None = None
    """Your own Bot API server's files directory in its `--local` mode, as Pam's worker sees
    it (e.g. `/var/lib/telegram-bot-api`); the only place Pam reads a voice note from disk
    (needs `TELEGRAM_API_URL`)."""

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
