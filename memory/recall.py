"""Recall: full-text search over what a learner said, and was told, before the unfolded
conversation began (their folded-out messages and Pam's, and their stored corrections). The
prompt already carries everything unfolded, so the index holds only what a fold has taken.

This module holds the shapes every caller shares; the index itself lives behind the
backends (SQLite FTS5, Postgres tsvector)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

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
