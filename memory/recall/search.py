"""Recall: full-text search over what a learner said, and was told, before the unfolded
conversation began (their folded-out messages and Pam's, and their stored corrections). The
prompt already carries everything unfolded, so the index holds only what a fold has taken.

This module holds the shapes every caller shares; the index itself lives behind the
backends (SQLite FTS5, Postgres tsvector)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from sqlalchemy import Connection, Engine, Row, bindparam, delete, select

from memory.clock import Clock, utcnow
from memory.database.backends import backend_for
from memory.database.backends.base import Backend
from memory.database.db import Tables
from memory.database.models import Correction, Learner, Message
from memory.database.models_recall import RecallEntry
from memory.database.records import LEARNER, PAM
from memory.recall_terms import plain, query_words, snowball_language, stems, words

MESSAGE = "message"
CORRECTION = "correction"

SnippetKind = Literal["message", "correction"]


@dataclass(frozen=True)
class Snippet:
    """One search result. `text` is the message as said (`role` "learner" or "pam"), or for a
    correction "original → corrected (explanation)" (role "learner"). `score`: higher is
    better, comparable within one search only."""

    kind: SnippetKind
    role: str
    text: str
    said_at: datetime
    score: float


class Searcher(Protocol):
    """What the tutor needs of recall: the learner's best matches for `query`, best first.
    Only `learner_id`'s rows are ever searched; a query with no searchable words finds
    nothing."""

    def search(self, learner_id: int, query: str, *, limit: int = 3) -> list[Snippet]: ...


# How many of the most relevant entries the ranking looks at, to weigh their recency.
CANDIDATES = 30
# The recency blend: an entry's score is its relevance as a share of the best one's (0..1)
# plus RECENCY_WEIGHT times its place in time among the candidates (0 the oldest, 1 the
# newest). So a newer statement wins over an older one as relevant, or nearly (within
# RECENCY_WEIGHT of the best): "Ahora vivo en Sevilla" over "Vivo en Madrid" for "¿dónde
# vives?", while an old exact match still beats a recent passing mention.
RECENCY_WEIGHT = 0.3
# What the learner said is what they ask about ("what's my dog called?"); Pam's replies echo
# it with more words around. Pam's entries count at this share of their relevance.
PAM_WEIGHT = 0.6
# A later statement of the learner's that matches the query too and is at least this like
# their best match (as a share of how like itself the match is: every word of it) is taken to
# update it, and goes first (see `superseding`).
SUPERSEDES = 0.2
SHARED_WORDS = 2

_LANGUAGE = select(Learner.target_language).where(Learner.id == bindparam("learner_id"))


Scored = tuple[float, Row[Any]]


def rank(rows: Sequence[Row[Any]]) -> list[Scored]:
    """`rows` (Backend.recall_candidates') scored, relevance blended with recency and role,
    best first."""
    if not rows:
        return []
    relevance = {row.id: row.relevance * (PAM_WEIGHT if row.role == PAM else 1.0) for row in rows}
    best = max(relevance.values()) or 1.0
    by_time = sorted(rows, key=lambda row: (row.said_at, row.id))
    place = {
        row.id: (n / (len(rows) - 1) if len(rows) > 1 else 1.0) for n, row in enumerate(by_time)
    }
    scored = [(relevance[row.id] / best + RECENCY_WEIGHT * place[row.id], row) for row in rows]
    scored.sort(key=lambda pair: (pair[0], pair[1].said_at, pair[1].id), reverse=True)
    return scored


def _said(text: str, language: str | None) -> set[str]:
    """The stems (or without a stemmer, the words) of `text`, accent-free."""
    found = words(text)
    return {plain(term) for term in stems(found, snowball_language(language)) or found}


def superseding(
    top: Row[Any], similar: Sequence[Row[Any]], matching: set[int], language: str | None
) -> Row[Any] | None:
    """Of `similar` (the learner's entries most like `top`, a statement of theirs, `top`
    itself among them), the one that most likely supersedes it: a later statement of the
    learner's, among the entries that match the query (ids `matching`), as like `top` as
    SUPERSEDES of how like itself it is and sharing at least SHARED_WORDS words (or their
    stems) with it ("al final no voy a Japón, voy a Corea con Clara" after "en abril voy a
    viajar a Japón con Clara", for "¿a qué país me voy de viaje?"), or None."""
    itself = next((row.relevance for row in similar if row.id == top.id), None)
    if not itself:
        return None
    said = _said(top.text, language)
    later = [
        row
        for row in similar
        if row.said_at > top.said_at
        and row.id in matching
        and row.role == LEARNER
        and row.kind == MESSAGE
        and row.relevance >= SUPERSEDES * itself
        and len(_said(row.text, language) & said) >= SHARED_WORDS
    ]
    return max(later, key=lambda row: row.relevance, default=None)


def snippets(scored: Sequence[Scored], limit: int) -> list[Snippet]:
    return [
        Snippet(row.kind, row.role, row.text, row.said_at, round(score, 6))
        for score, row in scored[:limit]
    ]


def correction_text(original: str, corrected: str, explanation: str) -> str:
    """A correction as recall shows it: "original → corrected (explanation)"."""
    shown = f"{original} → {corrected}"
    return f"{shown} ({explanation})" if explanation.strip() else shown


def folded_entries(
    connection: Connection, learner_id: int, after: int, upto: int
) -> list[dict[str, Any]]:
    """The recall entries of what a fold from watermark `after` to `upto` takes: the
    messages with ids in (after, upto] and the corrections of those among them, dated when
    the message was said."""
    messages = connection.execute(
        select(Message.id, Message.role, Message.content, Message.created_at).where(
            Message.learner_id == learner_id, Message.id > after, Message.id <= upto
        )
    ).all()
    corrections = connection.execute(
        select(
            Correction.id,
            Correction.original,
            Correction.corrected,
            Correction.explanation,
            Message.created_at,
        )
        .join(Message, Message.id == Correction.message_id)
        .where(
            Correction.learner_id == learner_id,
            Correction.message_id > after,
            Correction.message_id <= upto,
        )
    ).all()
    entries = [
        {
            "learner_id": learner_id,
            "kind": MESSAGE,
            "role": row.role,
            "text": row.content,
            "said_at": row.created_at,
            "source_id": row.id,
        }
        for row in messages
    ]
    entries += [
        {
            "learner_id": learner_id,
            "kind": CORRECTION,
            "role": LEARNER,
            "text": correction_text(row.original, row.corrected, row.explanation or ""),
            "said_at": row.created_at,
            "source_id": row.id,
        }
        for row in corrections
    ]
    return entries


def index_folded(
    connection: Connection, backend: Backend, learner_id: int, after: int, upto: int
) -> int:
    """Index what a fold from watermark `after` to `upto` takes, on `connection`, in the
    transaction that writes the summary: how many entries. A fold that loses its race
    writes no summary and so indexes nothing."""
    if upto <= after:
        return 0
    language = connection.execute(_LANGUAGE, {"learner_id": learner_id}).scalar()
    entries = folded_entries(connection, learner_id, after, upto)
    backend.index_recall(connection, entries, language)
    return len(entries)


def reindex(connection: Connection, backend: Backend, learner_id: int, language: str | None) -> int:
    """Index the learner's entries again for `language`, their new target language (its
    stems, its text search configuration), on `connection`, in the transaction that sets
    it: entries indexed for the old language would no longer match the new one's queries.
    How many entries."""
    rows = connection.execute(
        select(
            RecallEntry.learner_id,
            RecallEntry.kind,
            RecallEntry.role,
            RecallEntry.text,
            RecallEntry.said_at,
            RecallEntry.source_id,
        )
        .where(RecallEntry.learner_id == learner_id)
        .order_by(RecallEntry.id)
    ).all()
    if not rows:
        return 0
    connection.execute(delete(RecallEntry).where(RecallEntry.learner_id == learner_id))
    backend.index_recall(connection, [dict(row._mapping) for row in rows], language)
    return len(rows)


class Recall(Tables):
    """The learner's folded-out past, searched (a Searcher)."""

    def __init__(self, engine: Engine, clock: Clock = utcnow) -> None:
        super().__init__(engine, clock)
        self.backend = backend_for(engine)

    def search(self, learner_id: int, query: str, *, limit: int = 3) -> list[Snippet]:
        """The learner's best `limit` matches for `query` (any language, any text), ranked by
        relevance blended with recency, and the best statement's later update (if it has
        one) first; [] when it has no searchable words."""
        if not query_words(query) or limit <= 0:
            return []
        with self.single.connect() as connection:
            learner = connection.execute(_LANGUAGE, {"learner_id": learner_id}).first()
            if learner is None:
                return []
            language = learner.target_language
            found = query_words(query, language)
            scored = rank(
                self.backend.recall_candidates(
                    connection, learner_id, found, language, max(CANDIDATES, limit)
                )
            )
            top = next(
                (row for _, row in scored if row.role == LEARNER and row.kind == MESSAGE), None
            )
            similar = query_words(top.text, language) if top is not None else []
            if top is not None and similar:
                # A statement found is searched for once more, for what may have updated it.
                rows = self.backend.recall_candidates(
                    connection, learner_id, similar, language, CANDIDATES
                )
                newer = superseding(top, rows, {row.id for _, row in scored}, language)
                if newer is not None:
                    first = max(scored[0][0], next(s for s, row in scored if row is top))
                    scored = [(first + 1e-3, newer)] + [p for p in scored if p[1].id != newer.id]
        return snippets(scored, limit)
