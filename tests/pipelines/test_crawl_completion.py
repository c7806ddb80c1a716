"""Crawl completion on the real database: the seed's miss rules and the OOS guard that keeps an
emptied or collapsed menu from being read as evidence (README, "Crawl correctness")."""

from __future__ import annotations

import asyncio
import inspect
import logging

import psycopg
import pytest
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.items import CrawlCompletion, RawProduct
from cannaspider.pipelines.crawl_completion import CrawlCompletionPipeline
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.sandbox.catalog import _product
from tests.helpers import project_crawler

BASE = "http://127.0.0.1:1"


def product(index: int) -> dict:
    return _product(42, "guard-store", index, 0, BASE)


class Pipelines:
    """normalize → products → completion, built as Scrapy builds them."""

    def __init__(self, db_url: str, **settings):
        self.crawler = project_crawler(DATABASE_URL=db_url, **settings)
        self.normalize = NormalizeProductPipeline.from_crawler(self.crawler)
        self.products = ProductWriterPipeline.from_crawler(self.crawler)
        self.completion = CrawlCompletionPipeline.from_crawler(self.crawler)
        self.store = CrawlStore.for_crawler(self.crawler)

    async def crawl(self, dispensary_id: int, indices: list[int]) -> int:
        """A complete crawl that saw the products `indices`; returns its run id."""
        run_id = await self.store.start_run(dispensary_id, "product_resync")
        raws = [product(i) for i in indices]
        for raw in raws:
            item = self.normalize.process_item(RawProduct(dispensary_id, run_id, raw))
            result = self.products.process_item(item)
            if inspect.isawaitable(result):
                await result
        completion = CrawlCompletion(dispensary_id, run_id, True, len(raws), 1, [r["_id"] for r in raws])
        with pytest.raises(DropItem):
            self.completion.process_item(completion)
        await self.completion.close_spider()
        return run_id

    async def close(self) -> None:
        await self.products.close_spider()
        await self.store.close()


@pytest.fixture
def dispensary(db, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db)
    with psycopg.connect(db, autocommit=True) as conn:
        return conn.execute(
            "INSERT INTO dispensaries (name, platform_dispensary_id) VALUES ('G', %s) RETURNING id", ("d" * 24,)
        ).fetchone()[0]


def misses(sql, dispensary) -> list[int]:
    return [r[0] for r in sql("SELECT consecutive_misses FROM store_products WHERE dispensary_id = %s", (dispensary,))]


def run_row(sql, run_id) -> tuple:
    return sql("SELECT status, suspect, suspect_reason, products_missed FROM crawl_runs WHERE id = %s", (run_id,))[0]


def twice(db, dispensary, first: list[int], second: list[int], **settings) -> int:
    async def scenario():
        pipelines = Pipelines(db, **settings)
        await pipelines.crawl(dispensary, first)
        run_id = await pipelines.crawl(dispensary, second)
        await pipelines.close()
        return run_id

    return asyncio.run(scenario())


def test_an_empty_menu_on_a_complete_crawl_is_suspect_and_counts_no_misses(db, dispensary, sql, caplog):
    caplog.set_level(logging.WARNING)
    run_id = twice(db, dispensary, list(range(20)), [], OOS_GUARD_MIN_SHARE=0.5)
    assert misses(sql, dispensary) == [0] * 20
    status, suspect, reason, missed = run_row(sql, run_id)
    assert (status, suspect, missed) == ("complete", True, 0)
    assert reason.startswith("saw 0 of the 20 products in stock before this crawl") and "0.5" in reason
    assert "SUSPECT" in caplog.text and "-s OOS_GUARD_MIN_SHARE=0" in caplog.text


def test_a_collapsed_menu_is_suspect_and_its_seen_products_stay_in_stock(db, dispensary, sql):
    # 8 of 20 seen (40 %), plus new products that must not dilute the share
    run_id = twice(db, dispensary, list(range(20)), list(range(8)) + list(range(100, 130)), OOS_GUARD_MIN_SHARE=0.5)
    assert set(misses(sql, dispensary)) == {0}
    assert run_row(sql, run_id)[:2] == ("complete", True)
    assert "saw 8 of the 20" in run_row(sql, run_id)[2]


def test_a_normal_turnover_counts_misses_and_is_not_suspect(db, dispensary, sql):
    run_id = twice(db, dispensary, list(range(20)), list(range(10, 20)), OOS_GUARD_MIN_SHARE=0.5)  # exactly half
    assert sorted(misses(sql, dispensary)) == [0] * 10 + [1] * 10
    assert run_row(sql, run_id) == ("complete", False, None, 10)


def test_a_share_of_zero_turns_the_guard_off_for_a_store_that_closed(db, dispensary, sql):
    run_id = twice(db, dispensary, list(range(20)), [], OOS_GUARD_MIN_SHARE=0)
    assert misses(sql, dispensary) == [1] * 20
    assert run_row(sql, run_id) == ("complete", False, None, 20)


def test_the_first_crawl_of_a_store_is_not_guarded(db, dispensary, sql):
    async def scenario():
        pipelines = Pipelines(db, OOS_GUARD_MIN_SHARE=0.5)
        run_id = await pipelines.crawl(dispensary, [])
        await pipelines.close()
        return run_id

    assert run_row(sql, asyncio.run(scenario())) == ("complete", False, None, 0)


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="OOS_GUARD_MIN_SHARE must be within"):
        CrawlCompletionPipeline.from_crawler(project_crawler(OOS_GUARD_MIN_SHARE=50))
