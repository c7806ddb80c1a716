"""`scrapy schedule` delivering alerts as an operator runs it: its own task beside the ticks, a
webhook on 127.0.0.1 that answers 500 first (retried with backoff, delivered once), or hangs (the
ticks go on meanwhile), and the token kept out of its output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from cannaspider.webhooks import delivery, subscriptions
from tests.helpers import ROOT
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

SECRET = "s3cret-for-schedule-tests-only"


@pytest.fixture
def env(db, sql, tmp_path) -> dict[str, str]:
    """An out_of_stock event of a store in AZ, and the environment of a scheduler with the secret."""
    sql("TRUNCATE alert_deliveries, alert_subscriptions, alert_match_state")
    sql("SELECT ensure_snapshot_partitions((now() - interval '1 day')::date, 2)")
    store = sql("INSERT INTO dispensaries (name, state, city) VALUES ('Green AZ', 'AZ', 'X') RETURNING id")[0][0]
    product = sql(
        "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw) VALUES (%s, 'p1', 'Pod') "
        "RETURNING id",
        (store,),
    )[0][0]
    at = datetime.now(UTC) - timedelta(minutes=10)
    run = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, status, started_at) "
        "VALUES (%s, 'product_resync', 'complete', %s) RETURNING id",
        (store, at),
    )[0][0]
    sql(
        "INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec) "
        "VALUES (%s, %s, %s, %s, 'out_of_stock', 19)",
        (at, run, store, product),
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    return {
        **clean,
        "DATABASE_URL": db,
        "CANNASPIDER_DATA_DIR": str(tmp_path / "data"),
        "CANNASPIDER_ALERTS_SECRET": SECRET,
    }


def scheduler(env: dict[str, str], *settings: str) -> subprocess.Popen[str]:
    # the receiver is on 127.0.0.1, a private address: allowed for these tests
    args = ["-s", "SCHEDULE_TICK_S=0.5", "-s", "ALERTS_TICK_S=0.3", "-s", "ALERTS_BACKOFF_S=0.5"]
    args += ["-s", "WEBHOOK_ALLOW_PRIVATE=True"]
    for setting in settings:
        args += ["-s", setting]
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", "schedule", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until(check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError("not within the time given")


def stopped(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out, err


def test_the_schedule_delivers_alerts_and_retries_a_500_with_backoff(db, sql, env):
    with Receiver(statuses=[500]) as receiver:
        with psycopg.connect(db, autocommit=True) as conn:
            subscriptions.add(conn, receiver.url, ["out_of_stock"], state="AZ", allow_private=True)
        proc = scheduler(env)
        try:
            until(lambda: len(receiver.received) >= 2)
            until(lambda: sql("SELECT delivered_at IS NOT NULL FROM alert_deliveries")[0][0])
            time.sleep(1)  # more passes: nothing is posted twice
        finally:
            out, err = stopped(proc)
    first, second = receiver.received
    assert first["headers"][delivery.DELIVERY] == second["headers"][delivery.DELIVERY]  # the same delivery, retried
    for request in (first, second):
        headers = request["headers"]
        assert delivery.verify(SECRET, int(headers[delivery.TIMESTAMP]), request["body"], headers[delivery.SIGNATURE])
    assert sql("SELECT attempts, last_status FROM alert_deliveries") == [(2, 200)]
    assert "alerts: 1 matched, 0 delivered, 1 to retry" in out
    assert "alerts: 0 matched, 1 delivered, 0 to retry" in out
    assert "T0KEN" not in out + err and SECRET not in out + err


def test_a_hanging_webhook_delays_no_tick(db, sql, env):
    with Receiver(hang_s=15) as receiver:
        with psycopg.connect(db, autocommit=True) as conn:
            subscriptions.add(conn, receiver.url, ["out_of_stock"], allow_private=True)
        proc = scheduler(env, "ALERTS_TIMEOUT_S=30")
        try:
            until(lambda: receiver.received)  # the post hangs from here on
            store = sql(
                "INSERT INTO dispensaries (platform_dispensary_id, name, state, crawl_enabled) "
                "VALUES ('due-now', 'Due', 'AZ', true) RETURNING id"
            )[0][0]
            # the next tick (every 0.5 s) queues the store's resync while the webhook still hangs (15 s):
            # the wait gives up at 10 s, before the hang would end
            until(lambda: sql("SELECT count(*) FROM worker_tasks WHERE dispensary_id = %s", (store,))[0][0], 10)
            assert sql("SELECT delivered_at FROM alert_deliveries") == [(None,)]  # still in flight
        finally:
            # stopped while the post hangs: the scheduler waits for the pass in flight, which ends
            # when the post is answered, now rather than when the 15 s are up
            proc.send_signal(signal.SIGTERM)
            receiver.release.set()
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert sql("SELECT role FROM worker_tasks WHERE dispensary_id = %s", (store,)) == [("product_resync",)]
