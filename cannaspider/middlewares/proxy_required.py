"""A Dutchie spider refuses to start when the `proxies` table has no active proxy: one line in
the log, the crawl's fatal error (the crawl command's exit code) and no request sent. A spider
draining its queue first fails one batch of its tasks with that reason (retried after the
backoff), so the queue shows why nothing runs; with `-a follow=1` it then waits, re-reading the
table every STEALTH_OUTAGE_POLL_S, and starts draining once a proxy is active (a long-running
drainer restarted by a supervisor would otherwise fail a batch at each restart). There is no
switch that turns proxies off (see docs/stealth.md)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.db.crawl_store import FATAL_ERROR_STAT
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.spiders.base import DutchieSpider
from cannaspider.stealth.pool import ProxyPool
from cannaspider.units.lifecycle import UnitLifecycle

logger = logging.getLogger(__name__)


NO_PROXY_MESSAGE = (
    "no active proxy in the proxies table: Dutchie is only crawled through proxies "
    "(add one with `scrapy proxies add http://user:password@host:port`, or `scrapy proxies enable ID`)"
)


class ProxyRequiredMiddleware:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyRequiredMiddleware:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        if isinstance(self.crawler.spider, DutchieSpider) and not os.environ.get("SCRAPY_CHECK"):
            try:
                records = await ProxyPool.for_crawler(self.crawler).refresh()
            except DatabaseSetupError as exc:
                records, message = [], str(exc)
            else:
                message = NO_PROXY_MESSAGE
            if not records:
                logger.error("%s", message)
                spider = self.crawler.spider
                if spider.draining:
                    await UnitLifecycle.of(self.crawler).refuse(spider.name, message)
                if spider.draining and spider.params.follow:
                    await self._wait_for_proxies(spider.name)
                    async for item_or_request in start:
                        yield item_or_request
                    return
                assert self.crawler.stats is not None
                if self.crawler.stats.get_value(FATAL_ERROR_STAT) is None:
                    self.crawler.stats.set_value(FATAL_ERROR_STAT, message)
                raise CloseSpider("no_active_proxy")
        async for item_or_request in start:
            yield item_or_request

    async def _wait_for_proxies(self, role: str) -> None:
        pool = ProxyPool.for_crawler(self.crawler)
        poll_s = self.crawler.settings.getfloat("STEALTH_OUTAGE_POLL_S")
        logger.warning("the %s queue waits until a proxy is active (the table is read every %g s)", role, poll_s)
        while True:
            await asyncio.sleep(poll_s)
            try:
                records = await pool.refresh()
            except Exception as exc:  # noqa: BLE001 - the database restarts: ask again at the next poll
                logger.warning("proxy pool: could not read the proxies table: %s", first_line(exc))
                continue
            if records:
                logger.warning("proxy pool: %d active proxy(ies): the %s queue starts", len(records), role)
                return
