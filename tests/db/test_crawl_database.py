"""CrawlDatabase: a Scrapy extension fetched with crawler.get_extension, one per crawler."""

from __future__ import annotations

from scrapy.utils.test import get_crawler

from cannaspider.db.crawl_database import CrawlDatabase
from tests.helpers import project_crawler


def test_the_crawl_database_is_the_crawlers_extension():
    crawler = project_crawler()
    store = CrawlDatabase.for_crawler(crawler)
    assert crawler.get_extension(CrawlDatabase) is store
    assert CrawlDatabase.for_crawler(crawler) is store
    assert not hasattr(crawler, "_cannaspider_store")


def test_a_crawler_without_the_extension_still_gets_one_store():
    crawler = get_crawler()
    assert crawler.get_extension(CrawlDatabase) is None
    assert CrawlDatabase.for_crawler(crawler) is CrawlDatabase.for_crawler(crawler)
    assert CrawlDatabase.for_crawler(get_crawler()) is not CrawlDatabase.for_crawler(crawler)
