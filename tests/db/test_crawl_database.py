"""CrawlDatabase: a Scrapy extension fetched with crawler.get_extension, one per crawler."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.utils.test import get_crawler

from cannaspider.db.crawl_database import CrawlDatabase
from tests.helpers import project_crawler, project_settings


def test_the_crawl_database_is_the_crawlers_extension():
    crawler = project_crawler()
    store = CrawlDatabase.for_crawler(crawler)
    assert crawler.get_extension(CrawlDatabase) is store
    assert CrawlDatabase.for_crawler(crawler) is store
    assert not hasattr(crawler, "_cannaspider_store")


def test_each_crawler_has_its_own():
    assert CrawlDatabase.for_crawler(project_crawler()) is not CrawlDatabase.for_crawler(project_crawler())


def test_a_crawler_without_the_extension_is_told_how_to_enable_it():
    # no per-crawler registry beside Scrapy's: a crawler built without EXTENSIONS has no database
    crawler = get_crawler()
    assert crawler.get_extension(CrawlDatabase) is None
    with pytest.raises(RuntimeError, match=r"CrawlDatabase is not enabled in this crawler's EXTENSIONS"):
        CrawlDatabase.for_crawler(crawler)


def test_before_the_extensions_are_built_scrapy_says_so():
    # Scrapy builds the extensions after the spider: a spider's __init__ cannot find them
    crawler = Crawler(Spider, project_settings())  # settings not applied yet: as while its spider is built
    with pytest.raises(RuntimeError, match=r"extension manager"):
        CrawlDatabase.for_crawler(crawler)
