"""The unit lifecycle's ways of running units without requests (units/lifecycle.py), in process:
`run()` over the `-a` targets (Units without a task) as over the queue's tasks, and
`cannot_work()`, the refuse / wait / fatal choice of a node that cannot work."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest
import scrapy
from scrapy.exceptions import CloseSpider

from cannaspider.crawl_outcome import FATAL_ERROR_STAT, UNITS_INCOMPLETE_STAT
from cannaspider.tasks import queue
from cannaspider.tasks.queue import TaskResult
from cannaspider.units.lifecycle import UNITS_CLOSED_STAT, Outcome, Unit, UnitLifecycle, Wait
from tests.helpers import project_crawler

ROLE = "analytics_refresh"  # a role with no target: its tasks need nothing in the database


class _Spider(scrapy.Spider):
    name = "lifecycle_test"


def lifecycle(**settings) -> UnitLifecycle:
    crawler = project_crawler(_Spider, TASK_LISTEN=False, **settings)
    crawler.spider = _Spider.from_crawler(crawler)
    return UnitLifecycle.of(crawler)


def stat(units: UnitLifecycle, name: str) -> object:
    assert units.crawler.stats is not None
    return units.crawler.stats.get_value(name)


def test_targets_run_side_by_side_and_the_failed_ones_are_counted_incomplete():
    units = lifecycle()
    targets = [Unit(data={"n": n}) for n in range(3)]
    running: set[int] = set()
    overlapped: list[int] = []

    async def work(unit: Unit) -> Outcome:
        running.add(unit.data["n"])
        await asyncio.sleep(0.05)
        overlapped.append(len(running))
        running.discard(unit.data["n"])
        if unit.data["n"] == 1:
            return "it failed", False
        if unit.data["n"] == 2:
            raise RecursionError("maximum recursion depth exceeded")
        return TaskResult(), False

    failed = asyncio.run(units.run(ROLE, False, work, targets=targets))
    assert failed == targets[1:]
    assert max(overlapped) == 3  # all three at once
    assert all(unit.closed for unit in targets) and [u.failed for u in targets] == [False, True, True]
    assert stat(units, UNITS_CLOSED_STAT) == 3 and stat(units, UNITS_INCOMPLETE_STAT) == 2
    assert units.drain is None  # targets: the queue is not touched


def test_one_at_a_time_runs_the_targets_in_order():
    units = lifecycle()
    order: list[str] = []

    async def work(unit: Unit) -> Outcome:
        order.append(f"start {unit.data['n']}")
        await asyncio.sleep(0.01)
        order.append(f"end {unit.data['n']}")
        return TaskResult(), False

    targets = [Unit(data={"n": n}) for n in range(2)]
    assert asyncio.run(units.run(ROLE, False, work, targets=targets, one_at_a_time=True)) == []
    assert order == ["start 0", "end 0", "start 1", "end 1"]
    assert stat(units, UNITS_CLOSED_STAT) == 2 and stat(units, UNITS_INCOMPLETE_STAT) is None


def test_without_targets_the_queue_tasks_are_the_units(db, sql):
    task_id = asyncio.run(_enqueue(db))
    units = lifecycle(DATABASE_URL=db)
    seen: list[Unit] = []

    async def work(unit: Unit) -> Outcome:
        seen.append(unit)
        return TaskResult(extra={"done": True}), False

    async def main() -> list[Unit]:
        try:
            return await units.run(ROLE, False, work)
        finally:
            assert units.drain is not None
            await units.drain.close()

    assert asyncio.run(main()) == []  # failed targets only: a task's failure is its drain's to count
    assert [unit.task.id for unit in seen if unit.task is not None] == [task_id]
    assert sql("SELECT status, result->>'done' FROM worker_tasks") == [("completed", "true")]
    assert stat(units, UNITS_CLOSED_STAT) == 1


def test_a_node_that_cannot_work_on_its_targets_stops_with_its_fatal_error(caplog):
    units = lifecycle()
    with caplog.at_level(logging.INFO), pytest.raises(CloseSpider) as closed:
        asyncio.run(units.cannot_work("no way to work", "cannot_work", role=ROLE, draining=False, follow=False))
    assert closed.value.reason == "cannot_work"
    assert stat(units, FATAL_ERROR_STAT) == "no way to work"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == ["no way to work"]
    assert "queued" not in caplog.text  # not draining: no batch refused


def test_draining_it_fails_a_batch_first_and_without_a_wait_stops_even_with_follow(db, sql):
    asyncio.run(_enqueue(db))
    units = lifecycle(DATABASE_URL=db, TASK_RETRY_BACKOFF_S=3600)
    with pytest.raises(CloseSpider):
        asyncio.run(units.cannot_work("nothing to send it to", "unconfigured", role=ROLE, draining=True, follow=True))
    assert sql("SELECT status, attempts, error FROM worker_tasks") == [
        ("pending", 1, "attempt 1/5: nothing to send it to")
    ]
    assert stat(units, FATAL_ERROR_STAT) == "nothing to send it to"


def test_a_follow_drainer_waits_until_ready_then_goes_on(db, sql, caplog):
    asyncio.run(_enqueue(db))
    units = lifecycle(DATABASE_URL=db, TASK_RETRY_BACKOFF_S=3600)
    answers = iter([False, False, True])
    asked: list[bool] = []

    async def ready() -> bool:
        asked.append(answer := next(answers))
        return answer

    wait = Wait("it is ready (asked every 0.01 s)", ready, 0.01)
    with caplog.at_level(logging.INFO):
        asyncio.run(units.cannot_work("not yet", "never", role=ROLE, draining=True, follow=True, wait=wait))
    assert asked == [False, False, True]
    assert stat(units, FATAL_ERROR_STAT) is None  # the crawl goes on: no fatal error
    assert f"the {ROLE} queue waits until it is ready (asked every 0.01 s)" in caplog.text
    assert sql("SELECT attempts, error FROM worker_tasks") == [(1, "attempt 1/5: not yet")]


async def _enqueue(db: str) -> int:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        return (await queue.enqueue(conn, ROLE)).task.id
