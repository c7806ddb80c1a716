"""/metrics, /healthz and /readyz over a real PostgreSQL with real rows: the exposition parsed with
prometheus-client's own parser, each figure the one the rows make."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.httpclient import http
from tests.tasks.conftest import add_store
from tests.web.conftest import TOKEN, Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

GRAFANA = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "cannaspider.json"
FLEET_TABLES = "alert_deliveries, alert_subscriptions, analytics_refreshes, crawl_health_reports"


@pytest.fixture
def fleet_sql(sql):
    sql(f"TRUNCATE {FLEET_TABLES} RESTART IDENTITY CASCADE")
    return sql


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def run(sql, store, role, status, *, suspect=False, reason=None, error=None, seen=0, hours_ago=1):
    sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at, finished_at, suspect, suspect_reason,"
        " error, products_seen) VALUES (%s, %s, %s, now() - %s * interval '1 hour', now(), %s, %s, %s, %s)",
        (store, role, status, hours_ago, suspect, reason, error, seen),
    )


def test_metrics_show_the_fleet_from_the_database(api, fleet_sql):
    sql = fleet_sql
    dutchie = add_store(sql, "d")
    jane = add_store(sql, "j")
    sql("UPDATE dispensaries SET platform = 'jane' WHERE id = %s", (jane,))
    run(sql, dutchie, "product_resync", "complete", seen=300)
    run(sql, dutchie, "product_resync", "complete", seen=100)
    run(sql, dutchie, "product_resync", "complete", suspect=True, seen=5, reason="saw 5 of the 100 products in stock")
    run(sql, jane, "product_resync", "incomplete", seen=40, error="only 40 of 50 products were written")
    run(sql, jane, "product_resync", "complete", seen=999, hours_ago=30)  # out of the window
    sql(
        "INSERT INTO proxies (host, port, pool, is_active) VALUES ('a', 1, 'crawl', true), ('b', 1, 'crawl', false),"
        " ('c', 1, 'images', true)"
    )
    sql(
        "INSERT INTO worker_tasks (role, platform, status, run_after, payload) VALUES"
        " ('product_resync', 'dutchie', 'pending', now() - interval '600 seconds', '{\"n\": 1}'),"
        " ('product_resync', 'dutchie', 'pending', now() - interval '60 seconds', '{\"n\": 2}'),"
        " ('product_resync', 'dutchie', 'pending', now() + interval '1 hour', '{\"n\": 3}'),"
        " ('product_resync', 'dutchie', 'completed', now(), '{\"n\": 4}')"
    )
    sub = sql("INSERT INTO alert_subscriptions (webhook_url, types) VALUES ('http://x', '{listed}') RETURNING id")
    sql(
        "INSERT INTO alert_deliveries (subscription_id, key, payload, attempts, delivered_at) VALUES"
        " (%(s)s, 'e:1', '{}', 0, NULL), (%(s)s, 'e:2', '{}', 3, NULL), (%(s)s, 'e:3', '{}', 20, NULL),"
        " (%(s)s, 'e:4', '{}', 1, now())",
        {"s": sub[0][0]},
    )
    sql(
        "INSERT INTO analytics_refreshes (view_name, started_at, duration_ms, method) VALUES"
        " ('roll', now() - interval '2 days', 9000, 'plain'), ('roll', now(), 1500, 'plain')"
    )
    sql(
        "INSERT INTO crawl_health_reports (spider, host, pid, ok, finished_at, blocks, report) VALUES"
        " ('products', 'node-a', 1, true, now(), 3, '{}'), ('products', 'node-b', 2, false, now(), 4, '{}'),"
        " ('products', 'node-b', 3, false, now() - interval '2 days', 50, '{}')"
    )

    reply = http("GET", api.base + "/metrics")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain")
    got = samples(reply.text)

    def value(name, **labels):
        return got[(name, tuple(sorted(labels.items())))]

    crawls = "cannaspider_store_crawls"
    common = {"role": "product_resync"}
    assert value(crawls, **common, platform="dutchie", outcome="complete", reason="") == 2
    assert value(crawls, **common, platform="dutchie", outcome="suspect", reason="oos_guard") == 1
    assert value(crawls, **common, platform="jane", outcome="incomplete", reason="unwritten_products") == 1
    assert not any(k[0] == crawls and ("outcome", "complete") in k[1] and ("platform", "jane") in k[1] for k in got)
    assert value("cannaspider_items", **common, platform="dutchie") == 405
    assert value("cannaspider_items", **common, platform="jane") == 40
    assert value("cannaspider_blocks", spider="products") == 7
    assert value("cannaspider_proxies", pool="crawl", state="active") == 1
    assert value("cannaspider_proxies", pool="crawl", state="inactive") == 1
    assert value("cannaspider_proxies", pool="images", state="active") == 1
    queue = {"role": "product_resync", "platform": "dutchie"}
    assert value("cannaspider_queue_tasks", **queue, status="pending") == 3
    assert ("cannaspider_queue_tasks", tuple(sorted({**queue, "status": "completed"}.items()))) not in got
    assert value("cannaspider_queue_due_tasks", **queue) == 2
    assert 600 <= value("cannaspider_queue_oldest_due_age_seconds", **queue) < 3600
    assert value("cannaspider_alert_backlog") == 3
    assert value("cannaspider_alert_delivery_failures") == 2
    assert value("cannaspider_alert_deliveries_given_up") == 1
    assert value("cannaspider_refresh_duration_seconds", view="roll") == 1.5

    # the Grafana dashboard shipped in docs/ plots these very names
    exprs = [t["expr"] for p in json.loads(GRAFANA.read_text())["panels"] for t in p["targets"]]
    plotted = set(re.findall(r"\bcannaspider_[a-z_]+", " ".join(exprs)))
    assert plotted and plotted <= {name for name, _ in got}, plotted - {name for name, _ in got}


def test_probes_say_alive_and_ready(api):
    assert http("GET", api.base + "/healthz").json() == {"status": "ok", "detail": None}
    reply = http("GET", api.base + "/readyz")
    assert reply.status == 200 and reply.json()["status"] == "ok"


def test_readyz_is_a_503_with_the_reason_when_a_migration_is_missing(db, sql):
    (row,) = sql("DELETE FROM schema_migrations WHERE version = '033' RETURNING version, name, checksum")
    try:
        with Service(db, TOKEN) as service:
            reply = http("GET", service.base + "/readyz")
            assert reply.status == 503
            assert "033_crawl_health_reports.sql" in reply.json()["detail"]
            assert http("GET", service.base + "/healthz").status == 200
    finally:
        sql("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)", row)


def test_readyz_is_a_503_when_the_database_is_unreachable():
    # (a readiness answer waits for a connection up to 5 s, or the pool's shorter timeout: 1 s here)
    url = "postgresql://nobody:pw@127.0.0.1:1/none?connect_timeout=1"
    with Service(url, TOKEN, pool_timeout_s=1.0) as service:
        reply = http("GET", service.base + "/readyz", timeout=30)
        assert reply.status == 503 and reply.json()["detail"] == "the database is unreachable"
        assert "pw" not in reply.text
        assert http("GET", service.base + "/healthz").status == 200
