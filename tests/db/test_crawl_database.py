"""CrawlDatabase: a Scrapy extension fetched with crawler.get_extension, one per crawler; its pool,
which stops making each request wait once the database is found unreachable."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.utils.test import get_crawler

from cannaspider.db import migrations
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import DatabaseUnreachable
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


# -- a database that cannot be reached -----------------------------------------------------------------


def _rename(admin_url: str, src: str, dst: str) -> None:
    """A real outage for the crawl's pool: its connections cut, its database gone until renamed back."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (src,))
        conn.execute(f'ALTER DATABASE "{src}" RENAME TO "{dst}"')


def _queued(pool: AsyncConnectionPool) -> int:
    """Requests that have waited in the pool's queue for a connection so far."""
    return pool.get_stats().get("requests_queued", 0)


def test_once_the_database_is_unreachable_each_request_fails_at_once_until_it_is_back(empty_database, admin_url):
    migrations.apply(empty_database, log=lambda _: None)
    name = psycopg.conninfo.conninfo_to_dict(empty_database)["dbname"]
    away = f"{name[:50]}_away"  # a name is at most 63 bytes: a longer one is cut back to this one
    database = CrawlDatabase.for_crawler(project_crawler(DATABASE_URL=empty_database, DB_POOL_TIMEOUT_S=1))

    async def scenario() -> None:
        pool = await database.open()
        _rename(admin_url, name, away)
        try:
            # the first request waits its DB_POOL_TIMEOUT_S for a connection, as through a restart…
            with pytest.raises(PoolTimeout) as waited:
                async with pool.connection():
                    pass
            assert not isinstance(waited.value, DatabaseUnreachable)
            # …the server is found unreachable then: the requests after it are refused without waiting
            queued = _queued(pool)
            for _ in range(3):
                with pytest.raises(DatabaseUnreachable, match=f'database "{name}" does not exist'):
                    async with pool.connection():
                        pass
            assert _queued(pool) == queued
        finally:
            _rename(admin_url, away, name)
        # back: a request after the last failed attempt's answer is stale connects and is served
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while True:
            try:
                async with pool.connection() as conn:
                    assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
                break
            except PoolTimeout:  # refused, or the pool still reconnecting
                assert loop.time() < deadline, "the pool never served a connection again"
                await asyncio.sleep(0.2)
        await database.close()

    asyncio.run(scenario())


def test_a_pool_busy_with_its_connections_is_not_taken_for_an_unreachable_database(db):
    database = CrawlDatabase.for_crawler(project_crawler(DATABASE_URL=db, DB_POOL_MAX_SIZE=1, DB_POOL_TIMEOUT_S=0.5))

    async def scenario() -> None:
        pool = await database.open()
        async with pool.connection():  # the pool's only connection, held
            for _ in range(2):  # each request waits its timeout: none is refused at once
                queued = _queued(pool)
                with pytest.raises(PoolTimeout) as waited:
                    async with pool.connection():
                        pass
                assert not isinstance(waited.value, DatabaseUnreachable)
                assert _queued(pool) == queued + 1
        async with pool.connection() as conn:
            assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
        await database.close()

    asyncio.run(scenario())
