"""The queue on a real PostgreSQL: enqueue dedupe (also concurrent), leases, backoff, chaining."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from datetime import timedelta

import psycopg
import pytest

from cannaspider.tasks import queue
from cannaspider.tasks.queue import Backoff, LeaseLost, TaskResult
from cannaspider.tasks.roles import TaskInputError
from tests.tasks.conftest import add_store, add_stores


def row(sql, task_id, cols="status, attempts, error, crawl_run_id"):
    return sql(f"SELECT {cols} FROM worker_tasks WHERE id = %s", (task_id,))[0]


def start_run(sql, dispensary_id, role="product_resync", task_id=None):
    return sql(
        "INSERT INTO crawl_runs (dispensary_id, role, task_id) VALUES (%s, %s, %s) RETURNING id",
        (dispensary_id, role, task_id),
    )[0][0]


# -- enqueue ------------------------------------------------------------------------------------------
def test_an_identical_task_is_reused_and_made_more_urgent(q, sql):
    d = add_store(sql)
    first = q(queue.enqueue, "product_resync", dispensary_id=d, priority=0)
    again = q(queue.enqueue, "product_resync", dispensary_id=d, priority=0)
    urgent = q(queue.enqueue, "product_resync", dispensary_id=d, priority=20)
    other_role = q(queue.enqueue, "product_discovery", dispensary_id=d)
    assert first.created and not again.created and not urgent.created and other_role.created
    assert first.task.id == again.task.id == urgent.task.id != other_role.task.id
    assert urgent.task.priority == 20
    az = q(queue.enqueue, "store_discovery", state="az")
    assert az.task.payload == {"state": "AZ"} and az.task.dispensary_id is None
    assert not q(queue.enqueue, "store_discovery", state="Arizona").created
    assert q(queue.enqueue, "store_discovery", state="MI").created
    assert q(queue.enqueue, "analytics_refresh").created and not q(queue.enqueue, "analytics_refresh").created
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 5


def test_a_running_task_is_reused_too_but_a_finished_one_is_not(q, sql):
    d = add_store(sql)
    task = q(queue.enqueue, "product_resync", dispensary_id=d).task
    [claimed] = q(queue.claim, "product_resync", "w1")
    assert q(queue.enqueue, "product_resync", dispensary_id=d).task.id == task.id
    q(queue.complete, claimed.lease, TaskResult())
    after = q(queue.enqueue, "product_resync", dispensary_id=d)
    assert after.created and after.task.id != task.id


def test_concurrent_identical_enqueues_create_one_task(db, sql):
    stores = add_stores(sql, 5)
    workers = 8
    barrier = threading.Barrier(workers)

    def enqueue_all(_):
        ids = []
        with psycopg.connect(db, autocommit=True) as conn:
            for d in stores:
                barrier.wait()  # every thread sends the same task at the same moment
                with conn.transaction():
                    ids.append(
                        conn.execute(
                            queue.ENQUEUE.replace(f"RETURNING {queue.COLUMNS}, (xmax = 0) AS created", "RETURNING id"),
                            {
                                "role": "product_resync",
                                "platform": "dutchie",
                                "dispensary_id": d,
                                "payload": queue.Jsonb({}),
                                "priority": 0,
                                "run_after": None,
                                "max_attempts": 5,
                                "parent": None,
                            },
                        ).fetchone()
                    )
        return ids

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(enqueue_all, range(workers)))
    assert sql("SELECT dispensary_id, count(*) FROM worker_tasks GROUP BY 1 ORDER BY 1") == [(d, 1) for d in stores]


def test_concurrent_enqueue_api_returns_the_same_task_to_everyone(db, sql):
    import asyncio

    d = add_store(sql)
    workers = 6
    barrier = threading.Barrier(workers)

    def one(_):
        async def main():
            async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
                barrier.wait()
                return await queue.enqueue(conn, "product_resync", dispensary_id=d)

        return asyncio.run(main())

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, range(workers)))
    assert len({r.task.id for r in results}) == 1
    assert sum(r.created for r in results) == 1


@pytest.mark.parametrize(
    ("role", "kwargs", "message"),
    [
        ("product_rescan", {"dispensary_id": 1}, "unknown role 'product_rescan'"),
        ("product_resync", {}, "product_resync needs dispensary_id"),
        ("product_resync", {"dispensary_id": 999}, "dispensary 999 does not exist"),
        ("product_resync", {"dispensary_id": -3}, "dispensary_id must be a positive integer"),
        ("product_resync", {"state": "AZ"}, "product_resync takes only dispensary_id, not state"),
        ("store_discovery", {"state": "XX"}, "unknown US state 'XX'"),
        ("analytics_refresh", {"dispensary_id": 1}, "analytics_refresh takes no target, not dispensary_id"),
        ("crawl_onpage", {"keyword_id": 5}, "keyword 5 does not exist"),
    ],
)
def test_bad_input_is_one_clear_error_and_nothing_is_queued(q, sql, role, kwargs, message):
    with pytest.raises(TaskInputError) as err:
        q(queue.enqueue, role, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


# -- leases ------------------------------------------------------------------------------------------
def test_heartbeat_renews_the_lease_and_reports_lost_ones(q, sql):
    a, b = add_stores(sql, 2)
    for d in (a, b):
        q(queue.enqueue, "product_resync", dispensary_id=d)
    t1, t2 = q(queue.claim, "product_resync", "w1", 2, lease_s=5)
    before = row(sql, t1.id, "lease_expires_at")[0]
    q(queue.cancel, t2.id)
    assert q(queue.heartbeat, [t1.lease, t2.lease], lease_s=3600) == {t1.id}
    assert row(sql, t1.id, "lease_expires_at")[0] > before + timedelta(minutes=30)


def test_an_expired_lease_goes_back_with_its_attempt_counted_and_the_dead_crawl_records_nothing(q, sql):
    d = add_store(sql)
    q(queue.enqueue, "product_resync", dispensary_id=d)
    [dead] = q(queue.claim, "product_resync", "dead-worker", lease_s=0)
    run = start_run(sql, d, task_id=dead.id)
    [again] = q(queue.claim, "product_resync", "w2")  # the lease expired: requeued, then claimed
    assert again.id == dead.id and again.attempts == 2 and "lease expired (worker dead-worker)" in again.error
    assert sql("SELECT status, error FROM crawl_runs WHERE id = %s", (run,))[0] == (
        "failed",
        "lease expired: the worker died or lost its task",
    )
    # the dead worker comes back to life: nothing it says is recorded
    with pytest.raises(LeaseLost):
        q(queue.complete, dead.lease, TaskResult(products=5))
    with pytest.raises(LeaseLost):
        q(queue.fail, dead.lease, "late")
    with pytest.raises(LeaseLost):

        async def guarded(conn):
            async with conn.transaction():
                await queue.check_lease(conn, dead.lease)

        q(guarded)
    assert row(sql, dead.id, "status, claimed_by, result") == ("running", "w2", None)


def test_a_task_completed_after_an_expired_lease_keeps_no_stale_error(q, sql):
    d = add_store(sql)
    q(queue.enqueue, "product_resync", dispensary_id=d)
    [dead] = q(queue.claim, "product_resync", "dead-worker", lease_s=0)
    [again] = q(queue.claim, "product_resync", "w2")
    assert "lease expired" in again.error
    q(queue.complete, again.lease, TaskResult(products=5))
    assert row(sql, dead.id, "status, error") == ("completed", None)


def test_requeue_expired_covers_every_role(q, sql):
    q(queue.enqueue, "analytics_refresh")
    q(queue.claim, "analytics_refresh", "w", lease_s=0)
    assert q(queue.requeue_expired) == 1
    assert row(sql, 1, "status, attempts") == ("pending", 1)


def test_release_gives_tasks_back_without_counting_the_attempt(q, sql):
    d = add_store(sql)
    q(queue.enqueue, "product_resync", dispensary_id=d)
    [task] = q(queue.claim, "product_resync", "w1")
    run = start_run(sql, d, task_id=task.id)
    assert q(queue.release, [task.lease]) == {task.id}
    assert row(sql, task.id, "status, attempts, claimed_by") == ("pending", 0, None)
    assert sql("SELECT status FROM crawl_runs WHERE id = %s", (run,))[0][0] == "failed"


# -- outcomes ------------------------------------------------------------------------------------------
def test_complete_records_the_result_and_links_the_crawl_run(q, sql):
    d = add_store(sql)
    q(queue.enqueue, "product_resync", dispensary_id=d)
    [task] = q(queue.claim, "product_resync", "w1")
    run = start_run(sql, d)
    q(queue.complete, task.lease, TaskResult(pages=3, products=250, new=4, missed=2, oos=1, crawl_run_id=run))
    status, result, crawl_run_id, completed_at = row(sql, task.id, "status, result, crawl_run_id, completed_at")
    assert status == "completed" and completed_at is not None and crawl_run_id == run
    assert result == {"pages": 3, "products": 250, "new": 4, "missed": 2, "oos": 1, "crawl_run_id": run}
    assert sql("SELECT task_id FROM crawl_runs WHERE id = %s", (run,))[0][0] == task.id


def test_failure_backs_off_exponentially_with_jitter_then_stays_failed(q, sql):
    d = add_store(sql)
    task = q(queue.enqueue, "product_resync", dispensary_id=d, max_attempts=3).task
    backoff = Backoff(base_s=100, cap_s=150)
    delays = []
    for attempt in (1, 2, 3):
        sql("UPDATE worker_tasks SET run_after = now() WHERE id = %s", (task.id,))  # skip the wait
        [claimed] = q(queue.claim, "product_resync", "w1")
        run = start_run(sql, d, task_id=None)
        after = q(queue.fail, claimed.lease, f"GraphQL error\nwith detail {attempt}", run, backoff)
        assert after.attempts == attempt and after.crawl_run_id == run
        if attempt < 3:
            assert after.status == "pending" and after.error == f"attempt {attempt}/3: GraphQL error"
            delays.append((after.run_after - after.updated_at).total_seconds())
    assert 50 <= delays[0] <= 100  # base · 2^0 · [0.5, 1)
    assert 75 <= delays[1] <= 150  # base · 2^1 = 200, capped at 150, times [0.5, 1)
    status, attempts, error, crawl_run_id = row(sql, task.id)
    assert (status, attempts, error) == ("failed", 3, "attempt 3/3: GraphQL error")
    assert sql("SELECT task_id FROM crawl_runs WHERE id = %s", (crawl_run_id,))[0][0] == task.id
    assert q(queue.claim, "product_resync", "w1") == []


def test_jitter_spreads_tasks_that_fail_together(q, sql):
    stores = add_stores(sql, 20)
    for d in stores:
        q(queue.enqueue, "product_resync", dispensary_id=d)
    claimed = q(queue.claim, "product_resync", "w1", 20)
    q(queue.fail_many, [(t.lease, "blocked", None) for t in claimed], Backoff(base_s=1000))
    run_after = {r[0] for r in sql("SELECT run_after FROM worker_tasks")}
    assert len(run_after) == 20


# -- chaining --------------------------------------------------------------------------------------------
def test_store_discovery_chains_entry_point_discovery_for_new_stores_only(q, sql):
    old = add_store(sql, "old", state="AZ")
    task = q(queue.enqueue, "store_discovery", state="AZ").task
    [claimed] = q(queue.claim, "store_discovery", "w1")
    new = [add_store(sql, f"new{i}", state="AZ", platform_id=None) for i in range(3)]
    add_store(sql, "elsewhere", state="MI")  # created meanwhile by another state's discovery
    q(queue.complete, claimed.lease, TaskResult())
    chained = sql("SELECT role, dispensary_id, priority, parent_task_id FROM worker_tasks WHERE id <> %s", (task.id,))
    assert sorted(chained) == [("entry_point_discovery", d, 10, task.id) for d in new]
    assert old not in {c[1] for c in chained}


def test_store_discovery_chains_the_stores_it_names(q, sql):
    a, b = add_stores(sql, 2)
    q(queue.enqueue, "store_discovery", state="AZ")
    [claimed] = q(queue.claim, "store_discovery", "w1")
    q(queue.complete, claimed.lease, TaskResult(new_dispensary_ids=[b]))
    assert sql("SELECT role, dispensary_id FROM worker_tasks WHERE role <> 'store_discovery'") == [
        ("entry_point_discovery", b)
    ]


def test_entry_point_chains_product_discovery_on_success_and_product_discovery_chains_nothing(q, sql):
    resolved = add_store(sql, "resolved")
    unresolved = add_store(sql, "unresolved", platform_id=None)
    for d in (resolved, unresolved):
        q(queue.enqueue, "entry_point_discovery", dispensary_id=d)
    leases = [t.lease for t in q(queue.claim, "entry_point_discovery", "w1", 5)]
    assert q(queue.complete_many, [(lease, TaskResult()) for lease in leases]) == []
    [(role, d, priority, parent)] = sql(
        "SELECT role, dispensary_id, priority, parent_task_id FROM worker_tasks WHERE role = 'product_discovery'"
    )
    assert (role, d, priority) == ("product_discovery", resolved, 10) and parent is not None
    [discovery] = q(queue.claim, "product_discovery", "w1")
    q(queue.complete, discovery.lease, TaskResult(products=10))
    assert sql("SELECT count(*) FROM worker_tasks WHERE status IN ('pending', 'running')")[0][0] == 0


# -- operator actions ----------------------------------------------------------------------------------
def test_cancel_and_retry(q, sql):
    d = add_store(sql)
    task = q(queue.enqueue, "product_resync", dispensary_id=d).task
    assert q(queue.cancel, task.id).status == "cancelled"
    with pytest.raises(TaskInputError, match="is cancelled: only pending or running"):
        q(queue.cancel, task.id)
    twin = q(queue.enqueue, "product_resync", dispensary_id=d).task
    with pytest.raises(TaskInputError, match=rf"an identical task \({twin.id}\) is already queued"):
        q(queue.retry, task.id)
    q(queue.cancel, twin.id)
    retried = q(queue.retry, task.id)
    assert (retried.status, retried.attempts) == ("pending", 0)
    with pytest.raises(TaskInputError, match="is pending: only failed or cancelled"):
        q(queue.retry, task.id)
    with pytest.raises(TaskInputError, match="task 999 does not exist"):
        q(queue.retry, 999)


def test_list_tasks_filters_and_pages(q, sql):
    stores = add_stores(sql, 7)
    for d in stores:
        q(queue.enqueue, "product_resync", dispensary_id=d)
    q(queue.enqueue, "analytics_refresh")
    page = q(queue.list_tasks, role="product_resync", limit=3)
    assert [t.id for t in page.tasks] == [7, 6, 5] and page.next_before_id == 5
    page = q(queue.list_tasks, role="product_resync", limit=3, before_id=page.next_before_id)
    assert [t.id for t in page.tasks] == [4, 3, 2]
    page = q(queue.list_tasks, role="product_resync", limit=3, before_id=page.next_before_id)
    assert [t.id for t in page.tasks] == [1] and page.next_before_id is None
    assert [t.role for t in q(queue.list_tasks, status="pending", limit=1).tasks] == ["analytics_refresh"]
    with pytest.raises(TaskInputError, match="unknown status 'done'"):
        q(queue.list_tasks, status="done")


def test_a_concurrent_claim_of_another_task_of_the_same_store_is_skipped_not_an_error(db, q, sql):
    d = add_store(sql)
    q(queue.enqueue, "product_resync", dispensary_id=d)
    sql(  # another task of the same store (not identical: its payload differs), more urgent
        "INSERT INTO worker_tasks (role, dispensary_id, payload, priority) VALUES ('product_resync', %s, %s, 50)",
        (d, '{"manual": true}'),
    )
    holder = psycopg.connect(db)
    try:
        first = holder.execute("SELECT id FROM claim_task('product_resync', 'w1', 1)").fetchall()
        assert first == [(2,)]  # claimed, not yet committed
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            other = pool.submit(q, queue.claim, "product_resync", "w2", 5)
            # w2 picks task 1 (task 2 is locked), and its update waits on w1's uncommitted claim
            time.sleep(0.5)
            holder.commit()
            assert other.result(timeout=20) == []  # falls back row by row: the store is busy
    finally:
        holder.close()
    assert sql("SELECT id, status FROM worker_tasks ORDER BY id") == [(1, "pending"), (2, "running")]


def test_completing_twice_with_the_same_lease_is_not_a_lost_lease_and_chains_once(q, sql):
    resolved = add_store(sql)
    q(queue.enqueue, "entry_point_discovery", dispensary_id=resolved)
    [task] = q(queue.claim, "entry_point_discovery", "w1")
    q(queue.complete, task.lease, TaskResult())
    q(queue.complete, task.lease, TaskResult())  # a retry after the reply was lost
    assert sql("SELECT count(*) FROM worker_tasks WHERE role = 'product_discovery'")[0][0] == 1
