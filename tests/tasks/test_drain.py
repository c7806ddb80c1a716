"""TaskDrain driven directly (no spider): slots, batches, follow with LISTEN, stop/release,
lease loss, SIGTERM and kill -9 of a draining process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from cannaspider import settings as defaults
from cannaspider.tasks import queue
from cannaspider.tasks.drain import DrainConfig, TaskDrain
from cannaspider.tasks.queue import TaskResult
from tests.helpers import ROOT, leases_lapsed, month_without_partitions, wait_for
from tests.tasks.conftest import add_stores


def enqueue_stores(q, sql, n, role="product_resync"):
    stores = add_stores(sql, n)
    for d in stores:
        q(queue.enqueue, role, dispensary_id=d)
    return stores


def test_drains_the_queue_within_its_slots_then_stops(db, q, sql):
    enqueue_stores(q, sql, 30)
    most_held = 0

    async def main():
        nonlocal most_held
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(slots=4, batch=3))
        crawls = []

        async def crawl(task):
            await asyncio.sleep(0.01)  # the store's crawl
            await drain.complete(task, TaskResult(products=task.dispensary_id))

        async for task in drain.tasks():
            most_held = max(most_held, len(drain.held))
            crawls.append(asyncio.ensure_future(crawl(task)))
        await asyncio.gather(*crawls)
        await drain.close()
        return drain

    drain = asyncio.run(main())
    assert most_held == 4 and drain.claimed == drain.completed == 30
    assert sql("SELECT status, count(*) FROM worker_tasks GROUP BY 1") == [("completed", 30)]


def test_two_drains_share_the_queue_and_never_take_a_task_twice(db, q, sql):
    enqueue_stores(q, sql, 60)

    async def one(name):
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(slots=5, batch=5), worker=name)
        seen = []
        async for task in drain.tasks():
            seen.append(task.id)
            await asyncio.sleep(0)
            await drain.complete(task)
        await drain.close()
        return seen

    async def main():
        return await asyncio.gather(one("a"), one("b"))

    a, b = asyncio.run(main())
    assert a and b and len(a) + len(b) == len(set(a) | set(b)) == 60


def test_follow_wakes_on_notify_long_before_the_poll(db, q, sql):
    [d] = add_stores(sql, 1)

    async def main():
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(follow=True, poll_s=30))
        got = []

        async def consume():
            async for task in drain.tasks():
                got.append((task, time.monotonic()))
                await drain.complete(task)
                drain.stop()

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0.5)  # the drain is waiting: nothing queued
        assert not got
        sent = time.monotonic()
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=d)
        await asyncio.wait_for(consumer, 10)
        await drain.close()
        return got[0][1] - sent

    latency = asyncio.run(main())
    assert latency < 2.0  # the poll would have taken 30 s


def test_close_releases_what_is_held_without_counting_the_attempt(db, q, sql):
    enqueue_stores(q, sql, 5)

    async def main():
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(slots=3, follow=True))
        async for _task in drain.tasks():
            if len(drain.held) == 3:
                break
        await drain.close()
        return drain

    drain = asyncio.run(main())
    assert drain.released == 3
    assert sql("SELECT status, attempts, count(*) FROM worker_tasks GROUP BY 1, 2") == [("pending", 0, 5)]


def test_a_lost_lease_is_reported_and_its_completion_refused(db, q, sql):
    enqueue_stores(q, sql, 2)

    async def main():
        lost = []
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(slots=2), on_lost=lost.append)
        tasks = []
        async for task in drain.tasks():
            tasks.append(task)
            if len(tasks) == 2:
                break
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.cancel(conn, tasks[0].id)
        assert await drain.heartbeat() == {tasks[1].id}
        try:
            await drain.complete(tasks[0])
            refused = False
        except queue.LeaseLost:
            refused = True
        await drain.complete(tasks[1])
        await drain.close()
        return lost, tasks, refused

    lost, tasks, refused = asyncio.run(main())
    assert [t.id for t in lost] == [tasks[0].id] and refused
    statuses = sql("SELECT id, status FROM worker_tasks ORDER BY id")
    assert statuses == [(tasks[0].id, "cancelled"), (tasks[1].id, "completed")]


def test_fail_retries_later(db, q, sql):
    enqueue_stores(q, sql, 1)

    async def main():
        drain = TaskDrain(
            db,
            "product_resync",
            DrainConfig.of_project(backoff=queue.Backoff(base_s=3600, cap_s=6 * 3600, jitter=(0.5, 1.0))),
        )
        async for task in drain.tasks():
            await drain.fail(task, "blocked (403)", None)
        await drain.close()

    asyncio.run(main())
    status, attempts, error, due = sql("SELECT status, attempts, error, run_after > now() FROM worker_tasks")[0]
    assert (status, attempts, error, due) == ("pending", 1, "attempt 1/5: blocked (403)", True)


# -- a real draining process: SIGTERM releases, kill -9 leaves the lease to expire ---------------------------
WORKER = """
import asyncio, sys
from cannaspider.tasks.drain import DrainConfig, TaskDrain

async def main():
    config = DrainConfig.of_project(slots=3, follow=True, lease_s=float(sys.argv[2]))
    drain = TaskDrain(sys.argv[1], "product_resync", config)
    drain.install_signal_handlers()
    async for task in drain.tasks():
        print("claimed", task.id, flush=True)  # ...and never completes: the crawl is "running"
    await drain.close()
    print("released", drain.released, flush=True)

asyncio.run(main())
"""


def _start_worker(db, lease_s):
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, db, str(lease_s)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    claimed = [proc.stdout.readline() for _ in range(3)]
    assert all(line.startswith("claimed") for line in claimed), (claimed, proc.stderr.read())
    return proc


@pytest.mark.integration
def test_sigterm_releases_the_tasks_a_worker_holds(db, q, sql):
    enqueue_stores(q, sql, 4)
    proc = _start_worker(db, 600)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "released 3" in out, err
    assert sql("SELECT status, attempts, count(*) FROM worker_tasks GROUP BY 1, 2") == [("pending", 0, 4)]


@pytest.mark.integration
def test_kill_9_leaves_the_task_to_expire_then_it_runs_again_with_the_attempt_counted(db, q, sql):
    stores = enqueue_stores(q, sql, 3)
    proc = _start_worker(db, 1)
    run = sql(
        "INSERT INTO crawl_runs (dispensary_id, role, task_id) SELECT dispensary_id, role, id FROM worker_tasks "
        "WHERE dispensary_id = %s RETURNING id",
        (stores[0],),
    )[0][0]
    proc.kill()
    proc.wait(10)
    wait_for(lambda: leases_lapsed(db), "the killed worker's leases run out")
    again = q(queue.claim, "product_resync", "survivor", 10, lease_s=defaults.TASK_LEASE_S)
    assert sorted(t.dispensary_id for t in again) == stores and {t.attempts for t in again} == {2}
    assert sql("SELECT status FROM crawl_runs WHERE id = %s", (run,))[0][0] == "failed"
    assert sql("SELECT count(*) FROM store_products WHERE consecutive_misses > 0")[0][0] == 0


def test_a_lost_database_connection_is_reopened_and_the_work_goes_on(db, q, sql):
    enqueue_stores(q, sql, 6)

    async def main():
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project(slots=2, batch=2))
        done = 0
        async for task in drain.tasks():
            if done == 1:  # the server drops the drain's connection (as a restart does)
                pid = drain._db.conn.info.backend_pid
                async with await psycopg.AsyncConnection.connect(db, autocommit=True) as admin:
                    await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await drain.complete(task)
            done += 1
        await drain.close()
        return drain

    drain = asyncio.run(main())
    assert drain.completed == 6
    assert sql("SELECT status, count(*) FROM worker_tasks GROUP BY 1") == [("completed", 6)]


def test_a_drains_claim_makes_the_partitions_of_this_month_and_the_next(db, q, sql):
    """A drainer running across a month's end with no schedule: its claims make the month ahead."""
    enqueue_stores(q, sql, 1)

    async def main():
        drain = TaskDrain(db, "product_resync", DrainConfig.of_project())
        async for task in drain.tasks():
            await drain.complete(task)
        await drain.close()

    with month_without_partitions(db) as name:
        asyncio.run(main())
        assert sql("SELECT to_regclass(%s)::text", (name,)) == [(name,)]
