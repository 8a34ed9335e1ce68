"""Settings come from the environment (and a .env file), typed and validated; an empty variable
means unset; database URLs are normalised."""

from __future__ import annotations

import importlib.util
import operator
import re
import secrets
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.settings import CoreSettings, LimitSettings, LLMSettings, ServiceSettings
from loopback.harness import ROOT
from memory.config import MemoryConfig
from memory.database.db import DatabaseURLError, normalize_url
from webhooks.api.settings import ApiSettings
from webhooks.settings import Settings, WebSettings, env_names
from webhooks.startup import load_settings, read_dotenv
from webhooks.telegram.settings import TelegramSettings
from webhooks.whatsapp.settings import WhatsAppSettings


def test_defaults_without_environment() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite:///pam.db"
    assert settings.llm.api_key is None and settings.llm.base_url is None
    assert settings.llm.model == "gpt-4o-mini"
    assert settings.memory.memory_model == "gpt-4o-mini"
    assert settings.llm.configured is False
    assert settings.memory.model_dump() == MemoryConfig().model_dump()


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "DATABASE_URL": "postgres://pam:secret@db.example:5432/pam",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://localhost:11434/v1",
        "PAM_MODEL": "llama3.1",
        "PAM_MEMORY_MODEL": "llama3.2:1b",
        "PAM_SUMMARY_TRIGGER_TOKENS": "1500",
        "PAM_SUMMARY_MAX_TOKENS": "300",
        "PAM_WINDOW_MESSAGES": "12",
        "PAM_PROFILE_EVERY": "7",
        "PAM_LLM_TIMEOUT": "12.5",
        "PAM_LLM_MAX_RETRIES": "5",
        "PAM_REPLY_MAX_TOKENS": "400",
        "PAM_JOB_LEASE_SECONDS": "90",
        "PAM_SHUTDOWN_WAIT_SECONDS": "0",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.database_url == env["DATABASE_URL"]
    assert settings.llm.api_key == "sk-test"
    assert settings.llm.base_url == "http://localhost:11434/v1"
    assert settings.llm.model == "llama3.1"
    assert settings.memory.memory_model == "llama3.2:1b"
    assert settings.memory.summary_trigger_tokens == 1500
    assert settings.memory.summary_max_tokens == 300
    assert settings.memory.window_messages == 12
    assert settings.memory.profile_every == 7
    assert settings.llm.timeout_seconds == 12.5
    assert settings.llm.max_retries == 5
    assert settings.llm.reply_max_tokens == 400
    assert settings.memory.job_lease_seconds == 90
    assert settings.service.shutdown_wait_seconds == 0
    assert (
        settings.memory.model_dump()
        == MemoryConfig(
            window_messages=12,
            summary_trigger_tokens=1500,
            summary_max_tokens=300,
            profile_every=7,
            job_lease_seconds=90,
            memory_model="llama3.2:1b",
        ).model_dump()
    )


def test_memory_model_defaults_to_the_reply_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAM_MODEL", "gpt-4.1-mini")
    assert Settings().memory.memory_model == "gpt-4.1-mini"
    monkeypatch.setenv("PAM_MEMORY_MODEL", "")
    assert Settings().memory.memory_model == "gpt-4.1-mini"


def test_lowercase_environment_names_work_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("pam_model", "qwen2.5")
    assert Settings().llm.model == "qwen2.5"


def test_tests_can_pass_values_directly() -> None:
    settings = Settings(database_url="sqlite:///x.db", memory={"summary_trigger_tokens": 50})
    assert settings.database_url == "sqlite:///x.db"
    assert settings.memory.summary_trigger_tokens == 50


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.llm.model = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PAM_SUMMARY_TRIGGER_TOKENS", "lots"),
        ("PAM_SUMMARY_TRIGGER_TOKENS", "0"),
        ("PAM_SUMMARY_TRIGGER_TOKENS", "-100"),
        ("PAM_SUMMARY_MAX_TOKENS", "0"),
        ("PAM_WINDOW_MESSAGES", "1"),
        ("PAM_PROFILE_EVERY", "0"),
        ("PAM_LLM_TIMEOUT", "0"),
        ("PAM_LLM_TIMEOUT", "soon"),
        ("PAM_LLM_MAX_RETRIES", "11"),
        ("PAM_LLM_MAX_RETRIES", "-1"),
        ("PAM_REPLY_MAX_TOKENS", "1.5"),
        ("PAM_JOB_LEASE_SECONDS", "0"),
        ("PAM_SHUTDOWN_WAIT_SECONDS", "-1"),
        ("PAM_MEDIA_DEADLINE", "0"),
        ("PAM_FORGET_CONFIRM_SECONDS", "5"),  # too short to read the question
        ("TELEGRAM_LOCAL_FILES_DIR", "/var/lib/telegram-bot-api"),  # without TELEGRAM_API_URL
    ],
)
def test_invalid_values_raise(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert [error["loc"] for error in refused.value.errors()] == [(name,)]


# -- the sections, and every variable operators set ------------------------------------------

# A token as @BotFather gives one: the bot's id, ":" and 35 characters.
BOT_TOKEN = "7412345678:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0"

# Each variable of the docs' configuration reference: a value, where it lands, as what.
EVERY_VARIABLE = [
    ("DATABASE_URL", "sqlite:////tmp/x.db", "database_url", "sqlite:////tmp/x.db"),
    ("OPENAI_API_KEY", "sk-x", "llm.api_key", "sk-x"),
    ("OPENAI_BASE_URL", "http://localhost:1/v1", "llm.base_url", "http://localhost:1/v1"),
    ("PAM_MODEL", "llama3.1", "llm.model", "llama3.1"),
    ("PAM_MEMORY_MODEL", "llama3.2:1b", "memory.memory_model", "llama3.2:1b"),
    ("PAM_LLM_TIMEOUT", "12.5", "llm.timeout_seconds", 12.5),
    ("PAM_LLM_MAX_RETRIES", "5", "llm.max_retries", 5),
    ("PAM_REPLY_MAX_TOKENS", "400", "llm.reply_max_tokens", 400),
    ("PAM_STRUCTURED_OUTPUT", "json_object", "llm.structured_output", "json_object"),
    ("PAM_REASONING_EFFORT", "high", "llm.reasoning_effort", "high"),
    ("PAM_MEMORY_REASONING_EFFORT", "off", "llm.memory_reasoning_effort", "off"),
    ("PAM_RATE_LIMIT_PER_MINUTE", "7", "limits.rate_limit_per_minute", 7),
    ("PAM_LEARNER_DAILY_TOKENS", "1000", "limits.learner_daily_tokens", 1000),
    ("PAM_DAILY_TOKENS", "9000", "limits.daily_tokens", 9000),
    ("PAM_MAX_QUEUED_PER_ADDRESS", "5", "limits.max_queued_per_address", 5),
    ("PAM_WINDOW_MESSAGES", "12", "memory.window_messages", 12),
    ("PAM_SUMMARY_TRIGGER_TOKENS", "1500", "memory.summary_trigger_tokens", 1500),
    ("PAM_SUMMARY_MAX_TOKENS", "300", "memory.summary_max_tokens", 300),
    ("PAM_FOLD_BATCH_MESSAGES", "4", "memory.fold_batch_messages", 4),
    ("PAM_PROFILE_EVERY", "7", "memory.profile_every", 7),
    ("PAM_JOB_LEASE_SECONDS", "90", "memory.job_lease_seconds", 90.0),
    ("PAM_RECALL", "tool", "memory.recall", "tool"),
    ("PAM_RECALL_MAX_TOKENS", "200", "memory.recall_max_tokens", 200),
    ("PAM_REVIEW", "off", "memory.review", False),
    ("PAM_FORGET_CONFIRM_SECONDS", "120", "memory.forget_confirm_seconds", 120),
    ("PAM_SHUTDOWN_WAIT_SECONDS", "0", "service.shutdown_wait_seconds", 0.0),
    ("PAM_LOG_LEVEL", "debug", "log_level", "DEBUG"),
    ("PORT", "9001", "web.port", 9001),
    ("PAM_DB_POOL_SIZE", "9", "service.db_pool_size", 9),
    ("PAM_WORKER_THREADS", "8", "service.worker_threads", 8),
    ("PAM_MEMORY_THREADS", "12", "service.memory_threads", 12),
    ("PAM_DELIVERY_THREADS", "3", "service.delivery_threads", 3),
    ("PAM_POLL_SECONDS", "0.5", "service.poll_seconds", 0.5),
    ("PAM_INBOX_LEASE_SECONDS", "30", "service.inbox_lease_seconds", 30.0),
    ("PAM_DELIVERY_LEASE_SECONDS", "45", "service.delivery_lease_seconds", 45.0),
    ("PAM_MAX_TURN_ATTEMPTS", "2", "service.max_turn_attempts", 2),
    ("PAM_MAX_SEND_ATTEMPTS", "3", "service.max_send_attempts", 3),
    ("PAM_QUEUE_RETENTION_HOURS", "48", "service.queue_retention_hours", 48.0),
    ("PAM_CHAT_RETENTION_DAYS", "120", "service.chat_retention_days", 120),
    ("PAM_MEMORY_PROCESS", "off", "service.memory_process", False),
    ("TELEGRAM_BOT_TOKEN", BOT_TOKEN, "telegram.bot_token", BOT_TOKEN),
    (
        "TELEGRAM_WEBHOOK_SECRET",
        "s3cret_-0123456789",
        "telegram.webhook_secret",
        "s3cret_-0123456789",
    ),
    (
        "TELEGRAM_API_URL",
        "http://localhost:8081/bot",
        "telegram.api_url",
        "http://localhost:8081/bot",
    ),
    (
        "TELEGRAM_LOCAL_FILES_DIR",
        "/var/lib/telegram-bot-api",
        "telegram.local_files_dir",
        Path("/var/lib/telegram-bot-api"),
    ),
    ("TWILIO_ACCOUNT_SID", "AC123", "whatsapp.account_sid", "AC123"),
    ("TWILIO_AUTH_TOKEN", "0123456789abcdef" * 2, "whatsapp.auth_token", "0123456789abcdef" * 2),
    ("TWILIO_WHATSAPP_NUMBER", "whatsapp:+1415", "whatsapp.number", "whatsapp:+1415"),
    ("TWILIO_API_URL", "http://localhost:2", "whatsapp.api_url", "http://localhost:2"),
    (
        "TWILIO_WEBHOOK_SHARED_KEY_SECRET",
        "shared-key-secret",
        "whatsapp.webhook_shared_key",
        "shared-key-secret",
    ),
    ("PAM_PUBLIC_URL", "https://pam.example", "web.public_url", "https://pam.example"),
    ("PAM_PROXY_HOPS", "2", "web.proxy_hops_override", 2),
    ("PAM_ADMIN_TOKEN", "admin-token-0123", "web.admin_token", "admin-token-0123"),
    ("PAM_LINK_SECRET", "links-key-0123456", "charts.link_secret", "links-key-0123456"),
    ("PAM_CHART_LINK_SECONDS", "3600", "charts.chart_link_seconds", 3600),
    ("PAM_CHART_DIR", "/tmp/charts", "charts.chart_dir", Path("/tmp/charts")),
    ("PAM_VOICE_NOTES", "false", "voice.voice_notes", False),
    (
        "PAM_AUDIO_BASE_URL",
        "http://speech:8000/v1",
        "voice.audio_base_url",
        "http://speech:8000/v1",
    ),
    ("PAM_AUDIO_API_KEY", "sk-audio", "voice.audio_api_key", "sk-audio"),
    ("PAM_AUDIO_TIMEOUT", "20", "voice.audio_timeout_seconds", 20.0),
    ("PAM_SPEECH_TIMEOUT", "300", "voice.speech_timeout_seconds", 300.0),
    ("PAM_TRANSCRIPTION_MODEL", "whisper-1", "voice.transcription_model", "whisper-1"),
    ("PAM_SPEECH_MODEL", "tts-1", "voice.speech_model", "tts-1"),
    ("PAM_SPEECH_VOICE", "nova", "voice.speech_voice", "nova"),
    ("PAM_VOICE_MAX_SECONDS", "120", "voice.voice_max_seconds", 120),
    ("PAM_VOICE_MAX_BYTES", "5000000", "voice.voice_max_bytes", 5_000_000),
    ("PAM_MEDIA_DEADLINE", "12.5", "voice.media_deadline_seconds", 12.5),
    ("PAM_SPEECH_MAX_CHARS", "600", "voice.speech_max_chars", 600),
    ("PAM_TRANSCRIPTION_TOKENS_PER_SECOND", "100", "voice.transcription_tokens_per_second", 100.0),
    ("PAM_SPEECH_TOKENS_PER_CHAR", "40", "voice.speech_tokens_per_char", 40.0),
    ("PAM_CHECKINS", "true", "checkin.enabled", True),
    ("PAM_CHECKINS_QUIET_START", "22", "checkin.quiet_start", 22),
    ("PAM_CHECKINS_QUIET_END", "8", "checkin.quiet_end", 8),
    ("PAM_CHECKINS_DEFAULT_HOUR", "17", "checkin.default_hour", 17),
    ("PAM_CHECKINS_RECENT_CHAT_HOURS", "4.5", "checkin.recent_chat_hours", 4.5),
    ("PAM_CHECKINS_BACKOFF_DAYS", "3", "checkin.backoff_days", 3.0),
    ("PAM_CHECKINS_MAX_UNANSWERED", "5", "checkin.max_unanswered", 5),
    ("PAM_CHECKINS_PER_MINUTE", "120", "checkin.per_minute", 120),
    ("PAM_CHECKINS_THREADS", "2", "checkin.threads", 2),
    ("PAM_CHECKINS_ROUND_SECONDS", "60", "checkin.round_seconds", 60.0),
    ("PAM_CHECKINS_LEASE_SECONDS", "300", "checkin.lease_seconds", 300.0),
    (
        "PAM_CHECKIN_WHATSAPP_TEMPLATE_SID",
        "HX0123",
        "whatsapp.checkin_template_sid",
        "HX0123",
    ),
    ("PAM_API_TOKEN", "api-token-0123456", "api.token", "api-token-0123456"),
    (
        "PAM_API_CALLBACK_URL",
        "https://front.example/r",
        "api.callback_url",
        "https://front.example/r",
    ),
    # Set by the platforms, not operators: the docs name them with PAM_PROXY_HOPS.
    ("DYNO", "web.1", "web.heroku_dyno", "web.1"),
    ("FLY_APP_NAME", "pam", "web.fly_app_name", "pam"),
]


def reference_variables() -> set[str]:
    """The variables the docs' configuration reference lists (docs/hooks.py generates it from
    the settings models), each row's first column."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = hooks.settings_reference()
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row)}


def test_the_table_here_is_every_variable_of_the_docs_and_of_the_settings() -> None:
    names = [name for name, *_ in EVERY_VARIABLE]
    assert len(names) == len(set(names))
    assert reference_variables() == set(names)
    assert set(env_names()) == set(names)


# What a variable is valid only with.
NEEDS = {"TELEGRAM_LOCAL_FILES_DIR": {"TELEGRAM_API_URL": "http://localhost:8081/bot"}}


@pytest.mark.parametrize(("name", "value", "path", "expected"), EVERY_VARIABLE)
def test_every_variable_operators_set_is_still_read(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, path: str, expected: object
) -> None:
    for needed, given in NEEDS.get(name, {}).items():
        monkeypatch.setenv(needed, given)
    monkeypatch.setenv(name, value)
    settings = Settings()
    assert operator.attrgetter(path)(settings) == expected
    assert settings.value_of(name) == expected


def test_the_settings_come_in_sections() -> None:
    settings = Settings()
    assert isinstance(settings.llm, LLMSettings)
    assert isinstance(settings.memory, MemoryConfig)  # what memory/ takes, as it is
    assert isinstance(settings.limits, LimitSettings)
    assert isinstance(settings.service, ServiceSettings)
    assert isinstance(settings.web, WebSettings)
    assert isinstance(settings.api, ApiSettings)
    assert isinstance(settings.telegram, TelegramSettings)
    assert isinstance(settings.whatsapp, WhatsAppSettings)
    with pytest.raises(ValidationError):
        settings.telegram.bot_token = "x"  # type: ignore[misc]
    assert set(Settings.SECTIONS) == set(Settings.model_fields) - {"database_url", "log_level"}


def test_the_core_reads_no_channels_settings() -> None:
    """bot/ takes the core's sections; the web's and the channels' are the outer layer's,
    added to them by the whole Settings."""
    core = set(CoreSettings.variables())
    assert core < set(env_names())
    assert not {name for name in core if name.startswith(("TELEGRAM_", "TWILIO_", "PAM_API_"))}
    assert {"PORT", "PAM_PUBLIC_URL", "PAM_ADMIN_TOKEN"}.isdisjoint(core)
    assert Settings().value_of("PAM_MODEL") == CoreSettings().value_of("PAM_MODEL")


def test_a_section_passed_as_values_keeps_the_environment_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAM_LLM_TIMEOUT", "5")
    monkeypatch.setenv("OPENAI_API_KEY", "from-environment")
    settings = Settings(llm={"api_key": "given"})
    assert (settings.llm.api_key, settings.llm.timeout_seconds) == ("given", 5.0)


def test_the_memory_model_follows_a_reply_model_given_directly() -> None:
    assert Settings(llm={"model": "m"}).memory.memory_model == "m"
    assert Settings(llm={"model": "m"}, memory={"window_messages": 4}).memory.memory_model == "m"
    given = Settings(llm={"model": "m"}, memory={"memory_model": "small"})
    assert given.memory.memory_model == "small"


def test_replace_changes_only_the_values_named() -> None:
    settings = Settings(llm={"api_key": "k", "model": "m"}, api={"token": "api-token-0123456"})
    changed = settings.replace(llm={"model": "other"}, database_url="sqlite:///y.db")
    assert (changed.llm.api_key, changed.llm.model) == ("k", "other")
    assert changed.database_url == "sqlite:///y.db" and changed.api == settings.api
    assert (settings.llm.model, settings.database_url) == ("m", "sqlite:///pam.db")
    with pytest.raises(TypeError, match="no bot_tokn"):
        settings.replace(telegram={"bot_tokn": "x"})
    with pytest.raises(TypeError, match="no 'telegram_bot_token'"):
        settings.replace(telegram_bot_token="x")


def test_value_of_a_variable_no_setting_reads_is_an_error() -> None:
    with pytest.raises(KeyError):
        Settings().value_of("PAM_NO_SUCH_THING")


# -- the log level ---------------------------------------------------------------------------


def test_the_log_level_is_unset_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().log_level is None  # each process then uses its own default
    monkeypatch.setenv("PAM_LOG_LEVEL", " warning ")
    assert Settings().log_level == "WARNING"


def test_a_wrong_log_level_names_the_variable_and_the_levels(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PAM_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit) as exited:
        load_settings()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "pam: invalid configuration: PAM_LOG_LEVEL:" in err
    assert "'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'" in err


def test_an_invalid_value_is_reported_under_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TWILIO_WEBHOOK_SHARED_KEY_SECRET", "a-fine-shared-key-secret")
    monkeypatch.setenv("PORT", "70000")
    with pytest.raises(SystemExit):
        load_settings()
    assert "pam: invalid configuration: PORT: Input should be less than or equal to 65535" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("env", "configured"),
    [
        ({}, False),
        ({"OPENAI_API_KEY": ""}, False),
        ({"OPENAI_API_KEY": "sk-test"}, True),
        ({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, True),
        ({"PAM_MODEL": "llama3.1"}, False),
    ],
)
def test_llm_configured(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], configured: bool
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings().llm.configured is configured


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("postgres://u:p@host:5432/db", "postgresql+psycopg://u:p@host:5432/db"),
        ("postgresql://u:p@host/db", "postgresql+psycopg://u:p@host/db"),
        (
            "postgresql://u@host/db?sslmode=require",
            "postgresql+psycopg://u@host/db?sslmode=require",
        ),
        ("postgresql+psycopg://u@host/db", "postgresql+psycopg://u@host/db"),
        ("  postgres://u@host/db\n", "postgresql+psycopg://u@host/db"),
        ("sqlite:///pam.db", "sqlite:///pam.db"),
        ("sqlite:////tmp/pam.db", "sqlite:////tmp/pam.db"),
    ],
)
def test_normalize_url(url: str, normalized: str) -> None:
    assert normalize_url(url) == normalized


@pytest.mark.parametrize(
    "url",
    ["", "   ", "garbage", "not a url at all", "mysql://u@host/db", "mssql+pyodbc://u@dsn"],
)
def test_unusable_urls_are_rejected(url: str) -> None:
    with pytest.raises(DatabaseURLError):
        normalize_url(url)


def test_the_rejection_says_how_to_fix_it() -> None:
    with pytest.raises(DatabaseURLError, match="sqlite and postgresql"):
        normalize_url("mysql://u@host/db")
    with pytest.raises(DatabaseURLError, match="unset it"):
        normalize_url("")


def example_names() -> list[str]:
    """The variables .env.example sets, in its order."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    return [line.split("=", 1)[0] for line in lines if "=" in line and not line.startswith("#")]


def test_every_variable_of_env_example_empty_in_the_environment_means_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = example_names()
    assert "TELEGRAM_WEBHOOK_SECRET" in names and "PORT" in names
    for name in names:
        monkeypatch.setenv(name, "")
    assert Settings() == Settings.model_construct()  # every default, nothing failed
    assert Settings().telegram.webhook_secret is None
    assert Settings().web.port == 8000


def test_env_example_copied_as_it_is_loads_with_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dotenv = tmp_path / ".env"
    shutil.copy(ROOT / ".env.example", dotenv)
    environ: dict[str, str] = {}

    assert read_dotenv(dotenv, environ) is True

    assert set(environ) < set(example_names())  # the empty lines set nothing
    assert "TELEGRAM_WEBHOOK_SECRET" not in environ
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert Settings() == Settings.model_construct()


# -- secrets ---------------------------------------------------------------------------------

SHORT = "Zq7-shrt_9X"  # 11 characters: distinctive, so that its absence from output is telling


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PAM_ADMIN_TOKEN", "¤"),  # one character
        ("PAM_ADMIN_TOKEN", SHORT),
        ("PAM_API_TOKEN", SHORT),
        ("TELEGRAM_WEBHOOK_SECRET", SHORT),
        ("PAM_LINK_SECRET", SHORT),
        ("TWILIO_WEBHOOK_SHARED_KEY_SECRET", SHORT),
        ("TWILIO_AUTH_TOKEN", SHORT + "0" * 20),  # 31: Twilio's are 32
        ("TELEGRAM_BOT_TOKEN", f"123:{SHORT}"),
        ("TELEGRAM_BOT_TOKEN", SHORT * 4),  # no bot id
    ],
)
def test_a_secret_too_short_to_be_one_stops_the_start_naming_it_but_never_its_value(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    """Secrets of one character were accepted: a bearer token or a webhook's secret anyone
    guesses. Each is refused at start, the variable named and the value never repeated
    (neither in the message nor in pydantic's own error text)."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert [error["loc"] for error in refused.value.errors()] == [(variable,)]
    assert value not in str(refused.value)
    with pytest.raises(SystemExit) as exited:
        load_settings()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"pam: invalid configuration: {variable}: " in err
    assert value not in err and SHORT not in err


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PAM_ADMIN_TOKEN", "0123456789abcdef"),  # the minimum, 16
        # `openssl rand -hex 32`, Heroku's generator. Generated anew each run: the ids name
        # the generator, so that every pytest-xdist worker collects the same tests.
        pytest.param("PAM_ADMIN_TOKEN", secrets.token_hex(32), id="PAM_ADMIN_TOKEN-hex32"),
        pytest.param("PAM_API_TOKEN", secrets.token_urlsafe(32), id="PAM_API_TOKEN-urlsafe32"),
        pytest.param(
            "TELEGRAM_WEBHOOK_SECRET",
            secrets.token_urlsafe(32),
            id="TELEGRAM_WEBHOOK_SECRET-urlsafe32",
        ),
        ("TELEGRAM_WEBHOOK_SECRET", "A" * 256),  # the longest Telegram takes
        pytest.param("PAM_LINK_SECRET", secrets.token_hex(32), id="PAM_LINK_SECRET-hex32"),
        pytest.param(
            "TWILIO_WEBHOOK_SHARED_KEY_SECRET",
            secrets.token_urlsafe(24),
            id="TWILIO_WEBHOOK_SHARED_KEY_SECRET-urlsafe24",
        ),
        # Twilio's: 32 hex digits
        pytest.param("TWILIO_AUTH_TOKEN", secrets.token_hex(16), id="TWILIO_AUTH_TOKEN-hex16"),
        ("TELEGRAM_BOT_TOKEN", BOT_TOKEN),
        ("TELEGRAM_BOT_TOKEN", "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"),  # Telegram's docs
    ],
)
def test_real_secrets_are_taken(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    assert Settings().value_of(variable) == value


def test_an_empty_telegram_secret_is_unset_but_a_bad_one_still_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "")
    assert Settings().telegram.webhook_secret is None
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "has spaces")
    with pytest.raises(ValidationError):
        Settings()


def test_dotenv_fills_in_only_what_the_environment_leaves_unset_or_empty(
    tmp_path: Path,
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "# a comment\n"
        "PAM_MODEL=from-file\n"
        "OPENAI_BASE_URL=http://localhost:11434/v1\n"
        "PAM_MEMORY_MODEL=from-file-too\n"
        "TELEGRAM_WEBHOOK_SECRET=\n"
        'PAM_ADMIN_TOKEN="quoted value"\n'
    )
    environ = {"PAM_MODEL": "from-environment", "PAM_MEMORY_MODEL": "", "OTHER": "x"}

    assert read_dotenv(dotenv, environ) is True

    assert environ == {
        "PAM_MODEL": "from-environment",  # the environment wins
        "PAM_MEMORY_MODEL": "from-file-too",  # empty there means unset
        "OPENAI_BASE_URL": "http://localhost:11434/v1",
        "PAM_ADMIN_TOKEN": "quoted value",
        "OTHER": "x",
    }


def test_no_dotenv_file_changes_nothing(tmp_path: Path) -> None:
    environ = {"PAM_MODEL": "x"}
    assert read_dotenv(tmp_path / ".env", environ) is False
    assert environ == {"PAM_MODEL": "x"}


def test_pam_checkins_is_the_switch_and_its_section_reads_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PAM_CHECKINS is the switch inside the check-ins section (named `checkin` so that its
    # variable is not PAM_CHECKINS): `PAM_CHECKINS=true` turns it on, and breaks no command.
    monkeypatch.setenv("PAM_CHECKINS", "true")
    monkeypatch.setenv("PAM_CHECKINS_THREADS", "3")
    settings = Settings()
    assert settings.checkin.enabled and settings.checkin.threads == 3
    monkeypatch.setenv("PAM_CHECKINS", "off")
    assert not Settings().checkin.enabled
    assert Settings(checkin={"enabled": True}).checkin.enabled
