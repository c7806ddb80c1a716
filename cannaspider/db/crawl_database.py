"""The database side of a crawl: a Scrapy extension shared by the spiders and pipelines of one crawler.

CrawlDatabase is enabled in EXTENSIONS (settings.py); components get it with
CrawlDatabase.for_crawler(crawler). It owns the async connection pool, opened when the spider opens:
a database that cannot be reached or is not migrated closes the crawl at once with one line (the
crawl command exits non-zero). It holds the crawler's other shared database state, each in its
own module: the write ledger (db/write_ledger.py), which lets a store's close wait for its rows,
and the liveness of the crawl_runs this process opened (db/crawl_runs.py), which it runs when
the pool opens (the runs of dead processes) and when the crawl closes (the runs still open).
"""

from __future__ import annotations

import asyncio
import logging
import weakref

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.crawl_outcome import record_fatal_error
from cannaspider.db import migrations, partitions
from cannaspider.db.connection import database_url, open_async_pool
from cannaspider.db.crawl_runs import CrawlRuns
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.db.write_ledger import WriteLedger
from cannaspider.shutdown import on_reactor_shutdown
from cannaspider.tasks.queue.model import Lease

logger = logging.getLogger(__name__)

# databases of crawlers whose settings do not enable the extension (components built directly on a
# bare get_crawler(), as in tests): still one per crawler
_UNREGISTERED: weakref.WeakKeyDictionary[Crawler, CrawlDatabase] = weakref.WeakKeyDictionary()


class CrawlDatabase:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.settings = crawler.settings
        self.pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Lock | None = None
        self.ledger = WriteLedger()
        self.runs = CrawlRuns(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlDatabase:
        database = cls(crawler)
        crawler.signals.connect(database.spider_opened, signal=signals.spider_opened)
        # after every pipeline's close_spider (which flush their buffers and close their stores)
        crawler.signals.connect(database.spider_closed, signal=signals.spider_closed)
        on_reactor_shutdown(database._close_on_shutdown)
        return database

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlDatabase:
        """The crawler's database side: the enabled extension, else (a bare test crawler) one of its own.

        Available once the crawler's extensions are built: in components' from_crawler and at
        run time, not in a spider's __init__ (Scrapy builds the spider first)."""
        database = crawler.get_extension(cls)
        if database is None:
            database = _UNREGISTERED.get(crawler)
            if database is None:
                database = _UNREGISTERED[crawler] = cls.from_crawler(crawler)
        return database

    def fail(self, message: str) -> None:
        """Record the crawl's fatal error (the first one wins), logged as one line."""
        logger.error("%s", message)
        record_fatal_error(self.crawler.stats, message)

    # -- lifecycle -----------------------------------------------------------------------
    async def spider_opened(self, spider: Spider) -> None:
        if self.settings.getbool("CONTRACT_MODE"):
            return  # `scrapy check` only calls callbacks: the database is opened when one needs it
        try:
            await self.open()
        except DatabaseSetupError as exc:
            self.fail(str(exc))
            raise CloseSpider("database_unavailable") from None
        self.runs.start_heartbeat(lambda: self.pool)

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        await self.runs.stop_heartbeat()
        try:
            if self.runs.open_ids and self.pool is not None:
                await self.runs.close_open(self.pool, reason)
        except psycopg.Error as exc:
            self.fail(
                f"the database was lost during the crawl ({first_line(exc)}): {len(self.runs.open_ids)} crawl "
                "run(s) stay 'running' until the next crawl marks them failed, and rows of this crawl may be "
                "missing (the feed has what the crawl saw)"
            )
        finally:
            self.runs.closed.set()
            await self.close()

    async def _close_on_shutdown(self) -> None:
        """A forced shutdown (no spider_closed): the runs still open are closed as incomplete."""
        if not self.runs.open_ids or self.pool is None:
            return
        try:
            await self.runs.close_open(self.pool, "forced shutdown")
        except psycopg.Error as exc:
            logger.error("could not close %d open crawl run(s): %s", len(self.runs.open_ids), first_line(exc))

    async def open(self) -> AsyncConnectionPool:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self.pool is None:
                url = await asyncio.to_thread(database_url, self.settings)
                pool = await open_async_pool(
                    url,
                    max_size=self.settings.getint("DB_POOL_MAX_SIZE"),
                    timeout=self.settings.getfloat("DB_POOL_TIMEOUT_S"),
                )
                try:
                    async with pool.connection() as conn:
                        await self._check_migrated(conn)
                        await partitions.ensure_ahead(conn)
                        await self.runs.fail_dead(conn)
                except BaseException:
                    await pool.close()
                    raise
                self.pool = pool
        return self.pool

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def _check_migrated(self, conn: psycopg.AsyncConnection) -> None:
        try:
            rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
        except psycopg.errors.UndefinedTable:
            raise DatabaseSetupError("the database has no schema yet: run `scrapy migrate`") from None
        missing = migrations.not_applied({row[0] for row in rows}, self.settings)
        if missing:
            names = ", ".join(mig.path.name for mig in missing)
            raise DatabaseSetupError(f"the database lacks migration(s) {names}: run `scrapy migrate`")

    # -- crawl runs ----------------------------------------------------------------------
    async def start_run(self, dispensary_id: int, role: str, lease: Lease | None = None) -> int:
        """A store's crawl run; `lease`: the task's it crawls for, which fences its rows' writes."""
        return await self.runs.start(await self.open(), dispensary_id, role, lease)
