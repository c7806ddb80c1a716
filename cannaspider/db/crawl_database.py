"""The database side of a crawl: a Scrapy extension shared by the spiders and pipelines of one crawler.

CrawlDatabase is enabled in EXTENSIONS (settings.py); components get it with
CrawlDatabase.for_crawler(crawler). It owns the async connection pool, opened when the spider opens:
a database that cannot be reached or is not migrated closes the crawl at once with one line (the
crawl command exits non-zero). A database lost later is the pool's to notice (db/connection.py,
FailFastPool): its requests then fail at once instead of each waiting DB_POOL_TIMEOUT_S, and the
crawl ends with "the database was lost during the crawl" when it closes. It holds the crawler's
other shared database state: the write ledger (`WriteLedger`, below), which lets a store's close
wait for its rows, and the liveness of the crawl_runs this process opened (db/crawl_runs.py), which
it runs when the pool opens (the runs of dead processes) and when the crawl closes (the runs still
open).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.crawl_outcome import record_fatal_error
from cannaspider.db import migrations, partitions
from cannaspider.db.connection import database_url, open_async_pool
from cannaspider.db.crawl_runs import CrawlRuns, TaskLease
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.extensions import extension
from cannaspider.shutdown import on_reactor_shutdown

logger = logging.getLogger(__name__)


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
        """The crawler's database side (the extension EXTENSIONS enables). Available once the
        crawler's extensions are built: in components' from_crawler and at run time, not in a
        spider's __init__ (Scrapy builds the spider first)."""
        return extension(crawler, cls)

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
    async def start_run(self, dispensary_id: int, role: str, lease: TaskLease | None = None) -> int:
        """A store's crawl run; `lease`: the task's it crawls for, which fences its rows' writes."""
        return await self.runs.start(await self.open(), dispensary_id, role, lease)


# -- the write ledger -------------------------------------------------------------------------------
# What each store's crawl has written, so that its close can wait for its rows.
#
# The spider yields a store's products long before the product writer has committed them: it
# buffers rows and writes them in the background (pipelines/batch_writer.py). The completion step
# (units/crawl_close.py) waits on this ledger until every product the spider yielded is accounted for
# (written or rejected) and every accounted row is settled, and only then calls the crawl complete;
# only a complete crawl has its misses judged (units/crawl_close.py's rules).
# Judging earlier would mark missing the products still in a buffer.
# One ledger per crawler, held by its CrawlDatabase, since the pipelines that write
# and the unit that closes are different components.


@dataclass
class RunLedger:
    accounted: int = 0  # products written to the buffers or rejected by normalization
    written: int = 0  # rows the product writer has settled: committed, or refused for good
    inserted: int = 0  # of which were new
    rejected: int = 0
    refused: int = 0  # of the written rows, those the database refused for their values (not stored)
    refused_reason: str = ""  # the first refusal's reason: the incomplete crawl's error
    # set when a waiter's condition may have become true; account() only wakes the waiter once the
    # count it waits for is reached (it runs once per product: waking on each would cost more)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    accounted_target: int | None = None


class WriteLedger:
    def __init__(self) -> None:
        self.runs: dict[object, RunLedger] = defaultdict(RunLedger)
        # (dispensary_id, run id) whose rows a batch lost, with the reason its crawl is incomplete
        self.failed_runs: dict[tuple[Any, ...], str] = {}
        self.flushers: list[Callable[[], Awaitable[None]]] = []  # writers register their flush here
        # a product writer is in ITEM_PIPELINES: without one no store's rows ever arrive to wait for
        self.products_writer = False

    def account(self, run_key: object, n: int = 1, *, rejected: bool = False) -> None:
        ledger = self.runs[run_key]
        ledger.accounted += n
        if rejected:
            ledger.rejected += n
        if ledger.accounted_target is not None and ledger.accounted >= ledger.accounted_target:
            ledger.changed.set()

    def refuse(self, run_key: object, rows: int, reason: str) -> None:
        """Settled rows of the run that were not stored: its crawl cannot be complete."""
        ledger = self.runs[run_key]
        ledger.refused += rows
        ledger.refused_reason = ledger.refused_reason or reason

    def written(self, run_key: object, rows: int, inserted: int) -> None:
        ledger = self.runs[run_key]
        ledger.written += rows
        ledger.inserted += inserted
        ledger.changed.set()

    async def wait_accounted(self, run_key: object, expected: int, timeout: float) -> bool:
        self.runs[run_key].accounted_target = expected
        return await self._wait(run_key, lambda ledger: ledger.accounted >= expected, timeout)

    async def wait_written(self, run_key: object, timeout: float) -> bool:
        """Until every accounted product of the run that was not rejected is committed."""
        return await self._wait(run_key, lambda ledger: ledger.written >= ledger.accounted - ledger.rejected, timeout)

    async def _wait(self, run_key: object, done: Callable[[RunLedger], bool], timeout: float) -> bool:
        ledger = self.runs[run_key]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done(ledger):
            ledger.changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(ledger.changed.wait(), remaining)
            except TimeoutError:
                return done(ledger)
        return True

    async def flush_all(self) -> None:
        for flush in self.flushers:
            await flush()
