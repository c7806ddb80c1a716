"""Closing a store's crawl (one unit of a product crawl: units/closing.py closes it once, when
none of its requests or items is outstanding, through the spider's unit_outcome).

Only a complete crawl (every page arrived and parsed, and every row it yielded committed) may
apply the seed's out-of-stock rules: a product that is merely not written yet would count as
missing. So the close first waits until the store's rows are committed (the writer batches them
with other stores' rows, and flushes early when the crawl goes idle); a crawl whose rows did not
all arrive in time, or were refused by the database, is incomplete: it keeps what it stored,
marks nothing missing, and records why. Then one transaction records the close and completes
the crawl's task (units/store_transaction.py: misses/OOS, the OOS guard, the lease check).

An incomplete crawl fails its task, which retries after a backoff (docs/operations.md); a close
that fails never raises, it fails the task too, whose lease otherwise expires and puts it back
in the queue. What the close recorded is reported last (units/store_report.py).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import psycopg
from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import DatabaseSetupError, first_line
from cannaspider.pipelines.batch_writer import OUTAGE_ERRORS
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost
from cannaspider.units.store_outcome import StoreOutcome
from cannaspider.units.store_report import report_close
from cannaspider.units.store_transaction import close_figures, record_close

logger = logging.getLogger(__name__)


_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, StoreClose] = weakref.WeakKeyDictionary()


class StoreClose:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlStore.for_crawler(crawler)
        self.wait_timeout = crawler.settings.getfloat("CRAWL_COMPLETION_WAIT_S")
        self.batch_grace = crawler.settings.getfloat("CRAWL_COMPLETION_BATCH_GRACE_S")
        self.oos_guard_min_share = crawler.settings.getfloat("OOS_GUARD_MIN_SHARE")
        self.events = crawler.settings.getbool("PRODUCT_EVENTS_ENABLED")
        if not 0 <= self.oos_guard_min_share <= 1:
            raise ValueError(f"OOS_GUARD_MIN_SHARE must be within [0, 1], got {self.oos_guard_min_share}")
        self.closing = 0  # closes in progress
        self._flushes: set[asyncio.Future[None]] = set()

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> StoreClose:
        """The crawler's store close (built on first use: a product spider's from_crawler)."""
        found = _BY_CRAWLER.get(crawler)
        if found is None:
            found = _BY_CRAWLER[crawler] = cls(crawler)
            crawler.signals.connect(found.spider_idle, signal=signals.spider_idle)
        return found

    def _stopped(self) -> bool:
        """The crawl was stopped (SIGTERM, Scrapyd's cancel): Crawler.stop_async clears `crawling`
        before it closes the engine (a crawl that finishes is still `crawling` while it closes)."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling at all (a close driven directly, as in tests)
            return False
        return engine is not None and not self.crawler.crawling

    def _crawl_is_draining(self) -> bool:
        """No request left to download or schedule: no batch will fill up any more."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling (a close driven directly, as in tests)
            return True
        scheduler = engine.scheduler  # public since Scrapy 2.19; None before the spider opens
        if scheduler is None:
            return True
        return not engine.downloader.active and not scheduler.has_pending_requests()

    async def close(self, item: StoreOutcome) -> None:
        """Close the store's crawl run (and its task); never raises (a failure is logged and fails
        the task, whose lease otherwise expires and puts it back in the queue)."""
        self.closing += 1
        try:
            await self._apply(item)
        except OUTAGE_ERRORS as exc:  # the database is down: one line, the store's close says the rest
            logger.error(
                "dispensary %s: could not close crawl run %s, the database is unavailable: %s (the run stays "
                "'running' until the next crawl marks it failed; nothing was marked missing)",
                item.dispensary_id,
                item.crawl_run_id,
                first_line(exc),
            )
            await self._fail_task(item, f"closing the crawl failed: {first_line(exc)}")
        except Exception as exc:
            logger.exception(
                "dispensary %s: could not close crawl run %s (it stays 'running' until the next "
                "crawl process marks it abandoned)",
                item.dispensary_id,
                item.crawl_run_id,
            )
            await self._fail_task(item, f"closing the crawl failed: {type(exc).__name__}: {first_line(exc)}")
        finally:
            self.closing -= 1

    def _drain(self, item: StoreOutcome) -> TaskDrain | None:
        if item.task is None:
            return None
        drain = TaskDrain.of(self.crawler)
        if drain is None:  # a task without the drain that claimed it: nothing can be recorded for it
            logger.error("task %s: no task drain in this crawl: its outcome is not recorded", item.task.id)
        return drain

    async def _fail_task(self, item: StoreOutcome, error: str) -> None:
        """Fail the crawl's task, if it has one (retried after a backoff). Never raises: a task whose
        outcome cannot be written is left to its lease, which expires and puts it back in the queue."""
        drain = self._drain(item)
        if drain is None or item.task is None:
            return
        try:
            await drain.fail(item.task, error, item.crawl_run_id)
        except LeaseLost as exc:
            logger.warning("dispensary %s: %s: the failure is not recorded", item.dispensary_id, exc)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.error(
                "dispensary %s: task %s: could not record its failure (%s): it returns to the queue when its lease "
                "expires",
                item.dispensary_id,
                item.task.id,
                first_line(exc),
            )

    async def _wait_committed(self, key: tuple[Any, ...]) -> bool:
        """Until the store's rows are committed. Batches fill up with other stores' rows while the
        crawl is busy; when it goes idle (spider_idle, see spider_idle()) or after a grace period,
        the buffers are flushed early."""
        if self._crawl_is_draining():
            await self.store.ledger.flush_all()
        if await self.store.ledger.wait_written(key, self.batch_grace):
            return True
        await self.store.ledger.flush_all()
        return await self.store.ledger.wait_written(key, self.wait_timeout)

    def spider_idle(self) -> None:
        # Nothing left to download: no batch will fill up any more, so stores waiting for their
        # rows get them written now. (spider_idle handlers cannot be coroutines: schedule it.)
        if self.closing:
            flush = asyncio.ensure_future(self.store.ledger.flush_all())
            self._flushes.add(flush)
            flush.add_done_callback(self._flushed)

    def _flushed(self, flush: asyncio.Future[None]) -> None:
        self._flushes.discard(flush)
        # An outage is logged by the writer, which keeps its rows for the next flush. spider_idle
        # comes again while the lifecycle keeps the spider open: each failed flush must not end as
        # an unretrieved task's traceback.
        if not flush.cancelled():
            flush.exception()

    async def _apply(self, item: StoreOutcome) -> None:
        key = (item.dispensary_id, item.crawl_run_id)
        complete, error = item.complete, item.error
        if not self.store.ledger.products_writer:
            # pipelines switched off (`-s ITEM_PIPELINES={}`, the ingest benchmark's ceiling): no row
            # was written, so nothing may be concluded from the store's rows, and none will come to
            # wait CRAWL_COMPLETION_WAIT_S for
            complete, error = False, "no product writer in ITEM_PIPELINES: the store's products were not written"
        elif not await self.store.ledger.wait_accounted(key, item.products_yielded, self.wait_timeout):
            complete = False
            error = f"only {self.store.ledger.runs[key].accounted} of {item.products_yielded} products were written"
        try:
            if self.store.ledger.products_writer and not await self._wait_committed(key):
                complete, error = False, "the store's products were not all committed in time"
        except psycopg.Error as exc:
            complete, error = False, f"writing products failed: {first_line(exc)}"
        except DatabaseSetupError as exc:
            complete, error = False, f"writing products failed: {exc}"
        if key in self.store.ledger.failed_runs:
            complete, error = False, self.store.ledger.failed_runs.pop(key)
        ledger = self.store.ledger.runs.pop(key, None)
        if complete and ledger is not None and ledger.refused:  # never a complete run with rows lost
            complete = False
            error = f"{ledger.refused} of this store's rows were not stored: {ledger.refused_reason}"
        figures = close_figures(item, ledger, error, self.oos_guard_min_share, self.events)
        drain = self._drain(item)
        pool = await self.store.open()
        verdict = await record_close(pool, item, figures, complete, error, drain)
        self.store.runs.forget(item.crawl_run_id)
        # a stopped crawl's task goes back to the queue uncounted (the lifecycle releases it)
        if (
            not verdict.complete
            and not verdict.lost
            and drain is not None
            and item.task is not None
            and not self._stopped()
        ):
            await self._fail_task(item, f"crawl incomplete: {verdict.error}")
        report_close(self.crawler.stats, item, verdict, self.oos_guard_min_share)
