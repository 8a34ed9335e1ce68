"""/progress charts as stored: the PNG and its summary, found again by id and nonce (the two a
signed link names), pruned once their links have expired; and the key those links (a chart's,
a spoken reply's) are signed with when the operator sets none, made once and shared by every
process."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from memory.database.db import Tables
from memory.database.models import Chart, ServiceKey, VoiceClip
from memory.database.records import LearnerGone

LINK_KEY = "chart-links"  # the ServiceKey row of the links' signing key
# The PNG of a chart saved by its turn and not drawn yet: /progress leaves the drawing to its
# delivery (bot/review/progress.py, drawn), so the learner's next message never waits for it.
NOT_DRAWN = b""


@dataclass(frozen=True)
class StoredChart:
    """A chart as delivery needs it: whose it is, the PNG (NOT_DRAWN until it is drawn), the
    nonce its link names, and when it was asked for (the moment it shows)."""

    id: int
    learner_id: int
    nonce: str
    png: bytes
    created_at: datetime

    @property
    def drawn(self) -> bool:
        """Whether the PNG is there (drawn), or still to be drawn from the learner's data."""
        return self.png != NOT_DRAWN


class Linked(Tables):
    """What Pam keeps for delivery under a signed link — a chart, a spoken reply: rows of
    `model` with an id, a learner, a random nonce the link names, and when they were made,
    saved and pruned alike."""

    model: type[Chart] | type[VoiceClip]

    def _save(self, learner_id: int, values: dict[str, object]) -> tuple[int, str]:
        """Store a row of `values` for the learner; its id and nonce. Raises LearnerGone when
        the learner was forgotten meanwhile."""
        nonce = secrets.token_urlsafe(16)
        row = values | {"learner_id": learner_id, "nonce": nonce, "created_at": self.clock()}
        try:
            with self.engine.begin() as connection:
                saved = connection.execute(
                    insert(self.model).values(row).returning(self.model.id)
                ).scalar_one()
        except IntegrityError as exc:  # the learner's row is gone
            raise LearnerGone(learner_id) from exc
        return int(saved), nonce

    def prune(self, before: datetime) -> int:
        """Delete the rows made before `before` (their links have expired); how many."""
        model = self.model
        with self.single.begin() as connection:
            return int(connection.execute(delete(model).where(model.created_at < before)).rowcount)


class Charts(Linked):
    """Charts, saved, found and pruned, and the links' signing key."""

    model = Chart

    def save(self, learner_id: int, png: bytes, summary: str) -> tuple[int, str]:
        """Store a rendered chart; its id and nonce. Raises LearnerGone when the learner was
        forgotten meanwhile."""
        return self._save(learner_id, {"png": png, "summary": summary})

    def get(self, chart_id: int, nonce: str) -> tuple[bytes, int] | None:
        """The PNG and learner of the chart a link names; None when it is gone (pruned, or its
        learner forgotten) or the nonce is not its own."""
        chart = self.find(chart_id)
        if chart is None or not secrets.compare_digest(chart.nonce.encode(), nonce.encode()):
            return None
        if not chart.drawn:  # no link names it before its delivery drew it; kept safe anyway
            return None
        return chart.png, chart.learner_id

    def draw(self, chart_id: int, png: bytes) -> None:
        """Store the PNG drawn for a chart saved NOT_DRAWN (a chart gone meanwhile stays gone;
        one drawn twice, by a retried delivery, keeps the first)."""
        with self.single.begin() as connection:
            connection.execute(
                update(Chart).where(Chart.id == chart_id, Chart.png == NOT_DRAWN).values(png=png)
            )

    def find(self, chart_id: int) -> StoredChart | None:
        """The chart with `chart_id`, for delivering it; None when it is gone."""
        with self.single.connect() as connection:
            row = connection.execute(
                select(Chart.id, Chart.learner_id, Chart.nonce, Chart.png, Chart.created_at).where(
                    Chart.id == chart_id
                )
            ).first()
        if row is None:
            return None
        return StoredChart(
            int(row.id), int(row.learner_id), row.nonce, bytes(row.png), row.created_at
        )

    def signing_key(self, configured: str | None) -> str:
        """The key chart links are signed with: `configured` (PAM_LINK_SECRET) when set, else
        one made at random by the first process that asks and kept in the database, so that
        the web process verifies what the workers signed."""
        if configured:
            return configured
        lookup = select(ServiceKey.value).where(ServiceKey.name == LINK_KEY)
        with self.single.connect() as connection:
            found = connection.execute(lookup).scalar()
        if found is not None:
            return str(found)
        made = {"name": LINK_KEY, "value": secrets.token_urlsafe(48), "created_at": self.clock()}
        try:
            with self.engine.begin() as connection:
                connection.execute(insert(ServiceKey).values(made))
        except IntegrityError:  # another process made it first: theirs is the key
            pass
        with self.single.connect() as connection:
            return str(connection.execute(lookup).scalar_one())
