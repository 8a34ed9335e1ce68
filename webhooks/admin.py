"""Operator endpoints: find a learner by channel address or list them a page at a time;
inspect a learner's memory, their next check-in and why (or why none), search it as recall
would, or erase it (and follow the scrub that
clears it from SQLite's files, /admin/scrubs). A learner is named in a path by id or by
address (`/admin/learners/telegram:777001/memory`). Bearer PAM_ADMIN_TOKEN, compared in
constant time; while the token is unset the endpoints do not exist (404)."""

from __future__ import annotations

import hmac
import logging
from datetime import datetime
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from bot.checkins.rounds import outlook
from memory.clock import utcnow
from memory.database.records import LearnerGone
from memory.jobs.profile import document
from memory.store.inspection import MAX_ID, LearnerEntry
from memory.store.message_store import Store
from webhooks.addresses import BadAddress, stored_address
from webhooks.checkin_routes import configured_routes
from webhooks.web import web

log = logging.getLogger(__name__)

# The longest `q` the recall search takes, in characters: a learner's question is a line; a
# longer one is a mistake (or an attempt to make the search do a lot of work).
MAX_QUERY_CHARS = 500
# A page of the learners' list: this many unless `limit` says otherwise, and never more than
# the maximum (each row reads the learner's newest message).
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

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


def _bad(detail: str) -> ResponseReturnValue:
    return jsonify(error="Bad Request", detail=detail), 400


def _no_learner() -> ResponseReturnValue:
    return jsonify(error="Not Found", detail="no such learner"), 404


def _entry(entry: LearnerEntry) -> dict[str, Any]:
    """One learner as the directory shows them: no words of theirs, only who and when."""
    return {
        "id": entry.id,
        "address": entry.address,
        "display_name": entry.display_name,
        "created_at": _iso(entry.created_at),
        "last_message_at": _iso(entry.last_message_at),
        "settings": {
            "target_language": entry.target_language,
            "native_language": entry.native_language,
            "level": entry.level,
            "voice_replies": entry.voice_replies,
        },
    }


def _id(text: str) -> int | None:
    """`text` as a learner id (plain decimal digits, at most MAX_ID), else None."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_ID)):
        return None
    number = int(text)
    return number if number <= MAX_ID else None


def _find(ref: str) -> LearnerEntry | None:
    """The learner `ref` names in a path: an id, or a channel address. Raises BadAddress."""
    store = Store(web().engine)
    if ref.isascii() and ref.isdigit():  # an id; never a bare phone number in a path
        learner_id = _id(ref)
        return store.inspection.learner_by_id(learner_id) if learner_id is not None else None
    return store.inspection.learner_at(stored_address(ref))


def _learner_or_refusal(ref: str) -> LearnerEntry | ResponseReturnValue:
    """The learner `ref` names, or the answer when it names none: 400 for an address that
    is none, 404 for nobody."""
    try:
        found = _find(ref)
    except BadAddress as exc:
        return _bad(str(exc))
    return found if found is not None else _no_learner()


@blueprint.get("/learners")
def learners() -> ResponseReturnValue:
    """`?address=`: the learner at that channel address (404 if none). Otherwise a page of
    learners by id: `?limit=` (1–500, default 50) after the cursor `?after=` (the `next` of
    the page before); `next` is null on the last page."""
    store = Store(web().engine)
    if "address" in request.args:
        try:
            address = stored_address(request.args["address"])
        except BadAddress as exc:
            return _bad(str(exc))
        found = store.inspection.learner_at(address)
        if found is None:
            return _no_learner()
        # The address is the learner's own identifier, not their words: logged as an id is.
        log.info("learner looked up by an operator learner=%s", found.id)
        return jsonify(learner=_entry(found))
    limit_text = request.args.get("limit", str(PAGE_SIZE))
    limit = _id(limit_text.strip())
    if limit is None or not 1 <= limit <= MAX_PAGE_SIZE:
        return _bad(f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}")
    after_text = request.args.get("after", "0")
    after = _id(after_text.strip())
    if after is None:
        return _bad("after must be the `next` cursor of an earlier page")
    page = store.inspection.learners_after(after, limit + 1)  # one more: is there a next?
    more = len(page) > limit
    page = page[:limit]
    return jsonify(
        learners=[_entry(entry) for entry in page],
        next=str(page[-1].id) if more else None,
    )


@blueprint.get("/learners/<ref>")
def learner(ref: str) -> ResponseReturnValue:
    """One learner, by id or channel address, as the list shows them."""
    found = _learner_or_refusal(ref)
    if not isinstance(found, LearnerEntry):
        return found
    return jsonify(learner=_entry(found))


@blueprint.get("/learners/<ref>/memory")
def memory(ref: str) -> ResponseReturnValue:
    """Everything Pam keeps about one learner: window (a voice note's with its length),
    summary, profile, corrections, usage (audio's seconds and characters too), and the state
    of their memory jobs."""
    found = _learner_or_refusal(ref)
    if not isinstance(found, LearnerEntry):
        return found
    learner_id = found.id
    store = Store(web().engine)
    try:
        learner = store.learners.get_learner(learner_id)
        context = store.conversation.context(learner_id)
    except LearnerGone:  # forgotten since it was found
        return _no_learner()
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
            "corrections": learner.corrections,  # /corrections: few, normal or all
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


@blueprint.get("/learners/<ref>/checkins")
def checkins(ref: str) -> ResponseReturnValue:
    """The learner's next check-in (when, on which local day) and why — or why none: check-ins
    off for everyone (PAM_CHECKINS) or for them, stopped by Pam (blocked, unanswered), no
    channel that takes one; with their preference, timezone, learned hour and latest
    check-ins (states and skip reasons, never the texts: those are in their memory)."""
    found = _learner_or_refusal(ref)
    if not isinstance(found, LearnerEntry):
        return found
    settings = web().settings
    ahead = outlook(
        Store(web().engine),
        configured_routes(settings),
        settings.checkin,
        utcnow(),
        found.id,
        found.address,
        settings.checkin.enabled,
    )
    details = {
        key: [{k: _iso(v) for k, v in row.items()} for row in value]
        if key == "recent"
        else _iso(value)
        for key, value in ahead.details.items()
    }
    return jsonify(
        learner=found.id,
        enabled=settings.checkin.enabled,
        next={"due_at": _iso(ahead.due_at), "local_day": ahead.local_day}
        if ahead.due_at is not None
        else None,
        why=ahead.why,
        **details,
    )


@blueprint.get("/learners/<ref>/recall")
def recall(ref: str) -> ResponseReturnValue:
    """What a recall for this learner would return for `?q=`: their snippets (kind, role,
    text, when said, score), best first; only their own rows are ever searched."""
    query = request.args.get("q", "")
    if not query.strip():
        return jsonify(error="Bad Request", detail="q is required: the words to search for"), 400
    if len(query) > MAX_QUERY_CHARS:
        detail = f"q is too long: at most {MAX_QUERY_CHARS} characters"
        return jsonify(error="Bad Request", detail=detail), 400
    found = _learner_or_refusal(ref)
    if not isinstance(found, LearnerEntry):
        return found
    learner_id = found.id
    snippets = Store(web().engine).recall.search(learner_id, query)
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


@blueprint.post("/learners/<ref>/forget")
def forget(ref: str) -> ResponseReturnValue:
    """Erase every row about the learner, as /forget does."""
    found = _learner_or_refusal(ref)
    if not isinstance(found, LearnerEntry):
        return found
    learner_id = found.id
    if Store(web().engine).learners.forget(learner_id):
        log.info("learner forgotten by an operator learner=%s", learner_id)
        return jsonify(status="forgotten", learner=learner_id), 200
    # The rows are gone, but not yet their bytes: not 200 until they are.
    log.warning("learner forgotten by an operator learner=%s; scrub pending", learner_id)
    detail = (
        "The learner's rows are erased, but their bytes are still in the database's files: "
        "another connection holds an older snapshot, so the checkpoint that clears them "
        "could not complete. The worker retries it until it does; GET /admin/scrubs shows "
        "what is still pending."
    )
    return jsonify(status="pending", learner=learner_id, detail=detail), 202


@blueprint.get("/scrubs")
def scrubs() -> ResponseReturnValue:
    """The /forget scrubs not done yet (SQLite: erased rows still in the files), oldest
    first; an empty list when nothing erased is left anywhere."""
    pending = Store(web().engine).scrubs.pending()
    return jsonify(
        pending=[
            {
                "id": p.id,
                "inbox_id": p.inbox_id,
                "requested_at": _iso(p.requested_at),
                "attempts": p.attempts,
                "tried_at": _iso(p.tried_at),
                "last_error": p.last_error,
            }
            for p in pending
        ]
    )
