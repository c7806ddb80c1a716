"""The database side of a crawl: a Scrapy extension shared by the spiders and pipelines of one crawler.

CrawlStore is enabled in EXTENSIONS (settings.py); components get it with
CrawlStore.for_crawler(crawler). It owns:

- the async connection pool, opened when the spider opens: a database that cannot be reached or
  is not migrated closes the crawl at once with one line (the crawl command exits non-zero);
- a ledger of what each store's crawl has written, so the completion step can wait until every
  product the spider yielded is accounted for (written or rejected) before it judges misses;
- the liveness of the crawl_runs this process opened (migrations/006): a heartbeat every
  CRAWL_RUN_HEARTBEAT_S; runs still open when the crawl closes are closed as 'incomplete' with
  the reason (a stop, a shutdown), so nothing is marked missing; and on opening, the runs of
  dead processes (no heartbeat for CRAWL_RUN_STALE_AFTER_S, or a pid gone on this host) are
  closed as 'failed'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.db import migrations
from cannaspider.db.connection import database_url, open_async_pool
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.shutdown import on_reactor_shutdown

logger = logging.getLogger(__name__)

# the crawl's one-line fatal error, read by the crawl command (commands/crawl.py) for its exit
FATAL_ERROR_STAT = "cannaspider/fatal_error"
# units of work (store crawls, keywords, refreshes) that ended without completing: the crawl
# command exits EXIT_INCOMPLETE (drained tasks are counted by their drain: TaskDrain.claimed)
UNITS_INCOMPLETE_STAT = "cannaspider/units_incomplete"

# stores of crawlers whose settings do not enable the extension (components built directly on a
# bare get_crawler(), as in tests): still one per crawler
_UNREGISTERED: weakref.WeakKeyDictionary[Crawler, CrawlStore] = weakref.WeakKeyDictionary()

FAIL_DEAD_RUNS = """
UPDATE crawl_runs
   SET status = 'failed', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       error = CASE WHEN id = ANY(%(dead)s)
                    THEN format('abandoned: its crawl process (pid %%s on %%s) ended without closing it', pid, host)
                    ELSE format('abandoned: no heartbeat from its crawl process since %%s', heartbeat_at)
               END
 WHERE status = 'running'
   AND (id = ANY(%(dead)s) OR heartbeat_at < now() - make_interval(secs => %(stale)s))
RETURNING id
"""
CLOSE_OPEN_RUNS = """
UPDATE crawl_runs
   SET status = 'incomplete', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       errors = errors + 1, error = %(error)s
 WHERE id = ANY(%(runs)s) AND status = 'running'
RETURNING id
"""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


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
        self.failed_runs: set[tuple[Any, ...]] = set()  # (dispensary_id, run id) whose rows a batch lost
        self.flushers: list[Callable[[], Awaitable[None]]] = []  # writers register their flush here
        # a product writer is in ITEM_PIPELINES: without one no store's rows ever arrive to wait for
        self.products_writer = False
        self.open_runs: set[int] = set()  # crawl_runs this process opened and may still be open
        # set once spider_closed has closed the runs still open (units/lifecycle.py releases the
        # queue's tasks only then: a stopped store's run is 'incomplete', never 'released')
        self.runs_closed = asyncio.Event()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._heartbeat: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlStore:
        store = cls(crawler)
        crawler.signals.connect(store.spider_opened, signal=signals.spider_opened)
        # after every pipeline's close_spider (which flush their buffers and close their stores)
        crawler.signals.connect(store.spider_closed, signal=signals.spider_closed)
        on_reactor_shutdown(store._close_on_shutdown)
        return store

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlStore:
        """The crawler's store: the enabled extension, else (a bare test crawler) one of its own.

        Available once the crawler's extensions are built: in components' from_crawler and at
        run time, not in a spider's __init__ (Scrapy builds the spider first)."""
        store = crawler.get_extension(cls)
        if store is None:
            store = _UNREGISTERED.get(crawler)
            if store is None:
                store = _UNREGISTERED[crawler] = cls.from_crawler(crawler)
        return store

    def fail(self, message: str) -> None:
        """Record the crawl's fatal error (the first one wins), logged as one line."""
        logger.error("%s", message)
        if self.crawler.stats.get_value(FATAL_ERROR_STAT) is None:
            self.crawler.stats.set_value(FATAL_ERROR_STAT, message)

    # -- lifecycle -----------------------------------------------------------------------
    async def spider_opened(self, spider: Spider) -> None:
        if self.settings.getbool("CONTRACT_MODE"):
            return  # `scrapy check` only calls callbacks: the database is opened when one needs it
        try:
            await self.open()
        except DatabaseSetupError as exc:
            self.fail(str(exc))
            raise CloseSpider("database_unavailable") from None
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        try:
            if self.open_runs and self.pool is not None:
                await self._close_open_runs(reason)
        except psycopg.Error as exc:
            self.fail(
                f"the database was lost during the crawl ({first_line(exc)}): {len(self.open_runs)} crawl "
                "run(s) stay 'running' until the next crawl marks them failed, and rows of this crawl may be "
                "missing (the feed has what the crawl saw)"
            )
        finally:
            self.runs_closed.set()
            await self.close()

    async def _close_on_shutdown(self) -> None:
        """A forced shutdown (no spider_closed): the runs still open are closed as incomplete."""
        if not self.open_runs or self.pool is None:
            return
        try:
            await self._close_open_runs("forced shutdown")
        except psycopg.Error as exc:
            logger.error("could not close %d open crawl run(s): %s", len(self.open_runs), first_line(exc))

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
                        await conn.execute("SELECT ensure_snapshot_partitions(current_date, 2)")
                        await self._fail_dead_runs(conn)
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

    async def _fail_dead_runs(self, conn: psycopg.AsyncConnection) -> None:
        """Close as failed the runs whose process died: a pid gone on this host, or no heartbeat."""
        rows = await (
            await conn.execute(
                "SELECT id, pid FROM crawl_runs WHERE status = 'running' AND host = %s AND pid <> %s",
                (self.host, self.pid),
            )
        ).fetchall()
        dead = [run_id for run_id, pid in rows if not _pid_alive(pid)]
        stale = self.settings.getfloat("CRAWL_RUN_STALE_AFTER_S")
        failed = await (await conn.execute(FAIL_DEAD_RUNS, {"dead": dead, "stale": stale})).fetchall()
        if failed:
            logger.warning(
                "%d crawl run(s) of crawl processes that died were still 'running': marked failed (ids %s)",
                len(failed),
                ", ".join(str(row[0]) for row in failed),
            )

    async def _beat(self) -> None:
        """Every CRAWL_RUN_HEARTBEAT_S: one statement stamps all the runs this process has open."""
        interval = self.settings.getfloat("CRAWL_RUN_HEARTBEAT_S")
        while True:
            await asyncio.sleep(interval)
            if not self.open_runs or self.pool is None:
                continue
            sent = set(self.open_runs)
            try:
                async with self.pool.connection(timeout=interval) as conn:
                    rows = await (
                        await conn.execute(
                            "UPDATE crawl_runs SET heartbeat_at = now() WHERE id = ANY(%s) AND status = 'running' "
                            "RETURNING id",
                            (list(sent),),
                        )
                    ).fetchall()
            except psycopg.Error as exc:
                logger.warning("crawl-run heartbeat failed: %s", first_line(exc))
                continue
            self.open_runs -= sent - {row[0] for row in rows}  # closed since: no more beats

    async def _close_open_runs(self, reason: str) -> None:
        if reason == "finished":
            error = "the crawl finished without closing this store's crawl"
        else:
            error = f"the crawl was stopped ({reason}) before this store's crawl finished"
        assert self.pool is not None
        async with self.pool.connection() as conn:
            closed = await (
                await conn.execute(CLOSE_OPEN_RUNS, {"runs": list(self.open_runs), "error": error})
            ).fetchall()
        self.open_runs.clear()
        if closed:
            self.crawler.stats.inc_value(UNITS_INCOMPLETE_STAT, len(closed))
            logger.warning(
                "%d store crawl(s) still open when the crawl closed (%s): marked incomplete, nothing marked missing",
                len(closed),
                reason,
            )

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

    async def _wait(self, run_key: object, done: Callable[[RunLedger], bool], timeout: float) -> bool:
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
                    "INSERT INTO crawl_runs (dispensary_id, role, task_id, host, pid) VALUES (%s, %s, %s, %s, %s) "
                    "RETURNING id",
                    (dispensary_id, role, task_id, self.host, self.pid),
                )
            ).fetchone()
        assert row is not None  # INSERT … RETURNING returns its row
        run_id: int = row[0]
        self.open_runs.add(run_id)
        return run_id
