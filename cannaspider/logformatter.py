"""Log formatter: a menu crawl scrapes tens of thousands of products, and Scrapy's per-item
"Scraped from …" DEBUG line (the whole item, repr'd) costs more than writing the item does.
Items are skipped from the log unless LOG_SCRAPED_ITEMS is on; everything else is Scrapy's."""

from __future__ import annotations

from scrapy.logformatter import LogFormatter


class QuietItemsLogFormatter(LogFormatter):
    def __init__(self, log_items: bool = False):
        self.log_items = log_items

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getbool("LOG_SCRAPED_ITEMS"))

    def scraped(self, item, response, spider):
        return super().scraped(item, response, spider) if self.log_items else None
