"""The life of a crawl's units of work, for every role (docs/architecture.md, "Unit lifecycle";
docs/operations.md, "Draining spiders" and "Adding a role").

A unit is one piece of a role's work (a store's crawl, a state's discovery, a keyword's on-page
crawl, a refresh): a task of the role's queue, or a target named by `-a` (a Unit without a task).
`UnitLifecycle`, one per crawler (`UnitLifecycle.of(crawler)`), is the component spiders speak to;
it hands out units itself and ties together the parts that track and close them (units/unit.py
holds the Unit and its outcome, units/tracking.py the counting, units/closing.py the closing):

- hands out units: `tasks(role, follow)` claims them from the queue through TaskDrain (leases,
  heartbeats, slots, release on stop), `refuse(role, reason)` fails a batch a node cannot work;
- tracks what each unit has outstanding: `start(Unit(task), output)` counts the requests and items
  the spider's start() yields for it; the spider middleware (units/middleware.py) counts what each of
  its responses' callbacks yield, and an errback wrapper what its failures' errbacks yield; the
  item signals say when an item has left the pipelines;
- closes each unit exactly once, when nothing is outstanding: it asks the spider for the unit's
  outcome (`unit_outcome`: a TaskResult or an error, with which it completes or fails the task; or
  None when the spider's own close recorded it, as a product crawl's store close does in the
  transaction that applies the store's misses/OOS: units/crawl_close.py);
- holds the engine open while closes are pending (spider_idle), ends an idle crawl as soon as the
  last one settles (the engine itself would look again only on its next heartbeat), and awaits
  them when the spider closes.

`run(role, follow, work)` is the same for units without requests (a coroutine per task:
crawl_onpage, analytics_refresh): each runs beside the others, and closes with what it returns.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider

from cannaspider.crawl_outcome import record_fatal_error
from cannaspider.db.connection import database_url
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import Task
from cannaspider.units.closing import UnitClosing
from cannaspider.units.tracking import UnitTracking
from cannaspider.units.unit import (
    ERRBACK_META,
    UNIT_META,
    UNITS_CLOSED_STAT,
    Closing,
    Outcome,
    Unit,
    UnitSpider,
    Wait,
    default_outcome,
    describe,
    unit_name,
)

# the names spiders and middlewares import from here (one import path for the lifecycle's words)
__all__ = [
    "ERRBACK_META",
    "UNITS_CLOSED_STAT",
    "UNIT_META",
    "Closing",
    "Outcome",
    "Unit",
    "UnitLifecycle",
    "UnitSpider",
    "Wait",
    "default_outcome",
    "describe",
    "unit_name",
]

logger = logging.getLogger(__name__)

_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, UnitLifecycle] = weakref.WeakKeyDictionary()


class UnitLifecycle:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlDatabase.for_crawler(crawler)  # built now: its spider_closed must run
        self.closing = UnitClosing(crawler, self.store)
        self.tracking = UnitTracking(crawler, self.closing.check)
        # the parts' API, as the lifecycle's own (spiders, the middleware, crawl_close call these)
        self.check = self.closing.check
        self.close = self.closing.close
        self.finish = self.closing.finish
        self.start = self.tracking.start
        self.track = self.tracking.track
        self.count = self.tracking.count
        self.failed = self.tracking.failed

    @property
    def drain(self) -> TaskDrain | None:
        return self.closing.drain

    @drain.setter
    def drain(self, drain: TaskDrain | None) -> None:
        self.closing.drain = drain

    @classmethod
    def of(cls, crawler: Crawler) -> UnitLifecycle:
        """The crawler's lifecycle (built on first use)."""
        found = _BY_CRAWLER.get(crawler)
        if found is None:
            found = _BY_CRAWLER[crawler] = cls(crawler)
        return found

    # -- handing out units -------------------------------------------------------------------------
    async def _new_drain(self, role: str, follow: bool, *, close_with_spider: bool = True) -> TaskDrain:
        """A TaskDrain for `role` (released when the spider closes)."""
        url = await asyncio.to_thread(database_url, self.crawler.settings)
        return TaskDrain.from_crawler(self.crawler, role, url, follow=follow, close_with_spider=close_with_spider)

    async def open_drain(self, role: str, follow: bool) -> TaskDrain:
        """The drain of this crawler's units (its tasks(), run())."""
        # released by _spider_closed, after the units it holds are closed
        self.drain = drain = await self._new_drain(role, follow, close_with_spider=False)
        logger.info(
            "draining the %s queue (%d at once%s)", role, drain.config.slots, ", until stopped" if follow else ""
        )
        return drain

    async def tasks(self, role: str, follow: bool) -> AsyncIterator[Task]:
        """The role's tasks, claimed as slots free up (TASK_SLOTS); the figures logged at the end."""
        drain = self.drain or await self.open_drain(role, follow)
        async for task in drain.tasks():
            yield task
        logger.info(
            "%s queue: %d task(s) claimed, %d completed, %d failed", role, drain.claimed, drain.completed, drain.failed
        )

    async def refuse(self, role: str, reason: str) -> None:
        """A node that cannot work fails one batch of its queue with `reason` (retried after the
        backoff, the attempts counted) instead of leaving it silent."""
        try:
            drain = await self._new_drain(role, follow=False)
            failed = await drain.fail_claimable(reason)
        except Exception as exc:  # noqa: BLE001 - the refusal itself must still happen
            logger.warning("could not fail the queued %s tasks: %s", role, first_line(exc))
        else:
            logger.info("%d queued %s task(s) failed: %s", failed, role, reason)

    async def cannot_work(
        self, reason: str, close_reason: str, *, role: str, draining: bool, follow: bool, wait: Wait | None = None
    ) -> None:
        """This node cannot work (no Firecrawl configured, no active proxy): `reason`, logged once.
        Draining, one batch of the queue fails with it (refuse); a follow drainer that can `wait`
        for what it lacks then waits, and returns once it is there (its drain starts). Otherwise
        `reason` is the crawl's fatal error (the crawl command exits 2) and the crawl closes:
        CloseSpider(close_reason), before anything is sent."""
        logger.error("%s", reason)
        if draining:
            await self.refuse(role, reason)
            if follow and wait is not None:
                logger.warning("the %s queue waits until %s", role, wait.until)
                while True:
                    await asyncio.sleep(wait.poll_s)
                    if await wait.ready():
                        return
        assert self.crawler.stats is not None
        record_fatal_error(self.crawler.stats, reason)
        raise CloseSpider(close_reason)

    async def run(
        self,
        role: str,
        follow: bool,
        work: Callable[[Unit], Awaitable[Outcome]],
        *,
        targets: Sequence[Unit] | None = None,
        one_at_a_time: bool = False,
    ) -> list[Unit]:
        """Units without requests: `work(unit)` for each of `targets` (the `-a` targets, Units
        without a task) or, without targets, for each task the role's queue hands out until the
        drain ends; each beside the others (or one after the other), closed with what its work
        returns (close()). The targets that failed are returned (the crawl's own close reason)."""
        jobs: set[asyncio.Future[None]] = set()

        async def one(unit: Unit) -> None:
            try:
                outcome = await work(unit)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the unit fails (its attempt counted)
                outcome = describe(exc), False
            await self.close(unit, outcome)

        async for unit in self._units(role, follow, targets):
            if one_at_a_time:
                await one(unit)
                continue
            job = asyncio.ensure_future(one(unit))
            jobs.add(job)
            job.add_done_callback(jobs.discard)
        await asyncio.gather(*jobs, return_exceptions=True)
        return [unit for unit in targets or () if unit.failed]

    async def _units(self, role: str, follow: bool, targets: Sequence[Unit] | None) -> AsyncIterator[Unit]:
        if targets is not None:
            for unit in targets:
                yield unit
            return
        async for task in self.tasks(role, follow):
            yield Unit(task)
