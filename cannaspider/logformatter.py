"""Log formatter: a menu crawl scrapes tens of thousands of products, and Scrapy's per-item
"Scraped from …" DEBUG line (the whole item, repr'd) costs more than writing the item does.
Items are skipped from the log unless LOG_SCRAPED_ITEMS is on; everything else is Scrapy's."""

from __future__ import annotations

from typing import Any

from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.logformatter import LogFormatter, LogFormatterResult
from twisted.python.failure import Failure


class QuietItemsLogFormatter(LogFormatter):
    def __init__(self, log_items: bool = False):
        self.log_items = log_items

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> QuietItemsLogFormatter:
        return cls(crawler.settings.getbool("LOG_SCRAPED_ITEMS"))

    # None: Scrapy logs nothing for the item (scrapy/core/scraper.py checks for it)
    def scraped(  # type: ignore[override]
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        return super().scraped(item, response, spider) if self.log_items else None
