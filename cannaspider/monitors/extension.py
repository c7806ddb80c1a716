"""Runs the crawl-health suites (SPIDERMON_SPIDER_CLOSE_MONITORS) when the spider closes and, every
HEALTH_CHECK_PERIOD_S while it runs, on the stretch of the crawl since the previous check
(window.py), with the same monitors, reports and alerts: a `-a follow=1` drainer that runs for
weeks says within minutes that its store crawls go incomplete (docs/health.md).

Spidermon's own extension does the same through a runner that logs each failed check's full
traceback at ERROR: unredacted text (a check's message may quote a fatal error that carries a
URL with credentials) and a traceback in the log of a crawl that did not crash. This one runs the
suites with Spidermon's plain MonitorRunner, which records results without logging; the suite's
action (alerts.py) then says what failed, once, redacted. A periodic check runs in a thread: its
monitors query the database and its alert may wait on a webhook, which the crawl must not."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object
from spidermon import MonitorSuite
from spidermon.runners import MonitorRunner

from cannaspider.db.errors import first_line
from cannaspider.monitors.spidermon_settings import refuse_unsupported
from cannaspider.monitors.window import StatsWindow

logger = logging.getLogger(__name__)

OWN_LINES = ("log_count/ERROR",)  # what a check adds to the stats itself (its alert line)


class CrawlHealth:
    def __init__(self, crawler: Crawler):
        # before NotConfigured: with the suite off, a SPIDERMON_* setting acts no more than with it on
        refuse_unsupported(crawler.settings)
        if not crawler.settings.getbool("SPIDERMON_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.suites = [load_object(path) for path in crawler.settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS")]
        for suite in self.suites:
            if not (isinstance(suite, type) and issubclass(suite, MonitorSuite)):
                raise TypeError(f"SPIDERMON_SPIDER_CLOSE_MONITORS: {suite!r} is not a spidermon MonitorSuite")
        self.period_s = crawler.settings.getfloat("HEALTH_CHECK_PERIOD_S")
        self.window = StatsWindow()
        self._periodic: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlHealth:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        if self.period_s > 0:
            self._periodic = asyncio.ensure_future(self._every_period(spider))

    async def _every_period(self, spider: Spider) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                await self.check_stretch(spider)
            except Exception as exc:  # noqa: BLE001 - a check that cannot run now runs again next period
                logger.error("crawl health: the periodic check failed: %s: %s", type(exc).__name__, first_line(exc))

    async def check_stretch(self, spider: Spider) -> bool:
        """Check the stretch since the previous check, if anything happened in it; True if checked."""
        assert self.crawler.stats is not None
        stats = dict(self.crawler.stats.get_stats())
        stretch = self.window.stretch(stats)
        if not self.window.active(stretch):
            return False
        self.window.advance(stats, datetime.now(UTC))
        await asyncio.to_thread(self.run_suites, stretch, spider)
        # the check's own alert is an ERROR line: not one the next stretch should count against the crawl
        self.window.absorb(self.crawler.stats.get_stats(), OWN_LINES)
        return True

    def spider_closed(self, spider: Spider) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        assert self.crawler.stats is not None
        self.run_suites(self.window.stretch(self.crawler.stats.get_stats()), spider)

    def run_suites(self, stats: dict[str, Any], spider: Spider) -> None:
        data = {"stats": stats, "stats_history": [], "crawler": self.crawler, "spider": spider}
        for suite_class in self.suites:
            result = MonitorRunner().run(suite_class(crawler=self.crawler), **data)
            for action in result.monitors_finished_action_results:
                if str(action.status) == "ERROR":  # the report or the alert itself failed
                    lines = (action.error or "").strip().splitlines()
                    logger.error("crawl health: %s failed: %s", action.action.name, lines[-1] if lines else "?")
