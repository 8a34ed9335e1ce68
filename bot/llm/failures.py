"""What a failed call to an OpenAI-compatible server becomes for Pam: one of memory.llm's
LLMError kinds, with advice an operator can act on. The chat (bot.llm.openai_chat) and the audio
API (bot.llm.openai_audio) read a server's error with bot.llm.errors and turn it into a kind here,
alike: a prompt the provider's safety check stopped is Refused, an outage is an Outage (or
Unusable after unusable answers in the same call, so that trying again cannot spend their
budget twice), a setting to fix is Misconfigured and told once per cause, and a request whose
content the server refused (a voice note's file, the words to speak) is Unusable."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import openai

from bot.llm.answers import filtered_categories
from bot.llm.errors import Edge, ServerError, advice, classify, flagged_reasons
from bot.llm.retries import still_working
from bot.logs import OnceLog
from memory.llm import LLMError, Misconfigured, Outage, Refused, Unusable, Usage


@dataclass(frozen=True)
class Call:
    """The call that failed, as its failure names it. `what`: the call in the log lines
    ("LLM reply", "Audio speech"); `billed`: the unusable answers paid for earlier in the same
    call; `content_statuses`: the statuses at which a request the server would refuse again
    was refused for its content (the learner's file, the words to speak), which is no setting
    an operator can fix."""

    what: str
    billed: tuple[Usage, ...] = ()
    content_statuses: frozenset[int] = frozenset()


def unreachable(exc: openai.APIError) -> bool:
    """Whether a request found no server at all (a connection that failed, not one that timed
    out): the base URL is likely wrong, or the server down, and an operator should look."""
    return isinstance(exc, openai.APIConnectionError) and not isinstance(
        exc, openai.APITimeoutError
    )


class Failures:
    """One adapter's failed calls as LLMError kinds, logged on `logger`, each setting to fix
    told once per process."""

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.once = OnceLog(logger)

    def rejected(
        self,
        error: ServerError,
        name: str,
        call: Call,
        edge: Edge,
        *,
        refused: bool = False,
        refusal: str | None = None,
    ) -> LLMError:
        """The LLMError for an HTTP error the SDK gave up on or never retries. `name`: the
        SDK's for the error; `edge`: what advice names; `refused`: the caller found that the
        server refuses a part of the request it sent, and `refusal` says what to do about it
        (else the general advice does)."""
        status, words = error.status, error.words
        verdict = classify(error, refused=refused)
        if verdict.kind == "flagged":
            return self._flagged(error, call)
        if verdict.kind == "outage":
            # Not the server's words: a 5xx may echo the request, and so the learner's.
            self.log.warning("%s call failed: %s %s", call.what, status, name)
            return _outage(f"{name} ({status})", call.billed)
        if verdict.kind == "rejected" and status in call.content_statuses:
            # The server read the request and refused its content (a file unsupported,
            # corrupt or too short; the text): asking again would get the same answer.
            self.log.warning("%s call rejected (%s): %s", call.what, status, words)
            return Unusable(f"{name} ({status}): {words}", call.billed)
        said = advice(verdict, error, edge)
        if verdict.kind == "refused" and refusal is not None:
            said = refusal
        self.once.error(
            f"{status} {edge.model} {verdict.cause}",
            "%s call rejected (%s): %s",
            call.what,
            status,
            said,
        )
        # OpenAI's 401 message quotes part of the key: it stays out of messages and logs.
        quoted = "" if status == 401 else f": {words}"
        return Misconfigured(f"{name} ({status}){quoted}", said, call.billed)

    def no_answer(
        self,
        exc: openai.APIError,
        call: Call,
        *,
        unreachable_advice: str,
        timed_out_advice: str | None = None,
        retry_after: float | None = None,
    ) -> LLMError:
        """The LLMError for a request that got no answer at all: `unreachable_advice` when no
        server was found. A request the server may still be working on (it timed out) is an
        Outage whatever came before it, not to be tried again before `retry_after` (None: the
        usual backoff), with `timed_out_advice`."""
        self.log.warning("%s call failed: %s", call.what, type(exc).__name__)
        message = f"{type(exc).__name__}: {exc}"
        if still_working(exc):
            # No sign of a model that cannot answer: the turn is tried again later, even after
            # unusable answers, rather than apologising for a slow server.
            return Outage(message, call.billed, advice=timed_out_advice, retry_after=retry_after)
        return _outage(message, call.billed, unreachable_advice if unreachable(exc) else None)

    def _flagged(self, error: ServerError, call: Call) -> LLMError:
        """A prompt the provider's safety check stopped: a refusal, to be answered as one, not
        a setting to fix or a call to try again. OpenAI's reasoning models answer one with a
        400 invalid_prompt, Azure's content filter with content_filter and its categories,
        OpenRouter's moderation with a 403 and its reasons."""
        if error.code == "invalid_prompt":
            self.log.warning("%s call refused (%s): invalid_prompt", call.what, error.status)
            return Refused("the provider flagged the prompt", "invalid_prompt", call.billed)
        categories = filtered_categories(error.body) or flagged_reasons(error) or []
        reason = "content_filter" + (f" ({', '.join(categories)})" if categories else "")
        self.log.warning("%s call refused (%s): %s", call.what, error.status, reason)
        return Refused(f"the provider filtered the prompt ({reason})", reason, call.billed)


def _outage(message: str, billed: tuple[Usage, ...], advice: str | None = None) -> LLMError:
    """An Outage, worth trying the turn again later; but Unusable when unusable answers came
    first in this call, so that trying again cannot spend the unusable budget twice."""
    if billed:
        return Unusable(message, billed)
    return Outage(message, billed, advice=advice)
