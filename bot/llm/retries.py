"""When a chat request that failed is sent again, and what an operator is told about a slow
server. Pam sends again only what the server cannot still be working on: a connection that was
never made, a 429 or 503 (the server said "later"), a 5xx that ended the request. A request
that timed out waiting for the answer (or a gateway's 504) is not sent again: the server may
still be computing it, and a local server with one slot (llama.cpp, llama-cpp-python, Ollama
on a CPU) would take the copy after it, falling further behind with each retry. The openai
SDK would retry all of these; the chat client is built without its retries and sends through
`Retrying` instead, which keeps PAM_LLM_MAX_RETRIES, Retry-After and backoff."""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import openai

log = logging.getLogger(__name__)

T = TypeVar("T")

# "Later", said by the server: a timeout or lock on its side (408, 409), a rate limit (429),
# an error that ended the request (500), a gateway that could not reach it (502), busy (503).
# Not 504: the gateway gave up waiting, the server behind it may still be working.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503})
# A Retry-After longer than this is not waited for here: the turn is tried again later.
MAX_RETRY_AFTER = 60.0
BASE_DELAY, MAX_DELAY = 0.5, 8.0
# The timeouts after which the request reached the server, which may still be working on it
# (httpx's and httpx2's names: the SDK raises APITimeoutError from them).
SENT_TIMEOUTS = frozenset({"ReadTimeout", "WriteTimeout"})
# A call that took more than this share of PAM_LLM_TIMEOUT is a sign of a slow server.
SLOW_SHARE = 0.5
# Seconds the connection may take, at most: a server that is not there is known quickly even
# with a long PAM_LLM_TIMEOUT (which is for the answer).
CONNECT_SECONDS = 10.0


def still_working(exc: openai.APIError) -> bool:
    """Whether the server may still be working on the request that failed: it timed out after
    the request was sent (waiting for the answer), or a gateway timed out waiting for it."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 504
    cause = exc.__cause__
    return isinstance(exc, openai.APITimeoutError) and (
        cause is None or type(cause).__name__ in SENT_TIMEOUTS
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The delay the server asked for (retry-after-ms, or Retry-After in seconds), if any."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, "")) / scale
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return value
    return None


def retry_delay(exc: openai.APIError, retries_taken: int) -> float | None:
    """How long to wait before sending the request that failed with `exc` again, after
    `retries_taken` retries; None: not again (it is no failure to retry, or the server may
    still be working on it)."""
    if still_working(exc):
        return None
    backoff = min(MAX_DELAY, BASE_DELAY * 2.0**retries_taken) * (1 - 0.25 * random.random())
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        if headers.get("x-should-retry") == "false":
            return None
        if exc.status_code not in RETRY_STATUSES and headers.get("x-should-retry") != "true":
            return None
        if exc.code == "insufficient_quota":  # a 429 that waiting does not cure
            return None
        asked = _retry_after(exc)
        if asked is not None:
            return asked if asked <= MAX_RETRY_AFTER else None
        return backoff
    if isinstance(exc, openai.APIConnectionError):  # no connection: the server has nothing
        return backoff
    return None


class Retrying:
    """Sends a request, and again after a failure `retry_delay` allows, at most `max_retries`
    times (PAM_LLM_MAX_RETRIES); tells the operator once when the server is slow against
    `timeout` (PAM_LLM_TIMEOUT, seconds) at `base_url`. `sleep` and `clock` are the waits and
    the time (tests pass their own)."""

    def __init__(
        self,
        max_retries: int,
        timeout: float | None,
        base_url: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_retries = max_retries
        self.timeout = timeout
        self.base_url = base_url
        self.sleep = sleep
        self.clock = clock
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def _first(self, cause: str) -> bool:
        """Whether `cause` is said for the first time in this process (the lanes share it)."""
        with self._lock:
            first = cause not in self._said
            self._said.add(cause)
        return first

    def send(self, request: Callable[[], T]) -> T:
        """`request()`, sent again while it fails in a way worth it; the last failure is
        raised (a timeout while the server may still be working: at once, told once)."""
        retries = 0
        while True:
            started = self.clock()
            try:
                result = request()
            except openai.APIError as exc:
                if still_working(exc) and self._first("timeout"):
                    log.warning("%s", self.timeout_advice())
                delay = retry_delay(exc, retries) if retries < self.max_retries else None
                if delay is None:
                    raise
                retries += 1
                log.info("LLM request failed (%s): sending it again in %.1fs", _name(exc), delay)
                self.sleep(delay)
                continue
            self._note_pace(self.clock() - started)
            return result

    def timeout_advice(self) -> str:
        """What to do about answers that take longer than the timeout."""
        return (
            f"The LLM server at {self.base_url} did not answer within {self.timeout:g} s "
            "(PAM_LLM_TIMEOUT); it may still be working, so Pam does not send the request "
            "again at once. A slow server (a local model on a CPU) needs a longer "
            "PAM_LLM_TIMEOUT, e.g. 300."
        )

    def _note_pace(self, seconds: float) -> None:
        """Tell the operator once when an answer took more than SLOW_SHARE of the timeout."""
        if self.timeout is None or seconds <= SLOW_SHARE * self.timeout or not self._first("slow"):
            return
        log.warning(
            "The LLM server at %s took %.0f s to answer, over half of PAM_LLM_TIMEOUT (%g s): "
            "if it is a slow server (a local model on a CPU), raise PAM_LLM_TIMEOUT so that "
            "slower answers are not cut off.",
            self.base_url,
            seconds,
            self.timeout,
        )


def _name(exc: openai.APIError) -> str:
    """The failure in a word or two: the status, or the kind of connection error."""
    if isinstance(exc, openai.APIStatusError):
        return str(exc.status_code)
    return type(exc.__cause__ or exc).__name__
