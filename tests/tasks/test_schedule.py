"""The schedule: which stores and states get tasks, and idempotence (twice, and two at once)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import psycopg
import pytest
from scrapy.settings import Settings

from cannaspider.tasks import queue, roles, schedule
from cannaspider.tasks.roles import TaskInputError
from cannaspider.tasks.schedule import ScheduleConfig
from tests.helpers import month_without_partitions, project_settings
from tests.tasks.conftest import add_store

CONFIG = ScheduleConfig(discovery_states=("AZ", "MI"))


def stores_by_case(sql):
    return {
        "stale": add_store(sql, "stale", last_crawl_at="2020-01-01"),
        "never": add_store(sql, "never crawled"),
        "fresh": add_store(sql, "fresh", last_crawl_at="now()"),
        "disabled": add_store(sql, "disabled", enabled=False, last_crawl_at="2020-01-01"),
        "unresolved": add_store(sql, "unresolved", platform_id=None),
    }


def test_resync_due_stores_discovery_per_state_and_analytics(q, sql):
    cases = stores_by_case(sql)
    report = q(schedule.tick, CONFIG)
    assert report.created == {"product_resync": 2, "store_discovery": 2, "analytics_refresh": 1}
    assert sorted(r[0] for r in sql("SELECT dispensary_id FROM worker_tasks WHERE role = 'product_resync'")) == sorted(
        [cases["stale"], cases["never"]]
    )
    assert sorted(r[0] for r in sql("SELECT payload ->> 'state' FROM worker_tasks WHERE role = 'store_discovery'")) == [
        "AZ",
        "MI",
    ]
    assert {r[0] for r in sql("SELECT priority FROM worker_tasks")} == {0}
    assert q(schedule.tick, CONFIG).total == 0  # twice: nothing new


def test_a_store_with_product_work_queued_or_recently_tried_is_left_alone(q, sql):
    cases = stores_by_case(sql)
    q(queue.enqueue, "product_discovery", dispensary_id=cases["never"])  # chained first crawl pending
    q(schedule.tick, CONFIG)
    [(stale_task,)] = sql("SELECT id FROM worker_tasks WHERE role = 'product_resync'")
    # its resync fails for good: not retried on every tick, only once the period has passed
    sql("UPDATE worker_tasks SET status = 'failed' WHERE id = %s", (stale_task,))
    assert q(schedule.tick, CONFIG).created["product_resync"] == 0
    sql("UPDATE worker_tasks SET created_at = now() - interval '5 hours' WHERE id = %s", (stale_task,))
    assert q(schedule.tick, CONFIG).created["product_resync"] == 1


def test_daily_tasks_come_back_after_a_day(q, sql):
    q(schedule.tick, CONFIG)
    sql("UPDATE worker_tasks SET status = 'completed'")
    assert q(schedule.tick, CONFIG).total == 0
    sql("UPDATE worker_tasks SET created_at = now() - interval '25 hours'")
    assert q(schedule.tick, CONFIG).created == {"product_resync": 0, "store_discovery": 2, "analytics_refresh": 1}


def test_two_schedulers_at_once_create_each_task_once(db, sql):
    for i in range(200):
        add_store(sql, f"s{i}", last_crawl_at="2020-01-01")
    n = 4
    barrier = threading.Barrier(n)

    def scheduler(_):
        async def main():
            async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
                barrier.wait()
                return await schedule.tick(conn, CONFIG)

        return asyncio.run(main())

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        reports = list(pool.map(scheduler, range(n)))
    assert sum(r.created["product_resync"] for r in reports) == 200
    assert sum(r.total for r in reports) == 203
    assert sql("SELECT count(*), count(DISTINCT (role, dispensary_id, payload)) FROM worker_tasks") == [(203, 203)]


def test_the_schedule_requeues_expired_leases_of_every_role(q, sql):
    q(queue.enqueue, "analytics_refresh")
    q(queue.claim, "analytics_refresh", "dead", lease_s=0)
    assert q(schedule.tick, ScheduleConfig()).requeued == 1


def test_config_from_settings_checks_the_states():
    config = ScheduleConfig.from_settings(
        Settings({**project_settings(), "SCHEDULE_DISCOVERY_STATES": "az,Michigan,AZ"})
    )
    assert config.discovery_states == ("AZ", "MI") and config.every_s["product_resync"] == 4 * 3600
    with pytest.raises(TaskInputError, match="unknown US state 'Atlantis'"):
        ScheduleConfig.from_settings(Settings({**project_settings(), "SCHEDULE_DISCOVERY_STATES": ["Atlantis"]}))


def test_finished_tasks_past_the_retention_are_pruned(q, sql):
    """The queue does not grow forever: finished tasks older than TASK_RETENTION_DAYS go, in
    bounded batches; pending and running ones, and young finished ones, stay; a child's link to
    a pruned parent becomes NULL."""
    config = ScheduleConfig(retention_s=7 * 86400, prune_batch=2)
    old = [q(queue.enqueue, "analytics_refresh").task.id for _ in range(1)]
    statuses = ("completed", "failed", "cancelled", "pending", "young")
    ids = {status: add_store(sql, status, last_crawl_at="now()") for status in statuses}
    tasks = {status: q(queue.enqueue, "product_resync", dispensary_id=d).task.id for status, d in ids.items()}
    for status in ("completed", "failed", "cancelled"):
        sql(
            "UPDATE worker_tasks SET status = %s, updated_at = now() - interval '8 days' WHERE id = %s",
            (status, tasks[status]),
        )
    sql("UPDATE worker_tasks SET status = 'completed' WHERE id = %s", (tasks["young"],))
    sql("UPDATE worker_tasks SET parent_task_id = %s WHERE id = %s", (tasks["completed"], tasks["pending"]))
    sql("UPDATE worker_tasks SET status = 'completed', updated_at = now() - interval '8 days' WHERE id = %s", old)
    pruned = q(schedule.tick, config).pruned + q(schedule.tick, config).pruned
    assert pruned == 4  # two per tick
    left = dict(sql("SELECT id, parent_task_id FROM worker_tasks WHERE role = 'product_resync'"))
    assert set(left) == {tasks["pending"], tasks["young"]} and left[tasks["pending"]] is None
    assert q(schedule.tick, config).pruned == 0


def test_the_retention_must_outlast_every_schedule_period():
    with pytest.raises(TaskInputError, match="TASK_RETENTION_DAYS"):
        ScheduleConfig.from_settings(Settings({**project_settings(), "TASK_RETENTION_DAYS": 0.5}))
    assert (
        ScheduleConfig.from_settings(Settings({**project_settings(), "TASK_RETENTION_DAYS": 30})).retention_s
        == 30 * 86400
    )


def test_a_stores_product_work_is_its_role_and_the_roles_of_its_kind():
    """RESYNC's "product work" comes from the spiders: product_discovery's spider is a product_resync one."""
    assert sorted(roles.same_work("product_resync")) == ["product_discovery", "product_resync"]
    assert roles.same_work("product_discovery") == ("product_discovery",)
    assert roles.same_work("entry_point_discovery") == ("entry_point_discovery",)  # a store target, other work


def test_a_tick_makes_the_partitions_of_this_month_and_the_next(q, sql, db):
    """The schedule's tick is a timer every fleet has: a month's end never finds its partition
    missing while crawls run (db/partitions.py)."""
    with month_without_partitions(db) as name:
        report = q(schedule.tick, CONFIG)
        assert report.partitions == 1 and sql("SELECT to_regclass(%s)::text", (name,)) == [(name,)]
        assert q(schedule.tick, CONFIG).partitions == 0
