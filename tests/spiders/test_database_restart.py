"""A database restart in the middle of a crawl: nothing lost, nothing marked missing by mistake.

A short outage is absorbed by the pool (a write waits for a connection, up to its timeout); a long
one makes the write fail with its rows kept for the next attempt (tests/pipelines/test_writers.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import psycopg

from cannaspider.db import embedded, migrations
from tests.conftest import ROOT, SANDBOX_PROXY_AUTH, register_proxy
from tests.spiders.helpers import add_store, products_of, runs_of


def test_crawl_survives_a_database_restart(tmp_path, sandbox, scrapy_env):
    pgdata = tmp_path / "pg"
    url = embedded.ensure_running(pgdata)
    try:
        migrations.apply(url, log=lambda _: None)
        store = max(sandbox.stores("AZ"), key=lambda s: s["product_count"])
        d = add_store(url, store)
        register_proxy(url, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
        # pages after the first arrive slowly, so the restart happens with rows still to write
        sandbox.faults({"kind": "slow", "store": store["id"], "pages": [1, 2], "delay": 2.0})
        env = {**scrapy_env, "DATABASE_URL": url, "CANNASPIDER_LOG_LEVEL": "INFO"}
        crawl = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scrapy",
                "crawl",
                "product_resync",
                "-a",
                f"dispensary_id={d}",
                "-s",
                "DB_WRITE_BATCH_SIZE=50",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not products_of(url, d):  # the crawl has started and written its first rows
            assert time.monotonic() < deadline and crawl.poll() is None, crawl.stderr.read()[-3000:]
            time.sleep(0.05)
        assert embedded.stop(pgdata)  # the server goes down mid-crawl, while page 1
        time.sleep(2.5)  # arrives and its rows are due to be written…
        assert embedded.ensure_running(pgdata) == url  # …and comes back before page 2
        _, stderr = crawl.communicate(timeout=120)
        assert crawl.returncode == 0
        stored = products_of(url, d)
        status = runs_of(url, d)[0][0]
        # every product on the menu is stored (rows kept across the outage), none counted missing
        assert set(stored) == set(sandbox.menu(store["id"], 0)), stderr[-3000:]
        assert all(misses == 0 and stock == "in_stock" for misses, stock, _ in stored.values())
        assert status in ("complete", "incomplete"), status
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM store_product_snapshots").fetchone()[0] == len(stored)
    finally:
        embedded.stop(pgdata)
