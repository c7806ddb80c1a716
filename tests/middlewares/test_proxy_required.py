"""ProxyRequiredMiddleware in process (middlewares/proxy_required.py): without an active proxy a
Dutchie crawl of targets stops before its start() is read (the lifecycle's cannot_work); a
contract check (CONTRACT_MODE) is let through without asking the database. The queue's refusal
and the follow drainer's wait: tests/middlewares/test_stealth.py, tests/stealth/test_stopping.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from scrapy.exceptions import CloseSpider

from cannaspider.crawl_outcome import FATAL_ERROR_STAT
from cannaspider.middlewares.proxy_required import NO_PROXY_MESSAGE, ProxyRequiredMiddleware
from cannaspider.spiders.products import ProductSpider
from tests.helpers import project_crawler


def middleware_of(**settings) -> ProxyRequiredMiddleware:
    crawler = project_crawler(ProductSpider, TASK_LISTEN=False, **settings)
    crawler.spider = ProductSpider.from_crawler(crawler, dispensary_id="1")  # a target: not draining
    return ProxyRequiredMiddleware.from_crawler(crawler)


def started(middleware: ProxyRequiredMiddleware) -> list[str]:
    """What the crawl's start() gives through the middleware, "start" first once it was read."""
    read: list[str] = []

    async def start() -> AsyncIterator[str]:
        read.append("start")
        yield "request"

    async def main() -> list[str]:
        return [out async for out in middleware.process_start(start())]

    out = asyncio.run(main())
    return read + out


def test_without_an_active_proxy_the_crawl_stops_before_its_start_is_read(db):
    middleware = middleware_of(DATABASE_URL=db)  # the emptied database: no proxy
    read: list[str] = []
    with pytest.raises(CloseSpider) as closed:
        read = started(middleware)
    assert closed.value.reason == "no_active_proxy" and read == []
    assert middleware.crawler.stats.get_value(FATAL_ERROR_STAT) == NO_PROXY_MESSAGE


def test_a_contract_check_is_let_through_without_the_database():
    # a port nothing listens on: reading the proxies table would raise
    middleware = middleware_of(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none", CONTRACT_MODE=True)
    assert started(middleware) == ["start", "request"]
    assert middleware.crawler.stats.get_value(FATAL_ERROR_STAT) is None
