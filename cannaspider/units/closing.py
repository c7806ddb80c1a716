"""Closing each unit exactly once (docs/architecture.md, "Unit lifecycle"): when nothing of it is
outstanding (check), with the outcome the spider gives (`unit_outcome`: a TaskResult or an error,
with which its task completes or fails; None when the spider's own close recorded it, as a product
crawl's store close does in the transaction that applies the store's misses/OOS:
units/crawl_close.py). Pending closes hold the engine open (spider_idle), an idle crawl ends as
soon as the last one settles, and a stop awaits them before the drain is released."""

from __future__ import annotations

import asyncio
import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider

from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, Task, TaskResult
from cannaspider.units.idle import end_if_idle
from cannaspider.units.unit import UNITS_CLOSED_STAT, Closing, Unit, default_outcome

logger = logging.getLogger("cannaspider.units.lifecycle")  # one logger for the lifecycle's lines


class UnitClosing:
    def __init__(self, crawler: Crawler, store: CrawlDatabase):
        self.crawler = crawler
        self.store = store
        self.drain: TaskDrain | None = None  # the crawl's drain, once UnitLifecycle opens it
        self._closing: set[asyncio.Future[None]] = set()
        crawler.signals.connect(self._idle, signal=signals.spider_idle)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    def _idle(self) -> None:
        # a unit still closing (a store waiting for its rows to be committed) keeps the crawl open:
        # the components its close needs (the database pool, the drain) close with the spider
        if self._closing:
            raise DontCloseSpider

    async def _spider_closed(self) -> None:
        """A stop (not idle) can find closes still pending: they finish before the crawl ends. Then
        the tasks still held go back to the queue (their attempt not counted), once the crawl store
        has closed the runs of the units still open as incomplete (counted: one close path, whatever
        the stop found them doing)."""
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        if self.drain is None:
            return
        await self.store.runs.closed.wait()
        await self.drain.close()

    def check(self, unit: Unit) -> None:
        """Close the unit if nothing of it is outstanding any more (once)."""
        if unit.closed or not unit.started or unit.requests > 0 or unit.items > 0:
            return
        unit.closed = True
        job = asyncio.ensure_future(self._close(unit))
        self._closing.add(job)
        job.add_done_callback(self._closed)

    def _closed(self, job: asyncio.Future[None]) -> None:
        self._closing.discard(job)
        if not self._closing:  # the last pending close has settled: an idle crawl ends now
            end_if_idle(self.crawler)

    async def _close(self, unit: Unit) -> None:
        decide = getattr(self.crawler.spider, "unit_outcome", None)
        try:
            outcome: Closing = await decide(unit) if decide is not None else default_outcome(unit)
        except Exception as exc:  # noqa: BLE001 - e.g. the database is gone: the attempt failed
            outcome = f"{type(exc).__name__}: {first_line(exc)}", False
        await self.close(unit, outcome)

    async def close(self, unit: Unit, outcome: Closing) -> None:
        """Record a unit's outcome: its task completed or failed (finish); a target of `-a` that
        failed counted incomplete (the crawl command's exit: a drain counts its tasks itself);
        None: the spider's own close recorded it (a store's: units/crawl_close.py)."""
        unit.closed = True
        unit.failed = outcome is not None and isinstance(outcome[0], str)
        if outcome is not None and unit.task is not None:
            await self.finish(unit.task, *outcome)
            return
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(UNITS_CLOSED_STAT)
        if unit.failed:
            self.crawler.stats.inc_value(UNITS_INCOMPLETE_STAT)

    async def finish(
        self, task: Task, outcome: TaskResult | str, final: bool = False, run_id: int | None = None
    ) -> None:
        """Complete (a TaskResult) or fail (an error) a held task; a lost lease is logged, not raised."""
        assert self.drain is not None
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(UNITS_CLOSED_STAT)
        try:
            if isinstance(outcome, TaskResult):
                await self.drain.complete(task, outcome)
            else:
                await self.drain.fail(task, outcome, run_id, final=final)
        except LeaseLost as exc:
            logger.warning("task %s (%s): %s: its outcome is not recorded", task.id, task.role, exc)
        except Exception as exc:  # noqa: BLE001 - the database is gone: the lease expires and the task runs again
            logger.error("task %s (%s): could not record its outcome: %s", task.id, task.role, first_line(exc))
