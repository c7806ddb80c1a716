"""DirectCallItemPipelineManager: Scrapy's pipeline chain semantics, without a coroutine per step."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from scrapy.exceptions import DropItem, ScrapyDeprecationWarning
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.test import get_crawler
from twisted.internet.defer import succeed

from cannaspider.pipelines.item_processor import DirectCallItemPipelineManager


class Append:
    def __init__(self, mark: str):
        self.mark = mark

    def process_item(self, item):
        return item + [self.mark]


class AsyncAppend(Append):
    async def process_item(self, item):
        await asyncio.sleep(0)
        return item + [self.mark]


class FutureAppend(Append):
    def process_item(self, item):
        future = asyncio.get_running_loop().create_future()
        future.set_result(item + [self.mark])
        return future


class DeferredAppend(Append):
    def process_item(self, item):
        return succeed(item + [self.mark])


class DropOdd:
    def process_item(self, item):
        if len(item) % 2:
            raise DropItem("odd")
        return item


class LegacyWithSpider:
    def process_item(self, item, spider):
        return item + [spider.name]


def manager(*pipelines) -> DirectCallItemPipelineManager:
    crawler = get_crawler()
    return DirectCallItemPipelineManager(*pipelines, crawler=crawler)


def run(coro):
    return asyncio.run(coro)


def test_the_project_settings_select_it():
    # what Scrapy's Scraper does with the setting
    from scrapy.utils.misc import load_object
    from scrapy.utils.project import get_project_settings

    assert load_object(get_project_settings()["ITEM_PROCESSOR"]) is DirectCallItemPipelineManager


def test_synchronous_and_awaitable_results_chain_in_order():
    chain = manager(Append("a"), AsyncAppend("b"), FutureAppend("c"), Append("d"))
    assert run(chain.process_item_async([])) == ["a", "b", "c", "d"]
    # the same again: the cache of plain result types must not skip awaiting an awaitable
    assert run(chain.process_item_async(["x"])) == ["x", "a", "b", "c", "d"]


def test_a_deferred_still_works_and_still_warns():
    async def go():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = await manager(DeferredAppend("a"), Append("b")).process_item_async([])
        return result, caught

    result, caught = run(go())
    assert result == ["a", "b"]
    assert any(
        issubclass(w.category, ScrapyDeprecationWarning) and "returned a Deferred" in str(w.message) for w in caught
    )


def test_drop_item_stops_the_chain():
    chain = manager(Append("a"), DropOdd(), Append("never"))
    with pytest.raises(DropItem):
        run(chain.process_item_async([]))
    assert run(chain.process_item_async(["x"])) == ["x", "a", "never"]


def test_pipelines_that_take_a_spider_get_scrapys_own_chain():
    async def go():
        crawler = get_crawler()
        crawler.spider = crawler._create_spider("legacy")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScrapyDeprecationWarning)
            chain = DirectCallItemPipelineManager(Append("a"), LegacyWithSpider(), crawler=crawler)
        return await chain.process_item_async([])

    assert run(go()) == ["a", "legacy"]


class OpensWithSpider(Append):
    def open_spider(self, spider):
        pass


class OptionalSpider(Append):
    def process_item(self, item, spider=None):
        return item + [self.mark]


def test_a_required_spider_argument_anywhere_gets_scrapys_own_chain(monkeypatch):
    """Decided from the methods' signatures, as Scrapy decides which to pass a spider to."""
    stock_calls = []

    async def stock_chain(self, item):
        stock_calls.append(item)
        return item + ["stock"]

    monkeypatch.setattr(ItemPipelineManager, "process_item_async", stock_chain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        chain = manager(Append("a"), OpensWithSpider("b"))
    assert not chain.direct_calls
    assert run(chain.process_item_async([])) == ["stock"]
    assert stock_calls == [[]]
    assert manager(Append("a"), OptionalSpider("b")).direct_calls  # an optional one is never passed


def test_with_it_the_direct_calls_are_used():
    assert manager(Append("a")).direct_calls
