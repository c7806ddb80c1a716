"""A database restart in the middle of a crawl: nothing lost, nothing marked missing by mistake.

A short outage is absorbed by the pool (a write waits for a connection, up to DB_POOL_TIMEOUT_S); a
long one makes the write fail with its rows kept for the next attempt (tests/pipelines/test_writers.py).

The right outcome is a *complete* run. A crawl is complete when every page arrived and parsed and
every product it yielded was committed (units/crawl_close.py); an outage the pool absorbed
loses nothing of either, so the crawl saw and stored the whole menu and may count misses like any
other. Calling it incomplete would make every database blip cost a store its out-of-stock
accounting for no reason; calling it complete while rows were lost would be the real bug — which
the assertions on the stored rows and snapshots rule out. (A database lost for good is another
case: tests/commands/test_crawl.py.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.db import embedded, migrations
from tests.helpers import ROOT, SANDBOX_PROXY_AUTH, TEST_DATA_DIR, add_store, products_of, register_proxy, runs_of

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def wait_for_page(sandbox, page: int, crawl: subprocess.Popen) -> None:
    """Until the crawl asks the sandbox for `page`: pages are fetched in order, so the page before
    it has arrived and its rows are in the writers' hands."""
    deadline = time.monotonic() + 60
    while not sandbox.pages_asked(page):
        assert time.monotonic() < deadline and crawl.poll() is None, f"page {page} never asked for"
        time.sleep(0.1)


def test_crawl_survives_a_database_restart(sandbox, scrapy_env):
    # under the test data folder: the embedded server's user must reach it (pytest's tmp_path is
    # private to the user running the tests)
    pgdata = TEST_DATA_DIR / f"restart-{os.getpid()}"
    shutil.rmtree(pgdata, ignore_errors=True)
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
        wait_for_page(sandbox, 2, crawl)  # arrives and its rows are due to be written…
        assert embedded.ensure_running(pgdata) == url  # …and comes back before page 2 (2 s away)
        _, stderr = crawl.communicate(timeout=120)
        assert crawl.returncode == 0
        stored = products_of(url, d)
        status = runs_of(url, d)[0][0]
        # every product on the menu is stored (rows kept across the outage), none counted missing
        assert set(stored) == set(sandbox.menu(store["id"], 0)), stderr[-3000:]
        assert all(misses == 0 and stock == "in_stock" for misses, stock, _ in stored.values())
        assert status == "complete", (status, runs_of(url, d)[0][1], stderr[-3000:])
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM store_product_snapshots").fetchone()[0] == len(stored)
    finally:
        embedded.stop(pgdata)
        shutil.rmtree(pgdata, ignore_errors=True)


def test_a_draining_crawl_leaves_nothing_running_after_a_database_restart(sandbox, scrapy_env):
    """The queue's side: the drain reconnects (tasks/drain.py), each task ends completed or failed
    for a retry, and no task or crawl run is left 'running'."""
    pgdata = TEST_DATA_DIR / f"restart-drain-{os.getpid()}"
    shutil.rmtree(pgdata, ignore_errors=True)
    url = embedded.ensure_running(pgdata)
    try:
        migrations.apply(url, log=lambda _: None)
        register_proxy(url, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
        stores = sorted(sandbox.stores("AZ"), key=lambda s: -s["product_count"])[:3]
        ids = [add_store(url, store) for store in stores]
        with psycopg.connect(url, autocommit=True) as conn:
            for d in ids:
                conn.execute(
                    "INSERT INTO worker_tasks (role, platform, dispensary_id) VALUES ('product_resync', 'dutchie', %s)",
                    (d,),
                )
        for store in stores:
            sandbox.faults({"kind": "slow", "store": store["id"], "pages": [1, 2], "delay": 2.0})
        env = {**scrapy_env, "DATABASE_URL": url, "CANNASPIDER_LOG_LEVEL": "INFO"}
        crawl = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scrapy",
                "crawl",
                "product_resync",
                "-s",
                "DB_WRITE_BATCH_SIZE=50",
                "-s",
                "TASK_HEARTBEAT_S=0.5",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not products_of(url, ids[0]):
            assert time.monotonic() < deadline and crawl.poll() is None, crawl.stderr.read()[-3000:]
            time.sleep(0.05)
        assert embedded.stop(pgdata)
        wait_for_page(sandbox, 2, crawl)  # a store's page 1 arrived while the server was down
        assert embedded.ensure_running(pgdata) == url
        _, stderr = crawl.communicate(timeout=180)
        assert "Traceback" not in stderr, stderr[-3000:]
        with psycopg.connect(url) as conn:
            tasks = conn.execute("SELECT status, attempts FROM worker_tasks").fetchall()
            runs = conn.execute("SELECT status FROM crawl_runs").fetchall()
            missed = conn.execute("SELECT count(*) FROM store_products WHERE consecutive_misses > 0").fetchone()[0]
        assert all(status in ("completed", "pending") for status, _ in tasks), (tasks, stderr[-3000:])
        # a task whose write the outage failed goes back for a retry, and the exit says so (0 only
        # when every task it took completed): which task, if any, depends on where the outage fell
        retried = sum(status == "pending" for status, _ in tasks)
        assert crawl.returncode == (EXIT_INCOMPLETE if retried else 0), stderr[-3000:]
        if retried:
            assert f"{retried} of the 3 product_resync task(s) it took not completed" in stderr, stderr[-3000:]
        assert ("running",) not in runs and missed == 0, (runs, stderr[-3000:])
    finally:
        embedded.stop(pgdata)
        shutil.rmtree(pgdata, ignore_errors=True)


def test_an_idle_follow_drainer_waits_out_a_long_outage_and_goes_on(sandbox, scrapy_env, tmp_path):
    """An outage longer than TASK_RECONNECT_S (60 s): a `-a follow=1` drainer, idle, used to see its
    claim give up, close with start_error and exit 0, never to pick up what was queued later. It now
    says so in its log, claims again with a backoff, and drains the task queued once the server is
    back (issue 16)."""
    pgdata = TEST_DATA_DIR / f"restart-follow-{os.getpid()}"
    shutil.rmtree(pgdata, ignore_errors=True)
    url = embedded.ensure_running(pgdata)
    log = tmp_path / "drainer.log"
    try:
        migrations.apply(url, log=lambda _: None)
        register_proxy(url, sandbox.urls.proxy, SANDBOX_PROXY_AUTH)
        d = add_store(url, sandbox.stores("AZ")[0])
        env = {**scrapy_env, "DATABASE_URL": url, "CANNASPIDER_LOG_LEVEL": "INFO"}
        with log.open("w") as err:
            drainer = subprocess.Popen(
                # reconnect retries cut to 3 s (60 s in production): the test waits for what
                # follows them, the drainer's outage wait, not for the clock
                [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "follow=1", "-s", "TASK_POLL_S=1"]
                + ["-s", "TASK_RECONNECT_S=3", "-s", "TASK_OUTAGE_WAIT_MAX_S=2"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
            )
        try:
            deadline = time.monotonic() + 60
            while "draining the product_resync queue" not in log.read_text():
                assert time.monotonic() < deadline and drainer.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            assert embedded.stop(pgdata)
            # past TASK_RECONNECT_S a queue operation gives up: the drainer says so and stays up
            deadline = time.monotonic() + 60
            while log.read_text().count("the database is still unreachable") < 2:
                assert time.monotonic() < deadline and drainer.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            assert embedded.ensure_running(pgdata) == url
            with psycopg.connect(url, autocommit=True) as conn:
                task = conn.execute(
                    "INSERT INTO worker_tasks (role, platform, dispensary_id) VALUES ('product_resync', 'dutchie', %s) "
                    "RETURNING id",
                    (d,),
                ).fetchone()[0]
            deadline = time.monotonic() + 90
            while True:
                with psycopg.connect(url) as conn:
                    status = conn.execute("SELECT status FROM worker_tasks WHERE id = %s", (task,)).fetchone()[0]
                if status == "completed":
                    break
                assert time.monotonic() < deadline and drainer.poll() is None, (status, log.read_text()[-3000:])
                time.sleep(0.5)
        finally:
            drainer.send_signal(signal.SIGTERM)
            drainer.wait(60)
        text = log.read_text()
        assert drainer.returncode == 0 and "Traceback" not in text, text[-3000:]
        assert "the database is still unreachable" in text and "the database is back" in text
    finally:
        embedded.stop(pgdata)
        shutil.rmtree(pgdata, ignore_errors=True)
