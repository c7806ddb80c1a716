"""The database side of a crawl, shared by the spiders and pipelines of one crawler.

One object per crawler (CrawlStore.for_crawler) owns the async connection pool and a ledger of
what each store's crawl has written, so the completion step can wait until every product the
spider yielded is accounted for (written or rejected) before it judges misses.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool
from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db.connection import database_url, open_async_pool

logger = logging.getLogger(__name__)


@dataclass
class RunLedger:
    accounted: int = 0  # products written to the buffers or rejected by normalization
    written: int = 0  # rows the product writer has settled: committed, or refused for good
    inserted: int = 0  # of which were new
    rejected: int = 0
    refused: int = 0  # of the written rows, those the database refused for their values (not stored)
    # set when a waiter's condition may have become true; account() only wakes the waiter once the
    # count it waits for is reached (it runs once per product: waking on each would cost more)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    accounted_target: int | None = None


class CrawlStore:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.settings = crawler.settings
        self.pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Lock | None = None
        self.ledgers: dict[object, RunLedger] = defaultdict(RunLedger)
        self.failed_runs: set[tuple] = set()  # (dispensary_id, run id) whose rows a batch lost
        self.flushers: list = []  # async callables: writers register their flush here

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlStore:
        store = getattr(crawler, "_cannaspider_store", None)
        if store is None:
            store = cls(crawler)
            crawler._cannaspider_store = store
            # after every pipeline's close_spider (which flush their buffers)
            crawler.signals.connect(store.close, signal=signals.spider_closed)
        return store

    async def open(self) -> AsyncConnectionPool:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self.pool is None:
                url = await asyncio.to_thread(database_url, self.settings)
                self.pool = await open_async_pool(url, max_size=self.settings.getint("DB_POOL_MAX_SIZE", 4))
                async with self.pool.connection() as conn:
                    await conn.execute("SELECT ensure_snapshot_partitions(current_date, 2)")
                    # runs whose process died (killed worker, lost database) must not stay 'running'
                    await conn.execute(
                        "UPDATE crawl_runs SET status = 'failed', finished_at = now(), error = 'abandoned: the "
                        "crawl process ended before closing this run' WHERE status = 'running' "
                        "AND started_at < now() - %s::interval",
                        (self.settings.get("CRAWL_RUN_ABANDONED_AFTER"),),
                    )
        return self.pool

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    # -- ledger ------------------------------------------------------------------------
    def account(self, run_key: object, n: int = 1, *, rejected: bool = False) -> None:
        ledger = self.ledgers[run_key]
        ledger.accounted += n
        if rejected:
            ledger.rejected += n
        if ledger.accounted_target is not None and ledger.accounted >= ledger.accounted_target:
            ledger.changed.set()

    def written(self, run_key: object, rows: int, inserted: int) -> None:
        ledger = self.ledgers[run_key]
        ledger.written += rows
        ledger.inserted += inserted
        ledger.changed.set()

    async def wait_accounted(self, run_key: object, expected: int, timeout: float) -> bool:
        self.ledgers[run_key].accounted_target = expected
        return await self._wait(run_key, lambda ledger: ledger.accounted >= expected, timeout)

    async def wait_written(self, run_key: object, timeout: float) -> bool:
        """Until every accounted product of the run that was not rejected is committed."""
        return await self._wait(run_key, lambda ledger: ledger.written >= ledger.accounted - ledger.rejected, timeout)

    async def _wait(self, run_key: object, done, timeout: float) -> bool:
        ledger = self.ledgers[run_key]
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

    # -- crawl runs ----------------------------------------------------------------------
    async def start_run(self, dispensary_id: int, role: str, task_id: int | None = None) -> int:
        pool = await self.open()
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "INSERT INTO crawl_runs (dispensary_id, role, task_id) VALUES (%s, %s, %s) RETURNING id",
                    (dispensary_id, role, task_id),
                )
            ).fetchone()
        return row[0]
