"""Crawl-run liveness: runs of dead processes are closed as failed by the next crawl (stale
heartbeat, or a pid gone on this host); the heartbeat stamps every run the process has open."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from cannaspider.db.crawl_database import CrawlDatabase
from tests.helpers import project_crawler


def _open_and_close(db: str, **settings) -> None:
    async def run():
        store = CrawlDatabase.for_crawler(project_crawler(DATABASE_URL=db, **settings))
        await store.open()
        await store.close()

    asyncio.run(run())


def test_runs_without_a_heartbeat_are_marked_failed_when_the_next_crawl_opens(db, sql):
    d = sql("INSERT INTO dispensaries (name) VALUES ('x') RETURNING id")[0][0]
    silent = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, heartbeat_at) VALUES (%s, 'product_resync', "
        "now() - interval '5 minutes') RETURNING id",
        (d,),
    )[0][0]
    beating = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, started_at) VALUES (%s, 'product_resync', "
        "now() - interval '3 hours') RETURNING id",
        (d,),
    )[0][0]
    _open_and_close(db, CRAWL_RUN_STALE_AFTER_S=120)
    rows = dict(sql("SELECT id, status FROM crawl_runs"))
    # a long crawl that still beats is left alone, however old
    assert rows == {silent: "failed", beating: "running"}
    assert "no heartbeat" in sql("SELECT error FROM crawl_runs WHERE id = %s", (silent,))[0][0]


@pytest.mark.integration
def test_runs_of_a_process_gone_on_this_host_are_marked_failed_at_once(db, sql):
    d = sql("INSERT INTO dispensaries (name) VALUES ('x') RETURNING id")[0][0]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    host = socket.gethostname()
    dead = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, host, pid) VALUES (%s, 'product_resync', %s, %s) RETURNING id",
        (d, host, dead_pid),
    )[0][0]
    # alive for as long as the test holds its stdin open (it reads until end of file)
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as alive_proc:
        try:
            alive = sql(
                "INSERT INTO crawl_runs (dispensary_id, role, host, pid) VALUES (%s, 'product_resync', %s, %s) "
                "RETURNING id",
                (d, host, alive_proc.pid),
            )[0][0]
            elsewhere = sql(
                "INSERT INTO crawl_runs (dispensary_id, role, host, pid) VALUES (%s, 'product_resync', "
                "'another-host', %s) RETURNING id",
                (d, dead_pid),
            )[0][0]
            _open_and_close(db)
        finally:
            alive_proc.kill()
    rows = dict(sql("SELECT id, status FROM crawl_runs"))
    assert rows == {dead: "failed", alive: "running", elsewhere: "running"}
    assert f"pid {dead_pid} on {host}" in sql("SELECT error FROM crawl_runs WHERE id = %s", (dead,))[0][0]


def test_the_heartbeat_stamps_every_open_run_of_the_process(db, sql):
    d = sql("INSERT INTO dispensaries (name) VALUES ('x') RETURNING id")[0][0]

    async def run():
        crawler = project_crawler(DATABASE_URL=db, CRAWL_RUN_HEARTBEAT_S=0.2)
        store = CrawlDatabase.for_crawler(crawler)
        await store.open()
        runs = [await store.start_run(d, "product_resync") for _ in range(2)]
        sql("UPDATE crawl_runs SET heartbeat_at = now() - interval '1 hour'")
        sql("UPDATE crawl_runs SET status = 'complete' WHERE id = %s", (runs[1],))
        beat = asyncio.ensure_future(store.runs.beat(lambda: store.pool))
        await asyncio.sleep(0.6)
        beat.cancel()
        await store.close()
        return runs, store.runs.open_ids

    (open_run, closed_run), still_open = asyncio.run(run())
    ages = dict(sql("SELECT id, extract(epoch FROM now() - heartbeat_at) FROM crawl_runs"))
    assert ages[open_run] < 5 and ages[closed_run] > 3000
    assert still_open == {open_run}  # a run closed since is no longer stamped
    host, pid = sql("SELECT host, pid FROM crawl_runs WHERE id = %s", (open_run,))[0]
    assert (host, pid) == (socket.gethostname(), __import__("os").getpid())
