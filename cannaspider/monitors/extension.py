"""Runs the crawl-health suites (SPIDERMON_SPIDER_CLOSE_MONITORS) when the spider closes.

Spidermon's own extension does the same through a runner that logs each failed check's full
traceback at ERROR: unredacted text (a check's message may quote a fatal error that carries a
URL with credentials) and a traceback in the log of a crawl that did not crash. This one runs the
suites with Spidermon's plain MonitorRunner, which records results without logging; the suite's
action (alerts.py) then says what failed, once, redacted."""

from __future__ import annotations

import logging

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object
from spidermon import MonitorSuite
from spidermon.runners import MonitorRunner

logger = logging.getLogger(__name__)


class CrawlHealth:
    def __init__(self, crawler: Crawler):
        if not crawler.settings.getbool("SPIDERMON_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.suites = [load_object(path) for path in crawler.settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS")]
        for suite in self.suites:
            if not (isinstance(suite, type) and issubclass(suite, MonitorSuite)):
                raise TypeError(f"SPIDERMON_SPIDER_CLOSE_MONITORS: {suite!r} is not a spidermon MonitorSuite")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlHealth:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider: Spider) -> None:
        assert self.crawler.stats is not None
        data = {"stats": self.crawler.stats.get_stats(), "stats_history": [], "crawler": self.crawler, "spider": spider}
        for suite_class in self.suites:
            result = MonitorRunner().run(suite_class(crawler=self.crawler), **data)
            for action in result.monitors_finished_action_results:
                if str(action.status) == "ERROR":  # the report or the alert itself failed
                    lines = (action.error or "").strip().splitlines()
                    logger.error("crawl health: %s failed: %s", action.action.name, lines[-1] if lines else "?")
