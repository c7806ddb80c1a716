"""The product writer's rows fenced by the task's lease: a worker whose lease was lost (paused past
it, the task re-queued and claimed by another worker) writes no product row or snapshot of that
store afterwards, while the rows written under its lease stand."""

from __future__ import annotations

import asyncio

import psycopg

from cannaspider.tasks import queue
from tests.pipelines.test_writers import Chain, dispensary, raw  # noqa: F401 - the fixture


async def _claim(db: str, worker: str) -> queue.Task:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        [task] = await queue.claim(conn, "product_resync", worker, lease_s=600)
        return task


def test_a_worker_that_lost_its_lease_writes_no_more_rows_of_the_store(dispensary, sql, db):  # noqa: F811
    async def scenario() -> dict:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
            await queue.enqueue(conn, "product_resync", dispensary_id=dispensary)
        stale = await _claim(db, "stale-worker")
        chain = Chain(batch_size=3)
        run = await chain.store.start_run(dispensary, "product_resync", stale.lease)
        for i in range(3):  # one batch written under the lease
            await chain.feed(raw(i, dispensary, run))
        await chain.products.flush()
        # the worker is paused past its lease: the task is re-queued and another worker claims it
        sql("UPDATE worker_tasks SET lease_expires_at = now() - interval '1 second'")
        taken = await _claim(db, "other-worker")
        assert taken.id == stale.id
        for i in range(3, 6):  # the stale worker resumes with more rows of the same store
            await chain.feed(raw(i, dispensary, run, epoch=1))
        await chain.products.flush()
        await chain.close()
        return chain.crawler.stats.get_stats()

    stats = asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products")[0][0] == 3
    assert sql("SELECT count(*) FROM product_snapshots")[0][0] == 3
    assert stats["cannaspider/products_written"] == 3 and stats["cannaspider/products_fenced"] == 3


def test_rows_of_a_target_without_a_task_are_not_fenced(dispensary, sql):  # noqa: F811
    async def scenario() -> None:
        chain = Chain()
        await chain.crawl(dispensary, list(range(4)))
        await chain.close()

    asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products")[0][0] == 4
