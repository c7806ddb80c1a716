"""The fleet's metrics, read from PostgreSQL at scrape time: whatever node ran a crawl, claimed a
task or sent an alert, its rows are in the one database, so one `/metrics` of the web service shows
the whole fleet. Every query is bounded (a 24-hour window on indexed columns, the live queue only,
undelivered alerts through their partial index) and the scrape runs under a statement timeout, so a
scrape costs the database little however long the fleet has run.

Gauges only: each value is the database's current answer (a window's count, a depth, an age), not a
counter this process keeps, so any number of web services report the same figures.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from psycopg import AsyncConnection

WINDOW = "24 hours"  # the crawls, items and blocks counted: those of the last day
STATEMENT_TIMEOUT_MS = 5000  # a scrape that cannot finish in this is a 503, not a stuck database

# One row per (role, platform, outcome, reason). The reason is a class, never the free text of
# crawl_runs.error (which names stores and figures: unbounded label values).
STORE_CRAWLS = f"""
SELECT r.role, coalesce(d.platform, 'none') AS platform,
       CASE WHEN r.status = 'complete' AND r.suspect THEN 'suspect' ELSE r.status END AS outcome,
       CASE
         WHEN r.status = 'complete' AND r.suspect AND r.suspect_reason LIKE '%%confirms the collapse%%'
              THEN 'oos_guard_confirmed'
         WHEN r.status = 'complete' AND r.suspect THEN 'oos_guard'
         WHEN r.status = 'complete' AND r.empty THEN 'empty_menu'
         WHEN r.status IN ('complete', 'running') THEN ''
         WHEN r.error IS NULL THEN 'unknown'
         WHEN r.error LIKE 'only %% products were written' THEN 'unwritten_products'
         WHEN r.error LIKE '%%rows were not stored%%' THEN 'refused_rows'
         WHEN r.error LIKE 'released%%' THEN 'released'
         WHEN r.error = 'task cancelled' THEN 'cancelled'
         WHEN r.error ILIKE '%%lease%%' OR r.error ILIKE '%%heartbeat%%' OR r.error ILIKE '%%died%%'
              THEN 'worker_lost'
         WHEN r.error ILIKE '%%block%%' OR r.error ~ '\\m(403|429)\\M' THEN 'blocked'
         WHEN r.error ILIKE '%%timeout%%' OR r.error ILIKE '%%timed out%%' THEN 'timeout'
         ELSE 'other'
       END AS reason,
       count(*) AS crawls, coalesce(sum(r.products_seen), 0) AS items
  FROM crawl_runs r LEFT JOIN dispensaries d ON d.id = r.dispensary_id
 WHERE r.started_at > now() - interval '{WINDOW}'
 GROUP BY 1, 2, 3, 4
"""
PROXIES = """
SELECT pool, coalesce(is_active, false) AS active, count(*) FROM proxies GROUP BY 1, 2
"""
# the live queue only (pending and running: their partial indexes); finished tasks are history
QUEUE = """
SELECT role, platform, status, count(*),
       count(*) FILTER (WHERE status = 'pending' AND run_after <= now()) AS due,
       coalesce(extract(epoch FROM now() - min(run_after) FILTER (WHERE status = 'pending' AND run_after <= now())), 0)
  FROM worker_tasks WHERE status IN ('pending', 'running') GROUP BY 1, 2, 3
"""
ALERTS = """
SELECT count(*), count(*) FILTER (WHERE attempts > 0), count(*) FILTER (WHERE attempts >= %s),
       coalesce(extract(epoch FROM now() - min(created_at)), 0)
  FROM alert_deliveries WHERE delivered_at IS NULL
"""
# the newest refresh of each view (analytics_refreshes_view_idx)
REFRESHES = """
SELECT DISTINCT ON (view_name) view_name, duration_ms, extract(epoch FROM started_at)
  FROM analytics_refreshes ORDER BY view_name, started_at DESC
"""
# blocks the crawls of the window counted (their health reports: migrations/033)
BLOCKS = f"""
SELECT spider, coalesce(sum(blocks), 0) FROM crawl_health_reports
 WHERE finished_at > now() - interval '{WINDOW}' GROUP BY 1
"""


def _gauge(name: str, doc: str, labels: Sequence[str], rows: Iterable[tuple[Sequence[str], float]]) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in rows:
        family.add_metric([str(v) for v in values], float(value))
    return family


async def _rows(conn: AsyncConnection, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return list(await (await conn.execute(query, params)).fetchall())


async def collect(conn: AsyncConnection, *, max_attempts: int) -> list[Metric]:
    """Every metric family, read in one read-only transaction under a statement timeout."""
    started = time.perf_counter()
    async with conn.transaction():
        await conn.execute("SET TRANSACTION READ ONLY")
        await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        crawls = await _rows(conn, STORE_CRAWLS)
        proxies = await _rows(conn, PROXIES)
        queue = await _rows(conn, QUEUE)
        alerts = (await _rows(conn, ALERTS, (max_attempts,)))[0]
        refreshes = await _rows(conn, REFRESHES)
        blocks = await _rows(conn, BLOCKS)
    items: dict[tuple[str, str], float] = {}
    for role, platform, _outcome, _reason, _n, seen in crawls:
        items[(role, platform)] = items.get((role, platform), 0) + seen
    families = [
        _gauge(
            "cannaspider_store_crawls",
            f"store crawls started in the last {WINDOW}, by outcome (complete, suspect, incomplete, failed, "
            "running) and reason class",
            ("role", "platform", "outcome", "reason"),
            (((r[0], r[1], r[2], r[3]), r[4]) for r in crawls),
        ),
        _gauge(
            "cannaspider_items",
            f"products seen by the store crawls started in the last {WINDOW}",
            ("role", "platform"),
            ((k, v) for k, v in sorted(items.items())),
        ),
        _gauge(
            "cannaspider_blocks",
            f"requests refused as blocked, counted by the crawls that finished in the last {WINDOW}",
            ("spider",),
            (((r[0],), r[1]) for r in blocks),
        ),
        _gauge(
            "cannaspider_proxies",
            "proxies in the pool table, active or inactive",
            ("pool", "state"),
            (((r[0], "active" if r[1] else "inactive"), r[2]) for r in proxies),
        ),
        _gauge(
            "cannaspider_queue_tasks",
            "tasks in the queue (pending or running)",
            ("role", "platform", "status"),
            (((r[0], r[1], r[2]), r[3]) for r in queue),
        ),
        _gauge(
            "cannaspider_queue_due_tasks",
            "pending tasks whose run_after has come",
            ("role", "platform"),
            (((r[0], r[1]), r[4]) for r in queue if r[2] == "pending"),
        ),
        _gauge(
            "cannaspider_queue_oldest_due_age_seconds",
            "how long the oldest due pending task has waited since its run_after (0: none due)",
            ("role", "platform"),
            (((r[0], r[1]), r[5]) for r in queue if r[2] == "pending"),
        ),
        _gauge("cannaspider_alert_backlog", "event webhook deliveries not delivered yet", (), [((), alerts[0])]),
        _gauge(
            "cannaspider_alert_delivery_failures",
            "undelivered deliveries with at least one failed attempt",
            (),
            [((), alerts[1])],
        ),
        _gauge(
            "cannaspider_alert_deliveries_given_up",
            "undelivered deliveries out of attempts (ALERTS_MAX_ATTEMPTS): an operator's to look at",
            (),
            [((), alerts[2])],
        ),
        _gauge(
            "cannaspider_alert_oldest_undelivered_age_seconds",
            "age of the oldest undelivered delivery (0: none)",
            (),
            [((), alerts[3])],
        ),
        _gauge(
            "cannaspider_refresh_duration_seconds",
            "the last analytics refresh of each view: how long it took",
            ("view",),
            (((r[0],), r[1] / 1000) for r in refreshes),
        ),
        _gauge(
            "cannaspider_refresh_last_timestamp_seconds",
            "the last analytics refresh of each view: when it started (Unix time)",
            ("view",),
            (((r[0],), r[2]) for r in refreshes),
        ),
    ]
    families.append(
        _gauge(
            "cannaspider_metrics_scrape_seconds",
            "how long reading these metrics from the database took",
            (),
            [((), time.perf_counter() - started)],
        )
    )
    return families


class _Families:
    """A collector over families already read (the registry asks it once, at exposition)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def exposition(families: list[Metric]) -> bytes:
    """The text format of Prometheus for `families`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
