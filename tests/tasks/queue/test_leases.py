"""Leases on a real PostgreSQL: claim, heartbeat, expiry, release; a dead worker records nothing."""

from __future__ import annotations

import concurrent.futures
import time
from datetime import timedelta

import psycopg
import pytest

from cannaspider import settings as defaults
from cannaspider.tasks.queue import LeaseLost, TaskResult, admin, enqueuing, leases, outcomes
from tests.tasks.conftest import add_store, add_stores, row, start_run


def test_heartbeat_renews_the_lease_and_reports_lost_ones(q, sql):
    a, b = add_stores(sql, 2)
    for d in (a, b):
        q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    t1, t2 = q(leases.claim, "product_resync", "w1", 2, lease_s=5)
    before = row(sql, t1.id, "lease_expires_at")[0]
    q(admin.cancel, t2.id)
    assert q(leases.heartbeat, [t1.lease, t2.lease], lease_s=3600) == {t1.id}
    assert row(sql, t1.id, "lease_expires_at")[0] > before + timedelta(minutes=30)


def test_an_expired_lease_goes_back_with_its_attempt_counted_and_the_dead_crawl_records_nothing(q, sql):
    d = add_store(sql)
    q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    [dead] = q(leases.claim, "product_resync", "dead-worker", lease_s=0)
    run = start_run(sql, d, task_id=dead.id)
    # the lease expired: requeued, then claimed
    [again] = q(leases.claim, "product_resync", "w2", lease_s=defaults.TASK_LEASE_S)
    assert again.id == dead.id and again.attempts == 2 and "lease expired (worker dead-worker)" in again.error
    assert sql("SELECT status, error FROM crawl_runs WHERE id = %s", (run,))[0] == (
        "failed",
        "lease expired: the worker died or lost its task",
    )
    # the dead worker comes back to life: nothing it says is recorded
    with pytest.raises(LeaseLost):
        q(outcomes.complete, dead.lease, TaskResult(products=5))
    with pytest.raises(LeaseLost):
        q(outcomes.fail, dead.lease, "late")
    with pytest.raises(LeaseLost):

        async def guarded(conn):
            async with conn.transaction():
                await leases.check_lease(conn, dead.lease)

        q(guarded)
    assert row(sql, dead.id, "status, claimed_by, result") == ("running", "w2", None)


def test_requeue_expired_covers_every_role(q, sql):
    q(enqueuing.enqueue, "analytics_refresh")
    q(leases.claim, "analytics_refresh", "w", lease_s=0)
    assert q(leases.requeue_expired) == 1
    assert row(sql, 1, "status, attempts") == ("pending", 1)


def test_release_gives_tasks_back_without_counting_the_attempt(q, sql):
    d = add_store(sql)
    q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    [task] = q(leases.claim, "product_resync", "w1", lease_s=defaults.TASK_LEASE_S)
    run = start_run(sql, d, task_id=task.id)
    assert q(leases.release, [task.lease]) == {task.id}
    assert row(sql, task.id, "status, attempts, claimed_by") == ("pending", 0, None)
    assert sql("SELECT status FROM crawl_runs WHERE id = %s", (run,))[0][0] == "failed"


def test_a_concurrent_claim_of_another_task_of_the_same_store_is_skipped_not_an_error(db, q, sql):
    d = add_store(sql)
    q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    sql(  # another task of the same store (not identical: its payload differs), more urgent
        "INSERT INTO worker_tasks (role, dispensary_id, payload, priority) VALUES ('product_resync', %s, %s, 50)",
        (d, '{"manual": true}'),
    )
    holder = psycopg.connect(db)
    try:
        first = holder.execute("SELECT id FROM claim_task('product_resync', 'w1', 1)").fetchall()
        assert first == [(2,)]  # claimed, not yet committed
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            other = pool.submit(q, leases.claim, "product_resync", "w2", 5, lease_s=defaults.TASK_LEASE_S)
            # w2 picks task 1 (task 2 is locked), and its update waits on w1's uncommitted claim
            time.sleep(0.5)
            holder.commit()
            assert other.result(timeout=20) == []  # falls back row by row: the store is busy
    finally:
        holder.close()
    assert sql("SELECT id, status FROM worker_tasks ORDER BY id") == [(1, "pending"), (2, "running")]
