"""A role spider refuses to start when the `proxies` table has no active proxy: one line in
the log, the crawl's fatal error (the crawl command's exit code) and no request sent. A spider
draining its queue first fails one batch of its tasks with that reason (retried after the
backoff), so the queue shows why nothing runs; with `-a follow=1` it then waits, re-reading the
table every STEALTH_OUTAGE_POLL_S, and starts draining once a proxy is active (a long-running
drainer restarted by a supervisor would otherwise fail a batch at each restart). There is no
switch that turns proxies off (see docs/stealth.md). That refuse / wait / fatal choice is the unit
lifecycle's (UnitLifecycle.cannot_work, as for crawl_onpage without Firecrawl); this middleware
says only whether a proxy is active. A contract check (`scrapy check`: CONTRACT_MODE) sends its
requests itself and is let through."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from scrapy.crawler import Crawler

from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.spiders.base import PlatformSpider
from cannaspider.stealth.pool import ProxyPool
from cannaspider.units.lifecycle import UnitLifecycle, Wait

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
        spider = self.crawler.spider
        if isinstance(spider, PlatformSpider) and not self.crawler.settings.getbool("CONTRACT_MODE"):
            try:
                records = await ProxyPool.for_crawler(self.crawler).refresh()
            except DatabaseSetupError as exc:
                records, message = [], str(exc)
            else:
                message = NO_PROXY_MESSAGE
            if not records:  # refuse / wait / the crawl's fatal error: the lifecycle's choice
                poll_s = self.crawler.settings.getfloat("STEALTH_OUTAGE_POLL_S")
                wait = Wait(f"a proxy is active (the table is read every {poll_s:g} s)", self._proxy_active, poll_s)
                await UnitLifecycle.of(self.crawler).cannot_work(
                    message,
                    "no_active_proxy",
                    role=spider.name,
                    draining=spider.draining,
                    follow=spider.params.follow,
                    wait=wait,
                )
        async for item_or_request in start:
            yield item_or_request

    async def _proxy_active(self) -> bool:
        try:
            records = await ProxyPool.for_crawler(self.crawler).refresh()
        except Exception as exc:  # noqa: BLE001 - the database restarts: ask again at the next poll
            logger.warning("proxy pool: could not read the proxies table: %s", first_line(exc))
            return False
        if records:
            assert self.crawler.spider is not None
            logger.warning(
                "proxy pool: %d active proxy(ies): the %s queue starts", len(records), self.crawler.spider.name
            )
        return bool(records)
