"""Spiders run without a target drain their role's queue (docs/operations.md, "Draining spiders"):
`scrapy crawl` subprocesses against the sandbox and the test database. Tasks complete with their
results and linked crawl runs, chain as the seed says, fail with a backoff when the crawl is
incomplete; SIGTERM releases, kill -9 leaves the lease to expire and marks nothing missing, two
draining processes never take a task twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from cannaspider.commands.crawl import EXIT_INCOMPLETE
from cannaspider.tasks import queue
from tests.helpers import NO_IMAGES, ROOT, add_store, products_of, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def enqueue(db, role, **target):
    import asyncio

    async def main():
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            return await queue.enqueue(conn, role, **target)

    return asyncio.run(main()).task


def tasks(sql, role=None):
    where = "WHERE role = %s" if role else ""
    return sql(
        f"SELECT id, role, dispensary_id, status, attempts, result, crawl_run_id, error FROM worker_tasks {where} "
        "ORDER BY id",
        (role,) if role else None,
    )


def drain(scrapy_env, spider, *args, env=None, timeout=180):
    result = run_scrapy("crawl", spider, *args, env={**scrapy_env, **(env or {})}, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    return result


def test_product_resync_drains_its_queue_with_results_and_linked_runs(scrapy_env, db, sandbox, sql):
    stores = sandbox.stores("AZ")[:3]
    ids = [add_store(db, s) for s in stores]
    queued = [enqueue(db, "product_resync", dispensary_id=d).id for d in ids]
    result = drain(scrapy_env, "product_resync", "-s", "TASK_SLOTS=2", "-s", "TASK_CLAIM_BATCH=1", *NO_IMAGES)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = tasks(sql)
    assert [r[0] for r in rows] == queued and {r[3] for r in rows} == {"completed"}
    for task_id, _, d, _, attempts, res, run_id, _ in rows:
        menu = sandbox.menu(next(s["id"] for s, i in zip(stores, ids, strict=True) if i == d), 0)
        assert attempts == 1 and res["products"] == len(menu) and res["new"] == len(menu)
        assert res["missed"] == 0 and res["oos"] == 0 and res["pages"] >= 1 and res["crawl_run_id"] == run_id
        assert sql("SELECT status, task_id FROM crawl_runs WHERE id = %s", (run_id,)) == [("complete", task_id)]
        assert set(products_of(db, d)) == set(menu)
    # the queue is empty: a second run claims nothing and exits at once
    again = drain(scrapy_env, "product_resync")
    assert again.returncode == 0 and sql("SELECT count(*) FROM crawl_runs")[0][0] == 3


def test_explicit_targets_create_no_task(scrapy_env, db, sandbox, sql):
    d = add_store(db, sandbox.stores("AZ")[0])
    assert drain(scrapy_env, "product_resync", "-a", f"dispensary_id={d}", *NO_IMAGES).returncode == 0
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0
    assert sql("SELECT status, task_id FROM crawl_runs") == [("complete", None)]


def test_an_incomplete_crawl_fails_its_task_with_a_backoff_and_marks_nothing(scrapy_env, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    task = enqueue(db, "product_resync", dispensary_id=d)
    sandbox.faults({"kind": "error500", "store": store["id"], "pages": [0]})
    result = drain(scrapy_env, "product_resync", "-s", "RETRY_ENABLED=0", "-s", "TASK_RETRY_BACKOFF_S=3600")
    assert result.returncode == EXIT_INCOMPLETE, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: 1 unit(s) of work incomplete; 1 of the 1")
    [(status, attempts, error, run_id, due)] = sql(
        "SELECT status, attempts, error, crawl_run_id, run_after > now() + interval '20 minutes' FROM worker_tasks "
        "WHERE id = %s",
        (task.id,),
    )
    assert (status, attempts, due) == ("pending", 1, True) and error.startswith("attempt 1/5: crawl incomplete")
    assert sql("SELECT status, task_id FROM crawl_runs WHERE id = %s", (run_id,)) == [("incomplete", task.id)]
    assert sql("SELECT count(*) FROM store_products WHERE consecutive_misses > 0")[0][0] == 0


def test_a_store_that_cannot_be_crawled_fails_for_good(scrapy_env, db, sandbox, sql):
    d = add_store(db, sandbox.stores("AZ")[0], resolved=False)
    task = enqueue(db, "product_resync", dispensary_id=d)
    assert drain(scrapy_env, "product_resync").returncode == EXIT_INCOMPLETE  # its one task failed
    [(status, error)] = sql("SELECT status, error FROM worker_tasks WHERE id = %s", (task.id,))
    assert status == "failed" and "no platform_dispensary_id" in error


def test_discovery_chains_to_entry_points_then_products(scrapy_env, db, sandbox, sql):
    enqueue(db, "store_discovery", state="NV")
    assert drain(scrapy_env, "store_discovery").returncode == 0
    [(status, res)] = sql("SELECT status, result FROM worker_tasks WHERE role = 'store_discovery'")
    found = sql("SELECT id FROM dispensaries WHERE state = 'NV' ORDER BY id")
    assert status == "completed" and found and res["new_dispensary_ids"] == [r[0] for r in found]
    chained = sql("SELECT dispensary_id, priority FROM worker_tasks WHERE role = 'entry_point_discovery' ORDER BY 1")
    assert chained == [(r[0], 10) for r in found]

    assert drain(scrapy_env, "entry_point_discovery").returncode == 0
    entry = sql("SELECT status, result FROM worker_tasks WHERE role = 'entry_point_discovery'")
    assert {s for s, _ in entry} == {"completed"}
    resolved = sql("SELECT id FROM dispensaries WHERE platform_dispensary_id IS NOT NULL ORDER BY id")
    assert resolved and sum(r["resolved"] for _, r in entry) == len(resolved)
    products = sql("SELECT dispensary_id, priority FROM worker_tasks WHERE role = 'product_discovery' ORDER BY 1")
    assert products == [(r[0], 10) for r in resolved]

    assert drain(scrapy_env, "product_discovery", *NO_IMAGES).returncode == 0  # (NV's ~1,100 images: not the point)
    assert {r[0] for r in sql("SELECT status FROM worker_tasks WHERE role = 'product_discovery'")} == {"completed"}
    assert (
        sql("SELECT count(*) FROM dispensaries WHERE last_crawl_at IS NULL AND platform_dispensary_id IS NOT NULL")[0][
            0
        ]
        == 0
    )
    # a second discovery of the state finds no new store: nothing chained
    enqueue(db, "store_discovery", state="NV")
    assert drain(scrapy_env, "store_discovery").returncode == 0
    last = sql("SELECT result FROM worker_tasks WHERE role = 'store_discovery' ORDER BY id DESC LIMIT 1")[0][0]
    assert last["new_dispensary_ids"] == [] and last["stores"] == len(found)


def test_follow_keeps_draining_until_sigterm_which_releases(scrapy_env, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    other = add_store(db, sandbox.stores("AZ")[1])
    # each page 3 s late: the stop finds one in flight, and a graceful stop waits for it (60 s was
    # the proxy's idle timeout, 10 s, of waiting)
    sandbox.faults({"kind": "slow", "store": store["id"], "delay": 3.0})
    proc = _spawn(scrapy_env, "product_resync", "-a", "follow=1", "-s", "TASK_POLL_S=0.5")
    try:
        enqueue(db, "product_resync", dispensary_id=other)
        _wait_for(lambda: sql("SELECT status FROM worker_tasks WHERE dispensary_id = %s", (other,)) == [("completed",)])
        asked = sandbox.pages_asked(0)  # the other store's
        slow = enqueue(db, "product_resync", dispensary_id=d)
        _wait_for(lambda: sql("SELECT status FROM worker_tasks WHERE id = %s", (slow.id,)) == [("running",)])
        _wait_for(lambda: sandbox.pages_asked(0) > asked)  # its first page is on the way
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    assert sql("SELECT status, attempts FROM worker_tasks WHERE id = %s", (slow.id,)) == [("pending", 0)]
    # stopped with a task not done: cron and Scrapyd see it (exit 0 only when all it took completed);
    # the store's open run closes incomplete and counts, wherever the stop finds it (one close path)
    last = err.strip().splitlines()[-1]
    assert proc.returncode == EXIT_INCOMPLETE, err[-2000:]
    assert last == (
        "error: 1 unit(s) of work incomplete; 1 of the 2 product_resync task(s) it took not completed "
        "(the crawl ended: shutdown)"
    ), last
    assert sql("SELECT status FROM crawl_runs WHERE dispensary_id = %s", (d,)) == [("incomplete",)]
    assert sql("SELECT count(*) FROM store_products WHERE consecutive_misses > 0")[0][0] == 0


def test_a_second_sigint_forces_the_shutdown_and_still_releases_tasks_and_runs(scrapy_env, db, sandbox, sql):
    """Scrapyd's second cancel.json: Scrapy stops the reactor at once (no spider_closed); the held
    task goes back to pending, its attempt not counted, and its run is closed (cannaspider/shutdown.py)."""
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    sandbox.faults({"kind": "slow", "store": store["id"], "delay": 60.0})
    task = enqueue(db, "product_resync", dispensary_id=d)
    proc = _spawn(scrapy_env, "product_resync", "-a", "follow=1")
    try:
        _wait_for(lambda: sql("SELECT count(*) FROM crawl_runs WHERE task_id = %s", (task.id,)) == [(1,)])
        time.sleep(1)  # its first page is on the way (and takes 60 s)
    finally:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "forcing unclean shutdown" in err, err[-3000:]
    assert sql("SELECT status, attempts FROM worker_tasks WHERE id = %s", (task.id,)) == [("pending", 0)], err[-3000:]
    [(status,)] = sql("SELECT status FROM crawl_runs WHERE task_id = %s", (task.id,))
    assert status in ("failed", "incomplete")
    assert proc.returncode != 0


def test_kill_9_mid_crawl_the_task_reruns_after_its_lease_and_nothing_is_marked(scrapy_env, db, sandbox, sql):
    store = sandbox.stores("AZ")[0]
    d = add_store(db, store)
    # a first complete crawl: every product in stock, so a wrong close would count misses
    first = enqueue(db, "product_resync", dispensary_id=d)
    assert drain(scrapy_env, "product_resync", *NO_IMAGES).returncode == 0
    assert sql("SELECT status FROM worker_tasks WHERE id = %s", (first.id,)) == [("completed",)]
    sandbox.faults({"kind": "slow", "store": store["id"], "pages": [1], "delay": 60.0})
    task = enqueue(db, "product_resync", dispensary_id=d)
    lease = ["-s", "TASK_LEASE_S=2", "-s", "TASK_HEARTBEAT_S=0.5", *NO_IMAGES]
    proc = _spawn(scrapy_env, "product_resync", *lease)
    try:
        _wait_for(lambda: sql("SELECT pages_fetched FROM crawl_runs WHERE task_id = %s", (task.id,)) != [])
        # the heartbeat keeps the lease beyond its first 2 s while the crawl runs
        _wait_for(
            lambda: (
                sql(
                    "SELECT status FROM worker_tasks WHERE id = %s AND now() > claimed_at + interval '2.5 s'"
                    " AND lease_expires_at > claimed_at + interval '2.5 s'",
                    (task.id,),
                )
                != []
            )
        )
        assert sql("SELECT status FROM worker_tasks WHERE id = %s", (task.id,)) == [("running",)]
    finally:
        proc.kill()
        proc.wait(10)
    # the lease runs out (no heartbeat renews it now)
    _wait_for(lambda: sql("SELECT 1 FROM worker_tasks WHERE id = %s AND lease_expires_at < now()", (task.id,)) != [])
    sandbox.reset()
    again = drain(scrapy_env, "product_resync", *lease)
    assert again.returncode == 0, again.stderr[-3000:]
    [(status, attempts, run_id)] = sql(
        "SELECT status, attempts, crawl_run_id FROM worker_tasks WHERE id = %s", (task.id,)
    )
    assert (status, attempts) == ("completed", 2)
    runs = sql("SELECT id, status FROM crawl_runs WHERE task_id = %s ORDER BY id", (task.id,))
    assert [s for _, s in runs] == ["failed", "complete"] and runs[1][0] == run_id
    assert all(m == 0 for m, _, _ in products_of(db, d).values())


def test_two_draining_processes_share_the_work_and_take_no_task_twice(scrapy_env, db, sandbox, sql):
    ids = [add_store(db, s) for s in sandbox.stores("AZ")[:4] + sandbox.stores("MI")[:4]]
    for d in ids:
        enqueue(db, "product_resync", dispensary_id=d)
    args = ["-s", "TASK_SLOTS=2", "-s", "TASK_CLAIM_BATCH=1"]
    procs = [_spawn(scrapy_env, "product_resync", *args) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert sql("SELECT status, attempts, count(*) FROM worker_tasks GROUP BY 1, 2") == [("completed", 1, 8)]
    assert sql("SELECT count(*), count(DISTINCT task_id), count(DISTINCT pid) FROM crawl_runs") == [(8, 8, 2)]


def test_bad_follow_argument_is_one_line(scrapy_env):
    result = run_scrapy("crawl", "product_resync", "-a", "follow=maybe", env=scrapy_env)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].startswith(
        "error: product_resync: follow must be 1 or 0"
    )


# -- helpers ---------------------------------------------------------------------------------------------------
def _spawn(env, spider, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", spider, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def _no_stray_env():
    assert "SCRAPY_CHECK" not in os.environ
