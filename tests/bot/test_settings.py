"""Settings come from the environment (and a .env file), typed and validated; an empty variable
means unset; database URLs are normalised."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.settings import Settings
from loopback.harness import ROOT
from memory.config import MemoryConfig
from memory.db import DatabaseURLError, normalize_url
from webhooks.cli import read_dotenv


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
    ],
)
def test_invalid_values_raise(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


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
