"""Completing and failing a task on a real PostgreSQL: the result and crawl run, the backoff and its jitter;
chaining: the follow-up tasks a completion creates, once."""

from __future__ import annotations

from cannaspider import settings as defaults
from cannaspider.tasks.queue import Backoff, TaskResult, enqueuing, leases, outcomes
from tests.tasks.conftest import add_store, add_stores, row, start_run


def test_a_task_completed_after_an_expired_lease_keeps_no_stale_error(q, sql):
    d = add_store(sql)
    q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    [dead] = q(leases.claim, "product_resync", "dead-worker", lease_s=0)
    [again] = q(leases.claim, "product_resync", "w2", lease_s=defaults.TASK_LEASE_S)
    assert "lease expired" in again.error
    q(outcomes.complete, again.lease, TaskResult(products=5))
    assert row(sql, dead.id, "status, error") == ("completed", None)


def test_complete_records_the_result_and_links_the_crawl_run(q, sql):
    d = add_store(sql)
    q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    [task] = q(leases.claim, "product_resync", "w1", lease_s=defaults.TASK_LEASE_S)
    run = start_run(sql, d)
    q(outcomes.complete, task.lease, TaskResult(pages=3, products=250, new=4, missed=2, oos=1, crawl_run_id=run))
    status, result, crawl_run_id, completed_at = row(sql, task.id, "status, result, crawl_run_id, completed_at")
    assert status == "completed" and completed_at is not None and crawl_run_id == run
    assert result == {"pages": 3, "products": 250, "new": 4, "missed": 2, "oos": 1, "crawl_run_id": run}
    assert sql("SELECT task_id FROM crawl_runs WHERE id = %s", (run,))[0][0] == task.id


def test_failure_backs_off_exponentially_with_jitter_then_stays_failed(q, sql):
    d = add_store(sql)
    task = q(enqueuing.enqueue, "product_resync", dispensary_id=d, max_attempts=3).task
    backoff = Backoff(base_s=100, cap_s=150, jitter=outcomes.TASK_JITTER)
    delays = []
    for attempt in (1, 2, 3):
        sql("UPDATE worker_tasks SET run_after = now() WHERE id = %s", (task.id,))  # skip the wait
        [claimed] = q(leases.claim, "product_resync", "w1", lease_s=defaults.TASK_LEASE_S)
        run = start_run(sql, d, task_id=None)
        after = q(outcomes.fail, claimed.lease, f"GraphQL error\nwith detail {attempt}", run, backoff)
        assert after.attempts == attempt and after.crawl_run_id == run
        if attempt < 3:
            assert after.status == "pending" and after.error == f"attempt {attempt}/3: GraphQL error"
            delays.append((after.run_after - after.updated_at).total_seconds())
    assert 50 <= delays[0] <= 100  # base · 2^0 · [0.5, 1)
    assert 75 <= delays[1] <= 150  # base · 2^1 = 200, capped at 150, times [0.5, 1)
    status, attempts, error, crawl_run_id = row(sql, task.id)
    assert (status, attempts, error) == ("failed", 3, "attempt 3/3: GraphQL error")
    assert sql("SELECT task_id FROM crawl_runs WHERE id = %s", (crawl_run_id,))[0][0] == task.id
    assert q(leases.claim, "product_resync", "w1", lease_s=defaults.TASK_LEASE_S) == []


def test_jitter_spreads_tasks_that_fail_together(q, sql):
    stores = add_stores(sql, 20)
    for d in stores:
        q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    claimed = q(leases.claim, "product_resync", "w1", 20, lease_s=defaults.TASK_LEASE_S)
    q(
        outcomes.fail_many,
        [(t.lease, "blocked", None) for t in claimed],
        Backoff(base_s=1000, cap_s=6 * 3600, jitter=outcomes.TASK_JITTER),
    )
    run_after = {r[0] for r in sql("SELECT run_after FROM worker_tasks")}
    assert len(run_after) == 20


# -- chaining ------------------------------------------------------------------------------------------


def test_store_discovery_chains_entry_point_discovery_for_new_stores_only(q, sql):
    old = add_store(sql, "old", state="AZ")
    task = q(enqueuing.enqueue, "store_discovery", state="AZ").task
    [claimed] = q(leases.claim, "store_discovery", "w1", lease_s=defaults.TASK_LEASE_S)
    new = [add_store(sql, f"new{i}", state="AZ", platform_id=None) for i in range(3)]
    add_store(sql, "elsewhere", state="MI")  # created meanwhile by another state's discovery
    q(outcomes.complete, claimed.lease, TaskResult())
    chained = sql("SELECT role, dispensary_id, priority, parent_task_id FROM worker_tasks WHERE id <> %s", (task.id,))
    assert sorted(chained) == [("entry_point_discovery", d, 10, task.id) for d in new]
    assert old not in {c[1] for c in chained}


def test_store_discovery_chains_the_stores_it_names(q, sql):
    a, b = add_stores(sql, 2)
    q(enqueuing.enqueue, "store_discovery", state="AZ")
    [claimed] = q(leases.claim, "store_discovery", "w1", lease_s=defaults.TASK_LEASE_S)
    q(outcomes.complete, claimed.lease, TaskResult(new_dispensary_ids=[b]))
    assert sql("SELECT role, dispensary_id FROM worker_tasks WHERE role <> 'store_discovery'") == [
        ("entry_point_discovery", b)
    ]


def test_entry_point_chains_product_discovery_on_success_and_product_discovery_chains_nothing(q, sql):
    resolved = add_store(sql, "resolved")
    unresolved = add_store(sql, "unresolved", platform_id=None)
    for d in (resolved, unresolved):
        q(enqueuing.enqueue, "entry_point_discovery", dispensary_id=d)
    held = [t.lease for t in q(leases.claim, "entry_point_discovery", "w1", 5, lease_s=defaults.TASK_LEASE_S)]
    assert q(outcomes.complete_many, [(lease, TaskResult()) for lease in held]) == []
    [(role, d, priority, parent)] = sql(
        "SELECT role, dispensary_id, priority, parent_task_id FROM worker_tasks WHERE role = 'product_discovery'"
    )
    assert (role, d, priority) == ("product_discovery", resolved, 10) and parent is not None
    [discovery] = q(leases.claim, "product_discovery", "w1", lease_s=defaults.TASK_LEASE_S)
    q(outcomes.complete, discovery.lease, TaskResult(products=10))
    assert sql("SELECT count(*) FROM worker_tasks WHERE status IN ('pending', 'running')")[0][0] == 0


def test_completing_twice_with_the_same_lease_is_not_a_lost_lease_and_chains_once(q, sql):
    resolved = add_store(sql)
    q(enqueuing.enqueue, "entry_point_discovery", dispensary_id=resolved)
    [task] = q(leases.claim, "entry_point_discovery", "w1", lease_s=defaults.TASK_LEASE_S)
    q(outcomes.complete, task.lease, TaskResult())
    q(outcomes.complete, task.lease, TaskResult())  # a retry after the reply was lost
    assert sql("SELECT count(*) FROM worker_tasks WHERE role = 'product_discovery'")[0][0] == 1
