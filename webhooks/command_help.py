"""What each `pam` command reads from the environment, as its --help names it: the variables
by concern, the commands that read them, and the end of each command's help (examples, then
those variables). A table checked against the settings, kept apart from the commands
themselves (webhooks/cli.py)."""

from __future__ import annotations

# What each command reads from the environment, for its --help (tests/webhooks/test_cli.py
# checks that every setting is listed somewhere, that no name here is a typo and that each
# command's help names its own). Every process that runs turns or jobs opens a pool of
# PAM_DB_POOL_SIZE (bot/worker/runtime.py).
DATABASE = ("DATABASE_URL", "PAM_DB_POOL_SIZE", "PAM_LOG_LEVEL")
LLM = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PAM_MODEL",
    "PAM_MEMORY_MODEL",
    "PAM_LLM_TIMEOUT",
    "PAM_LLM_MAX_RETRIES",
    "PAM_REPLY_MAX_TOKENS",
    "PAM_STRUCTURED_OUTPUT",
    "PAM_REASONING_EFFORT",
    "PAM_MEMORY_REASONING_EFFORT",
)
MEMORY = (
    "PAM_WINDOW_MESSAGES",
    "PAM_SUMMARY_TRIGGER_TOKENS",
    "PAM_SUMMARY_MAX_TOKENS",
    "PAM_FOLD_BATCH_MESSAGES",
    "PAM_PROFILE_EVERY",
    "PAM_JOB_LEASE_SECONDS",
    "PAM_SHUTDOWN_WAIT_SECONDS",
)
LIMITS = ("PAM_RATE_LIMIT_PER_MINUTE", "PAM_LEARNER_DAILY_TOKENS", "PAM_DAILY_TOKENS")
# Read where replies are made (not by the memory jobs): recall, review, /forget's question.
RECALL = ("PAM_RECALL", "PAM_RECALL_MAX_TOKENS", "PAM_REVIEW", "PAM_FORGET_CONFIRM_SECONDS")
# Voice notes transcribed and replies spoken where replies are made.
VOICE = (
    "PAM_VOICE_NOTES",
    "PAM_AUDIO_BASE_URL",
    "PAM_AUDIO_API_KEY",
    "PAM_AUDIO_TIMEOUT",
    "PAM_SPEECH_TIMEOUT",
    "PAM_TRANSCRIPTION_MODEL",
    "PAM_SPEECH_MODEL",
    "PAM_SPEECH_VOICE",
    "PAM_VOICE_MAX_SECONDS",
    "PAM_VOICE_MAX_BYTES",
    "PAM_SPEECH_MAX_CHARS",
    "PAM_TRANSCRIPTION_TOKENS_PER_SECOND",
    "PAM_SPEECH_TOKENS_PER_CHAR",
)
LANES = (
    "PAM_WORKER_THREADS",
    "PAM_MEMORY_THREADS",
    "PAM_DELIVERY_THREADS",
    "PAM_POLL_SECONDS",
    "PAM_INBOX_LEASE_SECONDS",
    "PAM_DELIVERY_LEASE_SECONDS",
    "PAM_MAX_TURN_ATTEMPTS",
    "PAM_MAX_SEND_ATTEMPTS",
    "PAM_QUEUE_RETENTION_HOURS",
    "PAM_CHAT_RETENTION_DAYS",
    "PAM_MEMORY_PROCESS",
)
TELEGRAM = ("TELEGRAM_BOT_TOKEN", "TELEGRAM_API_URL")
SENDERS = (
    *TELEGRAM,
    "TWILIO_ACCOUNT_SID",
    "TWILIO_AUTH_TOKEN",
    "TWILIO_WHATSAPP_NUMBER",
    "TWILIO_API_URL",
    "PAM_API_TOKEN",
    "PAM_API_CALLBACK_URL",
    "PAM_PUBLIC_URL",
    # the signed links of /progress charts (WhatsApp media, the API's image_url)
    "PAM_LINK_SECRET",
    "PAM_CHART_LINK_SECONDS",
)
INBOUND = (
    "TELEGRAM_WEBHOOK_SECRET",
    "TWILIO_WEBHOOK_SHARED_KEY_SECRET",
    "PAM_ADMIN_TOKEN",
    "PAM_MAX_QUEUED_PER_ADDRESS",
    # which proxies' X-Forwarded-* the web app trusts: set, or Heroku's and Fly's own
    "PAM_PROXY_HOPS",
    "DYNO",
    "FLY_APP_NAME",
)
# Voice notes' downloads, by the worker: their deadline, a local Bot API server's files.
DOWNLOADS = ("PAM_MEDIA_DEADLINE", "TELEGRAM_LOCAL_FILES_DIR")
# Check-ins (Pam writing first): their rounds run in the worker; the admin API shows them.
CHECKINS = (
    "PAM_CHECKINS",
    "PAM_CHECKINS_QUIET_START",
    "PAM_CHECKINS_QUIET_END",
    "PAM_CHECKINS_DEFAULT_HOUR",
    "PAM_CHECKINS_RECENT_CHAT_HOURS",
    "PAM_CHECKINS_BACKOFF_DAYS",
    "PAM_CHECKINS_MAX_UNANSWERED",
    "PAM_CHECKINS_PER_MINUTE",
    "PAM_CHECKINS_THREADS",
    "PAM_CHECKINS_ROUND_SECONDS",
    "PAM_CHECKINS_LEASE_SECONDS",
    "PAM_CHECKIN_WHATSAPP_TEMPLATE_SID",
)
WORKER = (
    *(*DATABASE, *LLM, *MEMORY, *RECALL, *VOICE, *DOWNLOADS, *LIMITS, *LANES, *SENDERS),
    *CHECKINS,
)
# Keyed by each command's path after `pam`.
READS: dict[str, tuple[str, ...]] = {
    "chat": (
        *DATABASE,
        *LLM,
        *MEMORY,
        *RECALL,
        *VOICE,
        "PAM_LEARNER_DAILY_TOKENS",
        "PAM_DAILY_TOKENS",
        "PAM_CHART_DIR",
    ),
    "worker": WORKER,
    "serve": (*WORKER, "PORT", *INBOUND),
    "telegram": (*WORKER, "TELEGRAM_WEBHOOK_SECRET", "PAM_MAX_QUEUED_PER_ADDRESS"),
    "telegram set-webhook": (*TELEGRAM, "TELEGRAM_WEBHOOK_SECRET", "PAM_PUBLIC_URL"),
    "telegram delete-webhook": TELEGRAM,
    "telegram status": (*TELEGRAM, "PAM_PUBLIC_URL"),
    "memory-jobs": (*DATABASE, *LLM, *MEMORY),
    "db": ("DATABASE_URL", "PAM_LOG_LEVEL"),
    "db upgrade": ("DATABASE_URL", "PAM_LOG_LEVEL"),
    # Not a `pam` command: the web process on Heroku and Fly, gunicorn 'webhooks.app:create_app()'.
    "web": (
        *("DATABASE_URL", "PAM_DB_POOL_SIZE", "PAM_INBOX_LEASE_SECONDS", *SENDERS, *INBOUND),
        *CHECKINS,
    ),
}
READS["release"] = (*READS["db upgrade"], *READS["telegram set-webhook"])


def reads(command: str) -> str:
    """The paragraph of --help naming the environment variables `command` reads."""
    names = ", ".join(dict.fromkeys(READS[command]))
    return (
        "Reads these environment variables (a .env file in the working directory fills in "
        f"those unset; see docs/configuration.md): {names}"
    )


def epilog(command: str, *examples: str) -> str:
    """The end of a command's --help: examples, kept line by line, then what it reads."""
    lines = "\n".join(f"  {example}" for example in examples)
    return f"\b\nExample{'s' if len(examples) > 1 else ''}:\n{lines}\n\n{reads(command)}"
