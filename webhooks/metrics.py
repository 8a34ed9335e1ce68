"""GET /metrics: what an operator graphs, in Prometheus' text format, behind the admin token.
One scrape of the web app reports the whole service, from three sources:

- the web processes' own counters (messages received by channel), added up across gunicorn's
  workers by prometheus_client's multiprocess mode (webhooks/multiprocess.py);
- the worker processes' counters and histograms, wherever they run, added up from the copies
  they keep in the database (memory/metric_snapshots.py);
- gauges read from the database at scrape time: the inbox's and outbox's waiting items and
  the age of the oldest, and how many worker processes reported lately.

No label names a learner: /forget has nothing to erase here."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Blueprint, Response
from flask.typing import ResponseReturnValue
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Metric,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from memory.clock import Clock, utcnow
from memory.database.models_queue import InboxItem, OutboxItem
from memory.metric_snapshots import Families, Snapshots, added, read_registry
from memory.store.inspection import Inspection
from webhooks import admin
from webhooks.multiprocess import VARIABLE
from webhooks.web import WEB_METRICS, web

log = logging.getLogger(__name__)

blueprint = Blueprint("metrics", __name__)


@blueprint.before_request
def authenticate() -> ResponseReturnValue | None:
    """As the admin endpoints: 404 while PAM_ADMIN_TOKEN is unset, 401 without it."""
    return admin.authenticate()


@blueprint.get("/metrics")
def scrape() -> ResponseReturnValue:
    """Every metric of the service, in Prometheus' text format."""
    registry = CollectorRegistry()
    registry.register(ServiceCollector(web().engine, web_families()))
    return Response(generate_latest(registry), mimetype=None, content_type=CONTENT_TYPE_LATEST)


def web_families() -> Families:
    """The web processes' counters: every gunicorn worker's, in multiprocess mode."""
    if os.environ.get(VARIABLE):
        shared = CollectorRegistry()
        multiprocess.MultiProcessCollector(shared)
        return read_registry(shared)
    return read_registry(WEB_METRICS)


class ServiceCollector(Collector):
    """The web's counters, the workers' copied ones and the database's gauges, as one
    collection (a family reported by two sources is added up, never listed twice)."""

    def __init__(self, engine: Engine, web: Families, clock: Clock = utcnow) -> None:
        self.engine = engine
        self.web = web
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        """The metric families, read now."""
        up = GaugeMetricFamily(
            "pam_database_up", "Whether the database answered this scrape (1) or not (0)."
        )
        try:
            workers = Snapshots(self.engine, self.clock)
            families, reporting = workers.total(), workers.reporting()
            gauges = list(self._queues())
        except SQLAlchemyError as exc:  # the web's own counts are still worth a scrape
            log.warning("metrics scraped without the database: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            yield from exported(self.web)
            return
        up.add_metric([], 1)
        yield up
        yield from gauges
        processes = GaugeMetricFamily(
            "pam_reporting_processes",
            "Worker-side processes whose metrics were copied to the database lately, by role.",
            labels=["role"],
        )
        for role, count in sorted(reporting.items()):
            processes.add_metric([role], count)
        yield processes
        yield from exported(added(self.web, families))

    def _queues(self) -> Iterable[Metric]:
        inspection = Inspection(self.engine, self.clock)
        items = GaugeMetricFamily(
            "pam_queue_items",
            "Items waiting in a queue: pending, or claimed by a worker and not finished yet.",
            labels=["queue", "status"],
        )
        oldest = GaugeMetricFamily(
            "pam_queue_oldest_item_seconds",
            "Age of the oldest waiting item (pending or claimed); 0 when none waits.",
            labels=["queue"],
        )
        now = self.clock()
        for name, model in (("inbox", InboxItem), ("outbox", OutboxItem)):
            state = inspection.queue_state(model)
            items.add_metric([name, "pending"], state.pending)
            items.add_metric([name, "claimed"], state.claimed)
            age = (now - state.oldest_at).total_seconds() if state.oldest_at else 0.0
            oldest.add_metric([name], max(0.0, age))
        return items, oldest


def exported(families: Families) -> Iterator[Metric]:
    """Added-up families as prometheus_client metrics, ready for the text format."""
    for name, family in sorted(families.items()):
        metric = Metric(name, family.help, family.kind)
        for (sample, labels), value in sorted(family.values.items(), key=_order):
            metric.add_sample(sample, dict(labels), value)
        yield metric


def _order(item: tuple[tuple[str, tuple[tuple[str, str], ...]], float]) -> Any:
    """Samples grouped by labels, a histogram's buckets first and by their bound (as the text
    format wants them: `le` increasing, +Inf last), then its _count and _sum."""
    (sample, labels), _ = item
    rest = tuple(pair for pair in labels if pair[0] != "le")
    bound = next((float(value) for key, value in labels if key == "le"), 0.0)
    return rest, not sample.endswith("_bucket"), bound, sample
