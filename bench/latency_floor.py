"""The latency benchmark's floor: the same HTTP hops as Pam with no Pam logic. A Flask app
that answers each Telegram webhook POST at once and, from a thread pool, makes one
chat-completions call and one sendMessage: no database, no queue, no memory, no prompt.

    gunicorn 'bench.latency_floor:create_app()'   # the Postgres shape's web server
    waitress-serve --threads 8 --call bench.latency_floor:create_app   # as `pam serve`

Configured by FLOOR_LLM_URL (an OpenAI-compatible base URL, ending in /v1), FLOOR_TELEGRAM_URL
(the Bot API URL up to and including the token), FLOOR_SECRET (the webhook secret) and
FLOOR_THREADS (the pool, like PAM_WORKER_THREADS)."""

from __future__ import annotations

import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from flask import Flask, request
from flask.typing import ResponseReturnValue

log = logging.getLogger("bench.latency_floor")
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class Relay:
    """Webhook in, one LLM call, one channel send: what every Pam turn does over HTTP."""

    def __init__(self, llm_url: str, telegram_url: str, threads: int) -> None:
        self.llm_url = llm_url.rstrip("/")
        self.telegram_url = telegram_url.rstrip("/")
        self.client = httpx.Client(timeout=30)
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="floor")

    def submit(self, update: dict[str, Any]) -> None:
        self.pool.submit(self._answer, update)

    def _answer(self, update: dict[str, Any]) -> None:
        try:
            message = update["message"]
            completion = self.client.post(
                f"{self.llm_url}/chat/completions",
                json={
                    "model": "floor",
                    "messages": [
                        {"role": "system", "content": "# Task: reply"},
                        {"role": "user", "content": message["text"]},
                    ],
                },
            )
            content = completion.json()["choices"][0]["message"]["content"]
            reply = json.loads(content)["reply"]
            self.client.post(
                f"{self.telegram_url}/sendMessage",
                json={"chat_id": message["chat"]["id"], "text": reply},
            )
        except Exception:  # the benchmark counts the missing reply
            log.exception("floor relay failed")


def create_app() -> Flask:
    """The floor's Flask app, configured from the environment."""
    relay = Relay(
        os.environ["FLOOR_LLM_URL"],
        os.environ["FLOOR_TELEGRAM_URL"],
        int(os.environ.get("FLOOR_THREADS", "4")),
    )
    secret = os.environ.get("FLOOR_SECRET", "")
    app = Flask(__name__)

    @app.post("/telegram/webhook")
    def webhook() -> ResponseReturnValue:
        if request.headers.get(SECRET_HEADER, "") != secret:
            return {"error": "Forbidden"}, 403
        relay.submit(request.get_json(force=True))
        return {"status": "accepted"}, 200

    @app.get("/healthz")
    def healthz() -> ResponseReturnValue:
        return {"status": "ok"}, 200

    return app
