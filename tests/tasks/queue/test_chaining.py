"""Chaining on a real PostgreSQL: the follow-up tasks a completion creates, once."""

from __future__ import annotations

from cannaspider import settings as defaults
from cannaspider.tasks.queue import TaskResult, enqueuing, leases, outcomes
from tests.tasks.conftest import add_store, add_stores


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
