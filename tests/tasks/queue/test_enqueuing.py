"""enqueue on a real PostgreSQL: an identical task is reused (also under concurrency), bad input is one clear error;
the duplicate-task rule is written once, in the queue, and every statement that queues tasks uses it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cannaspider import settings as defaults
from cannaspider.tasks.queue import TaskResult, enqueuing, leases, outcomes
from cannaspider.tasks.queue.model import COLUMNS
from cannaspider.tasks.roles import TargetNotFound, TaskInputError
from tests.helpers import ROOT
from tests.tasks.conftest import add_store, add_stores


def test_an_identical_task_is_reused_and_made_more_urgent(q, sql):
    d = add_store(sql)
    first = q(enqueuing.enqueue, "product_resync", dispensary_id=d, priority=0)
    again = q(enqueuing.enqueue, "product_resync", dispensary_id=d, priority=0)
    urgent = q(enqueuing.enqueue, "product_resync", dispensary_id=d, priority=20)
    other_role = q(enqueuing.enqueue, "product_discovery", dispensary_id=d)
    assert first.created and not again.created and not urgent.created and other_role.created
    assert first.task.id == again.task.id == urgent.task.id != other_role.task.id
    assert urgent.task.priority == 20
    az = q(enqueuing.enqueue, "store_discovery", state="az")
    assert az.task.payload == {"state": "AZ"} and az.task.dispensary_id is None
    assert not q(enqueuing.enqueue, "store_discovery", state="Arizona").created
    assert q(enqueuing.enqueue, "store_discovery", state="MI").created
    assert q(enqueuing.enqueue, "analytics_refresh").created and not q(enqueuing.enqueue, "analytics_refresh").created
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 5


def test_a_running_task_is_reused_too_but_a_finished_one_is_not(q, sql):
    d = add_store(sql)
    task = q(enqueuing.enqueue, "product_resync", dispensary_id=d).task
    [claimed] = q(leases.claim, "product_resync", "w1", lease_s=defaults.TASK_LEASE_S)
    assert q(enqueuing.enqueue, "product_resync", dispensary_id=d).task.id == task.id
    q(outcomes.complete, claimed.lease, TaskResult())
    after = q(enqueuing.enqueue, "product_resync", dispensary_id=d)
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
                            enqueuing.ENQUEUE.replace(f"RETURNING {COLUMNS}, (xmax = 0) AS created", "RETURNING id"),
                            {
                                "role": "product_resync",
                                "platform": "dutchie",
                                "dispensary_id": d,
                                "payload": Jsonb({}),
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
    d = add_store(sql)
    workers = 6
    barrier = threading.Barrier(workers)

    def one(_):
        async def main():
            async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
                barrier.wait()
                return await enqueuing.enqueue(conn, "product_resync", dispensary_id=d)

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
        q(enqueuing.enqueue, role, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


@pytest.mark.parametrize(
    ("role", "kwargs", "field"),
    [
        ("product_resync", {"dispensary_id": 999}, "dispensary_id"),
        ("store_discovery", {"state": "XX"}, "state"),
        ("crawl_onpage", {"keyword_id": 5}, "keyword_id"),
    ],
)
def test_a_target_that_names_nothing_is_a_target_not_found(q, role, kwargs, field):
    """Well formed but naming nothing: a TargetNotFound (POST /api/tasks' 404) naming its field;
    a malformed target stays a plain TaskInputError (a 422)."""
    with pytest.raises(TargetNotFound) as err:
        q(enqueuing.enqueue, role, **kwargs)
    assert err.value.field == field
    with pytest.raises(TaskInputError) as malformed:
        q(enqueuing.enqueue, "product_resync", dispensary_id=-3)
    assert not isinstance(malformed.value, TargetNotFound)


def test_the_duplicate_task_rule_is_written_once_and_every_insert_uses_it():
    sources = {path.relative_to(ROOT).as_posix(): path.read_text() for path in (ROOT / "cannaspider").rglob("*.py")}
    rule = "ON CONFLICT (role, platform, dispensary_id, payload)"
    assert [path for path, text in sources.items() if rule in text] == ["cannaspider/tasks/queue/model.py"]
    inserts = sorted(path for path, text in sources.items() if "INSERT INTO worker_tasks" in text)
    assert inserts, "no statement queues a task?"
    for path in inserts:
        text = sources[path]
        assert "SKIP_DUPLICATE_TASK" in text or "ON_DUPLICATE_TASK" in text, f"{path} queues tasks without the rule"
