"""Batch writers and crawl completion, built with get_crawler and run on the real database."""

from __future__ import annotations

import asyncio
import inspect

import psycopg
import pytest
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import DatabaseSetupError
from cannaspider.items import CrawlCompletion, RawProduct
from cannaspider.pipelines.crawl_completion import CrawlCompletionPipeline
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.sandbox.catalog import _product
from tests.project import project_crawler


def raw(index: int, dispensary_id: int, run_id: int, epoch: int = 0) -> RawProduct:
    return RawProduct(dispensary_id, run_id, _product(42, "pipeline-store", index, epoch, "http://127.0.0.1:1"))


async def settle(result):
    """process_item returns the item, or an awaitable when its batch is full (as Scrapy allows)."""
    return await result if inspect.isawaitable(result) else result


class Chain:
    """normalize → products (and their snapshots) → completion, as Scrapy would run them."""

    def __init__(self, batch_size: int = 1000, **settings):
        self.crawler = project_crawler(DB_WRITE_BATCH_SIZE=batch_size, **settings)
        self.normalize = NormalizeProductPipeline.from_crawler(self.crawler)
        self.products = ProductWriterPipeline.from_crawler(self.crawler)
        self.completion = CrawlCompletionPipeline.from_crawler(self.crawler)
        self.store = CrawlStore.for_crawler(self.crawler)

    async def feed(self, item):
        try:
            item = self.normalize.process_item(item)
        except DropItem:
            return None
        item = await settle(self.products.process_item(item))
        try:
            return self.completion.process_item(item)
        except DropItem:
            await self.completion.close_spider()  # the store closes in the background: wait for it
            return None

    async def crawl(
        self,
        dispensary_id: int,
        indices: list[int],
        *,
        complete: bool = True,
        epoch: int = 0,
        extra_seen: tuple[str, ...] = (),
    ) -> None:
        run_id = await self.store.start_run(dispensary_id, "product_resync")
        items = [raw(i, dispensary_id, run_id, epoch) for i in indices]
        for item in items:
            await self.feed(item)
        seen = [i.raw["_id"] for i in items] + list(extra_seen)
        await self.feed(CrawlCompletion(dispensary_id, run_id, complete, len(items), 1, seen_product_ids=seen))

    async def close(self):
        await self.products.close_spider()
        await self.store.close()


@pytest.fixture
def dispensary(db, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db)
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('P', %s) RETURNING id", ("c" * 24,)
        ).fetchone()[0]


def state(sql, d):
    return {
        r[0]: (r[1], r[2])
        for r in sql(
            "SELECT provider_product_id, consecutive_misses, stock_status FROM store_products WHERE dispensary_id = %s",
            (d,),
        )
    }


def test_batches_are_written_during_the_crawl_and_the_rest_on_close(dispensary, sql):
    async def settle_writers(chain):
        writer = chain.products
        while writer.inflight and not writer.inflight.done():  # background writes (they chain)
            await writer.inflight

    async def scenario():
        chain = Chain(batch_size=4)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        for i in range(10):
            await chain.feed(raw(i, dispensary, run_id))
        await settle_writers(chain)
        during = sql("SELECT count(*) FROM store_products")[0][0]
        for i in range(10, 12):  # fewer than a batch: they wait in the buffer…
            await chain.feed(raw(i, dispensary, run_id))
        await settle_writers(chain)
        still = sql("SELECT count(*) FROM store_products")[0][0]
        await chain.close()  # …until the crawl closes
        return during, still, chain.crawler.stats.get_value("cannaspider/products_written")

    during, still, written = asyncio.run(scenario())
    assert during >= 4 and still == during
    assert written == 12
    assert sql("SELECT count(*) FROM store_products")[0][0] == 12
    assert sql("SELECT count(*) FROM store_product_snapshots")[0][0] == 12


def test_oos_rules_apply_only_to_complete_crawls(dispensary, sql):
    ids = [_product(42, "pipeline-store", i, 0, "http://127.0.0.1:1")["_id"] for i in range(6)]

    async def scenario():
        chain = Chain()
        await chain.crawl(dispensary, list(range(6)))
        await chain.crawl(dispensary, [0, 1, 2], complete=False)  # incomplete: nothing missing
        after_incomplete = state(sql, dispensary)
        for _ in range(3):
            await chain.crawl(dispensary, [0, 1, 2])  # 3, 4, 5 miss three times
        after_three = state(sql, dispensary)
        await chain.crawl(dispensary, [0, 1, 2, 3])  # 3 comes back
        await chain.close()
        return after_incomplete, after_three

    after_incomplete, after_three = asyncio.run(scenario())
    assert all(v == (0, "in_stock") for v in after_incomplete.values())
    assert [after_three[i] for i in ids] == [(0, "in_stock")] * 3 + [(3, "oos")] * 3
    final = state(sql, dispensary)
    assert final[ids[3]] == (0, "in_stock") and final[ids[4]] == (3, "oos")
    runs = sql("SELECT status, products_missed, products_marked_oos FROM crawl_runs ORDER BY id")
    assert runs == [
        ("complete", 0, 0),
        ("incomplete", 0, 0),
        ("complete", 3, 0),
        ("complete", 3, 0),
        ("complete", 3, 3),
        ("complete", 0, 0),
    ]


def test_a_product_in_the_feed_that_failed_normalization_is_not_counted_missing(dispensary, sql):
    async def scenario():
        chain = Chain()
        await chain.crawl(dispensary, [0, 1])
        bad_id = _product(42, "pipeline-store", 1, 0, "http://127.0.0.1:1")["_id"]
        for _ in range(3):
            # product 1 is in the feed but unusable this time: it must not gather misses
            await chain.crawl(dispensary, [0], extra_seen=(bad_id,))
        await chain.close()

    asyncio.run(scenario())
    assert {v for v in state(sql, dispensary).values()} == {(0, "in_stock")}


def test_completion_waits_for_products_still_in_flight_and_gives_up_safely(dispensary, sql):
    async def scenario():
        chain = Chain(CRAWL_COMPLETION_WAIT_S=0.3)
        await chain.crawl(dispensary, [0, 1, 2])
        run_id = await chain.store.start_run(dispensary, "product_resync")
        await chain.feed(raw(0, dispensary, run_id))
        # the spider says it yielded 3 products but only one ever arrives
        await chain.feed(CrawlCompletion(dispensary, run_id, True, 3, 1, seen_product_ids=[]))
        await chain.close()

    asyncio.run(scenario())
    assert all(v == (0, "in_stock") for v in state(sql, dispensary).values())
    status, error = sql("SELECT status, error FROM crawl_runs ORDER BY id DESC LIMIT 1")[0]
    assert status == "incomplete" and "only 1 of 3 products were written" in error


def test_database_outage_keeps_buffered_rows_and_the_crawl_marks_nothing_missing(dispensary, sql, monkeypatch, db):
    async def scenario():
        chain = Chain(batch_size=2)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        await chain.store.close()
        monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")  # the server goes away
        await chain.feed(raw(0, dispensary, run_id))
        await settle(chain.products.process_item(chain.normalize.process_item(raw(1, dispensary, run_id))))
        await chain.products.inflight  # the background write fails: the server is gone
        assert len(chain.products.buffer) == 2  # kept, not dropped
        with pytest.raises(DatabaseSetupError):
            await chain.products.flush()
        assert len(chain.products.buffer) == 2
        monkeypatch.setenv("DATABASE_URL", db)  # the server is back
        await chain.close()

    asyncio.run(scenario())
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s", (dispensary,))[0][0] == 2


def test_a_refused_batch_writes_neither_products_nor_snapshots_and_closes_the_crawl_incomplete(dispensary, sql):
    async def scenario():
        chain = Chain(CRAWL_COMPLETION_WAIT_S=60)
        run_id = await chain.store.start_run(dispensary, "product_resync")
        items = [raw(i, dispensary, run_id) for i in range(3)]
        items[1].raw = {**items[1].raw, "recPrices": [1e15] * len(items[1].raw["Options"])}  # > numeric(12, 2)
        for item in items:
            await chain.feed(item)
        started = asyncio.get_running_loop().time()
        seen = [i.raw["_id"] for i in items]
        await chain.feed(CrawlCompletion(dispensary, run_id, True, 3, 1, seen_product_ids=seen))
        waited = asyncio.get_running_loop().time() - started
        await chain.close()
        return waited

    waited = asyncio.run(scenario())
    assert waited < 30  # settled at once, not after the completion's 60 s wait
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s", (dispensary,))[0][0] == 0
    assert sql("SELECT count(*) FROM store_product_snapshots WHERE dispensary_id = %s", (dispensary,))[0][0] == 0
    status, error = sql("SELECT status, error FROM crawl_runs ORDER BY id DESC LIMIT 1")[0]
    assert status == "incomplete" and "refused by the database" in error


def test_each_product_gets_a_snapshot_per_crawl_with_that_crawls_prices(dispensary, sql):
    async def scenario():
        chain = Chain(batch_size=1000)
        await chain.crawl(dispensary, [0, 1, 2], epoch=0)
        await chain.crawl(dispensary, [0, 1, 2], epoch=1)  # two crawls can share a batch: both snapshots stay
        await chain.close()

    asyncio.run(scenario())
    snaps = sql(
        "SELECT crawl_run_id, provider_product_id, price_rec, is_in_stock FROM store_product_snapshots "
        "WHERE dispensary_id = %s ORDER BY crawl_run_id, provider_product_id",
        (dispensary,),
    )
    runs = [r[0] for r in sql("SELECT id FROM crawl_runs ORDER BY id")]
    assert len(snaps) == 6 and sorted({s[0] for s in snaps}) == runs and all(s[3] for s in snaps)
    current = dict(
        sql("SELECT provider_product_id, price_rec FROM store_products WHERE dispensary_id = %s", (dispensary,))
    )
    assert {s[1]: s[2] for s in snaps if s[0] == runs[1]} == current  # the product row is the latest crawl
