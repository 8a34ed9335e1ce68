"""Operator endpoints: inspect a learner's memory, search it as recall would, or erase it.
Bearer PAM_ADMIN_TOKEN, compared in constant time; while the token is unset the endpoints do
not exist (404)."""

from __future__ import annotations

import hmac
import logging
from datetime import datetime
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from memory.profile import document
from memory.records import LearnerGone
from memory.store import Store
from webhooks.web import web

log = logging.getLogger(__name__)

# The longest `q` the recall search takes, in characters: a learner's question is a line; a
# longer one is a mistake (or an attempt to make the search do a lot of work).
MAX_QUERY_CHARS = 500

blueprint = Blueprint("admin", __name__, url_prefix="/admin")


def _iso(value: Any) -> Any:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else value


@blueprint.before_request
def authenticate() -> ResponseReturnValue | None:
    """404 while disabled, 401 without the right bearer token."""
    token = web().settings.web.admin_token
    if not token:
        return jsonify(error="Not Found", detail="no such endpoint"), 404
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        return jsonify(error="Unauthorized", detail="a valid bearer token is required"), 401
    return None


@blueprint.get("/learners/<int:learner_id>/memory")
def memory(learner_id: int) -> ResponseReturnValue:
    """Everything Pam keeps about one learner: window (a voice note's with its length),
    summary, profile, corrections, usage (audio's seconds and characters too), and the state
    of their memory jobs."""
    store = Store(web().engine)
    try:
        learner = store.learners.get_learner(learner_id)
        context = store.conversation.context(learner_id)
    except LearnerGone:
        return jsonify(error="Not Found", detail="no such learner"), 404
    summary = context.summary
    return jsonify(
        learner={
            "id": learner.id,
            "external_id": learner.external_id,
            "display_name": learner.display_name,
            "target_language": learner.target_language,
            "native_language": learner.native_language,
            "level": learner.level,
            "voice_replies": learner.voice_replies,
        },
        window=[
            {"id": m.id, "role": m.role, "content": m.content, "tokens": m.tokens}
            | ({"spoken_seconds": m.spoken_seconds} if m.spoken_seconds is not None else {})
            for m in context.messages
        ],
        summary={
            "text": summary.text,
            "tokens": summary.tokens,
            "watermark": summary.watermark,
            "folds": summary.folds,
            "version": summary.version,
            "updated_at": _iso(summary.updated_at),
        },
        profile=document(context.profile),
        profile_watermark=context.profile.watermark,
        corrections=[
            {
                "original": c.original,
                "corrected": c.corrected,
                "explanation": c.explanation,
                "category": c.category,
            }
            for c in store.ledger.corrections(learner_id, limit=20)
        ],
        usage=_usage(store, learner_id),
        jobs=[
            {k: _iso(v) for k, v in job.items()} for job in store.inspection.job_states(learner_id)
        ],
    )


def _usage(store: Store, learner_id: int) -> dict[str, dict[str, Any]]:
    """Per purpose: calls and tokens; for audio calls also the seconds heard (transcription)
    or characters spoken (speech) their tokens were converted from."""
    audio = store.ledger.audio_usage(learner_id)
    usage: dict[str, dict[str, Any]] = {}
    for purpose, (calls, tokens_in, tokens_out) in store.ledger.usage(learner_id).items():
        usage[purpose] = {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out}
        if purpose in audio:
            seconds, chars = audio[purpose]
            usage[purpose] |= {"audio_seconds": round(seconds, 1), "speech_chars": chars}
    return usage


@blueprint.get("/learners/<int:learner_id>/recall")
def recall(learner_id: int) -> ResponseReturnValue:
    """What a recall for this learner would return for `?q=`: their snippets (kind, role,
    text, when said, score), best first; only their own rows are ever searched."""
    query = request.args.get("q", "")
    if not query.strip():
        return jsonify(error="Bad Request", detail="q is required: the words to search for"), 400
    if len(query) > MAX_QUERY_CHARS:
        detail = f"q is too long: at most {MAX_QUERY_CHARS} characters"
        return jsonify(error="Bad Request", detail=detail), 400
    store = Store(web().engine)
    try:
        store.learners.get_learner(learner_id)
    except LearnerGone:
        return jsonify(error="Not Found", detail="no such learner"), 404
    snippets = store.recall.search(learner_id, query)
    # The query and the snippets are the learner's words: counted here, never logged.
    log.info("recall searched by an operator learner=%s snippets=%d", learner_id, len(snippets))
    return jsonify(
        learner=learner_id,
        query=query,
        snippets=[
            {
                "kind": s.kind,
                "role": s.role,
                "text": s.text,
                "said_at": _iso(s.said_at),
                "score": s.score,
            }
            for s in snippets
        ],
    )


@blueprint.post("/learners/<int:learner_id>/forget")
def forget(learner_id: int) -> ResponseReturnValue:
    """Erase every row about the learner, as /forget does."""
    store = Store(web().engine)
    try:
        store.learners.get_learner(learner_id)
    except LearnerGone:
        return jsonify(error="Not Found", detail="no such learner"), 404
    store.learners.forget(learner_id)
    log.info("learner forgotten by an operator learner=%s", learner_id)
    return jsonify(status="forgotten", learner=learner_id), 200
