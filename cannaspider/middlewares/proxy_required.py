"""A Dutchie spider refuses to start when the `proxies` table has no active proxy: one line in
the log, the crawl's fatal error (the crawl command's exit code) and no request sent. A spider
draining its queue first fails one batch of its tasks with that reason (retried after the
backoff), so the queue shows why nothing runs. There is no switch that turns proxies off (see
docs/stealth.md)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator

from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.db.crawl_store import FATAL_ERROR_STAT
from cannaspider.db.errors import DatabaseSetupError
from cannaspider.stealth.pool import ProxyPool

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

    async def process_start(self, start: AsyncIterator) -> AsyncIterator:
        from cannaspider.spiders.base import DutchieSpider  # the spiders import the middlewares' settings

        if isinstance(self.crawler.spider, DutchieSpider) and not os.environ.get("SCRAPY_CHECK"):
            try:
                records = await ProxyPool.for_crawler(self.crawler).refresh()
            except DatabaseSetupError as exc:
                records, message = [], str(exc)
            else:
                message = NO_PROXY_MESSAGE
            if not records:
                logger.error("%s", message)
                if self.crawler.spider.draining:
                    await self._fail_queued(self.crawler.spider, message)
                assert self.crawler.stats is not None
                if self.crawler.stats.get_value(FATAL_ERROR_STAT) is None:
                    self.crawler.stats.set_value(FATAL_ERROR_STAT, message)
                raise CloseSpider("no_active_proxy")
        async for item_or_request in start:
            yield item_or_request

    @staticmethod
    async def _fail_queued(spider, message: str) -> None:
        from cannaspider.spiders.draining import open_drain

        try:
            drain = await open_drain(spider, spider.role, follow=False)
            failed = await drain.fail_claimable(message)
        except Exception as exc:  # noqa: BLE001 - the refusal itself must still happen
            logger.warning("could not fail the queued %s tasks: %s", spider.role, exc)
        else:
            logger.info("%d queued %s task(s) failed: no active proxy", failed, spider.role)
