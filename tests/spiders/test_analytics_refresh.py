"""The analytics_refresh spider, in process: without arguments it drains its queue as every role
does (one refresh per queued task, its durations in the task's result; none without a task); with
once=1, one refresh without a task."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from cannaspider.analytics.refresh import VIEWS
from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT
from cannaspider.spiders import analytics_refresh
from cannaspider.spiders.analytics_refresh import AnalyticsRefreshSpider
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.units.arguments import SpiderArgumentError
from cannaspider.units.lifecycle import UNITS_CLOSED_STAT
from tests.helpers import project_crawler


def run(db: str, _settings: dict | None = None, **args) -> AnalyticsRefreshSpider:
    crawler = project_crawler(AnalyticsRefreshSpider, DATABASE_URL=db, TASK_LISTEN=False, **(_settings or {}))
    spider = AnalyticsRefreshSpider.from_crawler(crawler, **args)
    crawler.spider = spider

    async def consume():
        assert [item async for item in spider.start()] == []  # no request, no item

    asyncio.run(consume())
    return spider


def test_with_once_it_refreshes_every_view_once(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE analytics_refreshes, analytics_product_daily, analytics_product_days, analytics_roll_state"
        )
    spider = run(db, once="1")
    stats = spider.crawler.stats.get_stats()
    for view in VIEWS:
        assert f"analytics/{view}/duration_ms" in stats and stats[f"analytics/{view}/rows"] == 0
    assert stats["cannaspider/units_closed"] == 1 and "cannaspider/units_incomplete" not in stats  # the one unit
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM analytics_refreshes").fetchone() == (len(VIEWS),)


def test_without_arguments_it_drains_and_completes_each_task_with_the_durations(db):
    """As `scrapy schedule --scrapyd` starts it: the day's task completed by the one refresh."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE analytics_refreshes")
    task = asyncio.run(_enqueue(db))
    run(db)
    with psycopg.connect(db) as conn:
        status, attempts, result = conn.execute(
            "SELECT status, attempts, result FROM worker_tasks WHERE id = %s", (task,)
        ).fetchone()
        refreshed = conn.execute("SELECT count(*) FROM analytics_refreshes").fetchone()
    assert (status, attempts) == ("completed", 1) and refreshed == (len(VIEWS),)
    assert [v["view"] for v in result["views"]] == list(VIEWS)
    assert all(isinstance(v["duration_ms"], int) for v in result["views"])


async def _enqueue(db: str, max_attempts: int = queue.DEFAULT_MAX_ATTEMPTS) -> int:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        return (await queue.enqueue(conn, "analytics_refresh", max_attempts=max_attempts)).task.id


def test_a_bad_argument_is_one_clear_line():
    with pytest.raises(SpiderArgumentError, match="unknown argument dispensary_id"):
        AnalyticsRefreshSpider(dispensary_id="3")
    with pytest.raises(SpiderArgumentError, match="follow must be 1 or 0"):
        AnalyticsRefreshSpider(follow="maybe")
    with pytest.raises(SpiderArgumentError, match="once=1 refreshes once without the queue"):
        AnalyticsRefreshSpider(once="1", follow="1")


def test_with_nothing_queued_it_refreshes_nothing(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("TRUNCATE analytics_refreshes")
    stats = run(db).crawler.stats
    assert stats.get_value("analytics/refreshes") is None
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM analytics_refreshes").fetchone() == (0,)


def test_any_exception_fails_the_task_and_the_drain_goes_on(db, monkeypatch):
    """Not only database errors: whatever a refresh raises fails its task (the attempt counted),
    `failed` once its attempts are used up, and the drain ends instead of dying in start()."""

    async def broken(conn, *settings):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(analytics_refresh, "refresh_all", broken)
    task = asyncio.run(_enqueue(db, max_attempts=2))
    spider = run(db, _settings={"TASK_RETRY_BACKOFF_S": 0, "TASK_RETRY_BACKOFF_MAX_S": 0})
    with psycopg.connect(db) as conn:
        status, attempts, error = conn.execute(
            "SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (task,)
        ).fetchone()
    assert (status, attempts, error) == ("failed", 2, "attempt 2/2: RecursionError: maximum recursion depth exceeded")
    # the exit counts the two failed attempts once, as the drain's tasks not completed (as for every
    # role), not a second time as units incomplete
    drain = TaskDrain.of(spider.crawler)
    assert drain is not None and (drain.claimed, drain.completed, drain.failed) == (2, 0, 2)
    assert spider.crawler.stats.get_value(UNITS_INCOMPLETE_STAT) is None


def test_without_the_queue_a_failed_refresh_is_counted_for_the_exit(db, monkeypatch):
    async def broken(conn, *settings):
        raise RuntimeError("boom")

    monkeypatch.setattr(analytics_refresh, "refresh_all", broken)
    stats = run(db, once="1").crawler.stats
    assert stats.get_value(UNITS_INCOMPLETE_STAT) == 1 and stats.get_value(UNITS_CLOSED_STAT) == 1
