"""The analytics_refresh spider, in process: refresh once without arguments; with queue=1, one
refresh per queued task, its durations in the task's result."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from cannaspider.analytics.refresh import VIEWS
from cannaspider.spiders.analytics_refresh import AnalyticsRefreshSpider
from cannaspider.spiders.base import SpiderArgumentError
from cannaspider.tasks import queue
from tests.helpers import project_crawler


def run(db: str, **args) -> AnalyticsRefreshSpider:
    crawler = project_crawler(AnalyticsRefreshSpider, DATABASE_URL=db, TASK_LISTEN=False)
    spider = AnalyticsRefreshSpider.from_crawler(crawler, **args)
    crawler.spider = spider

    async def consume():
        assert [item async for item in spider.start()] == []  # no request, no item

    asyncio.run(consume())
    return spider


def test_without_arguments_it_refreshes_every_view_once(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE analytics_refreshes, analytics_product_daily, analytics_product_days, analytics_roll_state"
        )
    spider = run(db)
    stats = spider.crawler.stats.get_stats()
    for view in VIEWS:
        assert f"analytics/{view}/duration_ms" in stats and stats[f"analytics/{view}/rows"] == 0
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM analytics_refreshes").fetchone() == (len(VIEWS),)


def test_with_queue_it_completes_each_task_with_the_durations(db):
    task = asyncio.run(_enqueue(db))
    run(db, queue="1")
    with psycopg.connect(db) as conn:
        status, result = conn.execute("SELECT status, result FROM worker_tasks WHERE id = %s", (task,)).fetchone()
    assert status == "completed"
    assert [v["view"] for v in result["views"]] == list(VIEWS)
    assert all(isinstance(v["duration_ms"], int) for v in result["views"])


async def _enqueue(db: str) -> int:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        return (await queue.enqueue(conn, "analytics_refresh")).task.id


def test_a_bad_argument_is_one_clear_line():
    with pytest.raises(SpiderArgumentError, match="unknown argument dispensary_id"):
        AnalyticsRefreshSpider(dispensary_id="3")
    with pytest.raises(SpiderArgumentError, match="follow must be 0 or 1"):
        AnalyticsRefreshSpider(follow="maybe")
