"""The life of a crawl's units of work, for every role (docs/architecture.md, "Unit lifecycle";
docs/operations.md, "Draining spiders" and "Adding a role").

A unit is one piece of a role's work (a store's crawl, a state's discovery, a keyword's on-page
crawl, a refresh): a task of the role's queue, or a target named by `-a` (a Unit without a task).
`UnitLifecycle`, one per crawler (a Scrapy extension: `UnitLifecycle.of(crawler)`), is the component
spiders speak to; it hands out units, tracks and closes them, all in this module:

- hands out units, by one start path for every role: `units(role, follow, targets)` yields the
  `-a` targets (Units without a task) or, without targets, a `Unit.of(task)` for each task it claims
  from the queue through TaskDrain (leases, heartbeats, slots, release on stop); either way the
  spider reads what the unit works on from `unit.target` and closes it the same way, so a unit that
  fails is a failed task or, for a target, the crawl's exit 3 ("a unit did not complete").
  `refuse(role, reason)` fails a batch a node cannot work;
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

Read top to bottom: the Unit and the words spoken of it; ending an idle crawl (`end_if_idle`,
also used by the image pipeline); `UnitLifecycle`, in its sections (handing out units, tracking
what each has outstanding, closing each once); the errback wrapper of a unit's requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT, record_fatal_error
from cannaspider.db.connection import database_url
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.extensions import extension
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, Task, TaskResult

logger = logging.getLogger(__name__)


# -- a unit, and the words the lifecycle speaks of it -------------------------------------------------
# The Unit itself, what a spider whose units are tracked says (UnitSpider), what a node that cannot
# work waits for (Wait), an outcome, and the request meta keys.

UNIT_META = "cannaspider_unit"  # request meta: the Unit a request works for
ERRBACK_META = "cannaspider_unit_errback"  # request meta: its errback ran (its output is counted there)
UNITS_CLOSED_STAT = "cannaspider/units_closed"

Outcome = tuple[TaskResult | str, bool]  # a result, or the error that fails the task (and if for good)
# what unit_outcome says: an Outcome, or None when the spider's close recorded the task's outcome
Closing = Outcome | None


def describe(exception: BaseException) -> str:
    """The one-line reason a unit fails with (secrets redacted, no traceback)."""
    return f"{type(exception).__name__}: {first_line(exception)}"


@dataclass(eq=False)
class Unit:
    """One unit's work in this crawl: what it has outstanding, and what the spider learned."""

    task: Task | None = None  # None: a target named by -a (nothing to complete in the queue)
    # what it works on, in the words of the role's target (dispensary_id, state, keyword_id) and
    # `platform`: a task's read from its row (Unit.of), a target's given by the spider's `-a`
    target: dict[str, Any] = field(default_factory=dict)
    requests: int = 0  # scheduled, not yet through their callback or errback
    items: int = 0  # yielded, not yet through the item pipelines
    started: bool = False  # everything start() had for it is out
    errors: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    failed: bool = False  # closed with an error

    @classmethod
    def of(cls, task: Task) -> Unit:
        """A task's unit: its target from the task's row (the store column, the payload, the platform)."""
        target: dict[str, Any] = {**task.payload, "platform": task.platform}
        if task.dispensary_id is not None:
            target["dispensary_id"] = task.dispensary_id
        return cls(task, target=target)


@dataclass(frozen=True)
class Wait:
    """What a follow drainer that cannot work waits for (UnitLifecycle.cannot_work): `ready()`
    asked every `poll_s` (it logs its own answer, and a failure to find out is a "not yet")."""

    until: str  # the end of "the ROLE queue waits until …"
    ready: Callable[[], Awaitable[bool]]
    poll_s: float


class UnitSpider(Protocol):
    """What a spider whose units are tracked says (both have defaults in UnitLifecycle)."""

    def unit_item(self, unit: Unit, item: Any) -> None: ...
    async def unit_outcome(self, unit: Unit) -> Closing: ...


def unit_name(unit: Unit) -> str:
    return f"task {unit.task.id} ({unit.task.role})" if unit.task is not None else "a target of the crawl"


def default_outcome(unit: Unit) -> Outcome:
    """The first error fails the task (to be retried); without one it completes."""
    return (unit.errors[0], False) if unit.errors else (TaskResult(), False)


# -- ending an idle crawl ------------------------------------------------------------------------
# A component that keeps the engine open past its downloads (a spider_idle handler that raises
# DontCloseSpider: the unit lifecycle while closes are pending, the image pipeline while its store
# queries and downloads are out) must wake the engine when that work is done. Otherwise the engine
# looks again only on its next heartbeat (5 s), and Scrapy 2.19 has no public "check idle now".
# `end_if_idle` runs the engine's own idle check with public APIs: `engine.spider_is_idle()`, then
# `spider_idle` through `send_catch_log`, then `engine.close_spider_async` unless a handler raised
# DontCloseSpider (a CloseSpider's reason is the close's reason, as the engine does it).

# the engine closes started here, referenced until they end (a bare future could be collected)
_ENDING: set[asyncio.Future[None]] = set()


def end_if_idle(crawler: Crawler) -> bool:
    """End the crawl now if the engine would end it on its next idle check; True if it was ended."""
    engine, spider = crawler.engine, crawler.spider
    # not while the engine is closing already (needs_backout: not running, or its slot closing)
    if not crawler.crawling or engine is None or engine.spider is None or engine.needs_backout():
        return False
    if not engine.spider_is_idle():
        return False  # the engine checks again itself when its downloads are done
    results = crawler.signals.send_catch_log(
        signal=signals.spider_idle, spider=spider, dont_log=(DontCloseSpider, CloseSpider)
    )
    raised = [result.value for _, result in results if isinstance(result, Failure)]
    if any(isinstance(exc, DontCloseSpider) for exc in raised) or engine.needs_backout():
        return False  # whoever holds it wakes it again when its own work settles
    if not engine.spider_is_idle():
        return False
    reason = next((exc.reason for exc in raised if isinstance(exc, CloseSpider)), "finished")
    if crawler.stats is not None:  # the crawl ended here, not on the engine's next heartbeat
        crawler.stats.set_value("cannaspider/ended_when_idle", 1)
    # a second close (the heartbeat's, in the meantime) awaits this one: it is harmless
    ending = asyncio.ensure_future(engine.close_spider_async(reason=reason))
    _ENDING.add(ending)
    ending.add_done_callback(_ended)
    return True


def _ended(job: asyncio.Future[None]) -> None:
    _ENDING.discard(job)
    if not job.cancelled() and (exc := job.exception()) is not None:
        logger.error("closing the idle crawl failed: %s: %s", type(exc).__name__, first_line(exc))


class UnitLifecycle:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.drain: TaskDrain | None = None  # the crawl's drain, once open_drain opens it
        self._closing: set[asyncio.Future[None]] = set()  # closes in progress
        # id(item) → its unit, for start()'s items while they are in the pipelines (a callback's items
        # are found by their response: the pipelines may hand on another object, a StoreProduct
        # for a RawProduct)
        self._items: dict[int, Unit] = {}
        self._progress: asyncio.Future[None] | None = None  # the progress lines' loop, once units run
        for handler, signal in (
            (self._idle, signals.spider_idle),
            (self._spider_closed, signals.spider_closed),
            (self._item_done, signals.item_scraped),
            (self._item_done, signals.item_dropped),
            (self._item_failed, signals.item_error),
            (self._request_dropped, signals.request_dropped),
        ):
            crawler.signals.connect(handler, signal=signal)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UnitLifecycle:
        """A Scrapy extension (EXTENSIONS, settings.py), built after the crawl database, whose
        spider_closed closes the runs this one's waits for."""
        return cls(crawler)

    @classmethod
    def of(cls, crawler: Crawler) -> UnitLifecycle:
        """The crawler's lifecycle."""
        return extension(crawler, cls)

    @property
    def database(self) -> CrawlDatabase:
        # found at run time: an extension cannot look another up while the manager builds them
        return CrawlDatabase.for_crawler(self.crawler)

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

        async for unit in self.units(role, follow, targets):
            if one_at_a_time:
                await one(unit)
                continue
            job = asyncio.ensure_future(one(unit))
            jobs.add(job)
            job.add_done_callback(jobs.discard)
        await asyncio.gather(*jobs, return_exceptions=True)
        return [unit for unit in targets or () if unit.failed]

    async def units(self, role: str, follow: bool, targets: Sequence[Unit] | None) -> AsyncIterator[Unit]:
        """The crawl's units, by one path for every role: the `-a` targets (Units without a task,
        `targets`; an empty list: none to work) or, when `targets` is None (no target given), a
        Unit.of(task) for each task the role's queue hands out until the drain ends."""
        self._start_progress(role, targets)
        if targets is not None:
            for unit in targets:
                yield unit
            return
        async for task in self.tasks(role, follow):
            yield Unit.of(task)

    # -- tracking what each unit has outstanding -------------------------------------------------
    # The requests and items start() yields for it, what its responses' callbacks yield (the spider
    # middleware, units/middleware.py, calls track()) and what its failures' errbacks yield (an
    # errback wrapper); the item signals say when an item has left the pipelines. Each change asks
    # `check` whether the unit can close.
    async def start(self, unit: Unit, output: Iterable[Any] | Callable[[], Iterable[Any]]) -> AsyncIterator[Any]:
        """What start() yields for `unit` (a new Unit(task)), counted for it; an exception fails
        the unit (and the drain goes on with the next one). Iterate it even for no output: the
        unit closes once it is exhausted and nothing of it is outstanding."""
        try:
            async for out in self.track(unit, output() if callable(output) else output, source="start"):
                yield out
        except Exception:
            logger.exception("%s: starting its crawl failed", unit_name(unit))
        finally:
            unit.started = True
            self.check(unit)

    async def track(
        self, unit: Unit, output: Iterable[Any] | AsyncIterable[Any] | None, *, source: str, request: bool = False
    ) -> AsyncIterator[Any]:
        """Count every request and item of `output` for `unit`; with `request`, the request whose
        callback or errback produced it is done once the output is exhausted. An exception is the
        unit's error (it fails, the attempt counted) and goes on to the caller."""
        try:
            if isinstance(output, AsyncIterable):
                async for out in output:
                    self.count(unit, out, by_id=not request)
                    yield out
            else:
                for out in output or ():
                    self.count(unit, out, by_id=not request)
                    yield out
        except Exception as exc:
            unit.errors.append(f"{source} raised {describe(exc)}")
            raise
        finally:
            if request:
                unit.requests -= 1
            self.check(unit)

    def count(self, unit: Unit, out: Any, *, by_id: bool = False) -> None:
        if isinstance(out, Request):
            if out.meta.get(UNIT_META) is None:
                out.meta[UNIT_META] = unit
                out.errback = _Errback(self, unit, out.errback)
                unit.requests += 1
        else:
            unit.items += 1
            if by_id:
                self._items[id(out)] = unit

    def failed(self, unit: Unit, reason: str) -> None:
        """A callback of the unit raised (units/middleware.py): the unit fails with that reason."""
        unit.errors.append(reason)

    def _item_done(self, item: Any, response: Response | Failure | None = None, **_: Any) -> None:
        self._settle(item, response, None)

    def _item_failed(self, item: Any, failure: Failure, response: Response | Failure | None = None, **_: Any) -> None:
        self._settle(item, response, f"storing an item failed: {failure.getErrorMessage()}")

    def _request_dropped(self, request: Request, **_: Any) -> None:
        unit = request.meta.get(UNIT_META)
        if isinstance(unit, Unit):  # never downloaded (the scheduler refused it): never called back
            unit.requests -= 1
            self.check(unit)

    def _settle(self, item: Any, response: Response | Failure | None, error: str | None) -> None:
        # a callback's item: its response's unit; an errback's: its failed request's; start()'s: by id
        request = response.request if isinstance(response, Response) else getattr(response, "request", None)
        unit = request.meta.get(UNIT_META) if isinstance(request, Request) else None
        if not isinstance(unit, Unit):
            unit = self._items.pop(id(item), None)
        if unit is None:
            return
        unit.items -= 1
        if error:
            unit.errors.append(error)
        else:
            hook = getattr(self.crawler.spider, "unit_item", None)
            if hook is not None:
                hook(unit, item)
        self.check(unit)

    # -- closing each unit exactly once ----------------------------------------------------------
    # When nothing of it is outstanding (check), with the outcome the spider gives (`unit_outcome`).
    # Pending closes hold the engine open (spider_idle), an idle crawl ends as soon as the last one
    # settles, and a stop awaits them before the drain is released.
    def _idle(self) -> None:
        # a unit still closing (a store waiting for its rows to be committed) keeps the crawl open:
        # the components its close needs (the database pool, the drain) close with the spider
        if self._closing:
            raise DontCloseSpider

    # -- progress ------------------------------------------------------------------------------
    # A long crawl (a state's hundred stores, a queue of thousands of tasks) says how far it is every
    # UNITS_PROGRESS_INTERVAL_S, when something moved: the units closed out of the `-a` targets, or
    # out of the tasks claimed so far (a drain's total is not known ahead). A crawl done within the
    # first interval says nothing.
    def _start_progress(self, role: str, targets: Sequence[Unit] | None) -> None:
        interval = self.crawler.settings.getfloat("UNITS_PROGRESS_INTERVAL_S")
        if interval > 0 and self._progress is None:
            self._progress = asyncio.ensure_future(self._report_progress(role, targets, interval))

    async def _report_progress(self, role: str, targets: Sequence[Unit] | None, interval: float) -> None:
        said: tuple[int, int] | None = None
        stats = self.crawler.stats
        assert stats is not None
        while True:
            await asyncio.sleep(interval)
            done = stats.get_value(UNITS_CLOSED_STAT, 0)
            if targets is not None:
                total, of = len(targets), "target(s)"
            else:
                total, of = (self.drain.claimed if self.drain else 0), "task(s) claimed so far"
            if (done, total) == said or (said is None and done >= total):  # nothing moved, or nothing to say yet
                continue
            said = done, total
            failed = sum(u.failed for u in targets) if targets is not None else (self.drain.failed if self.drain else 0)
            logger.info("%s: %d of %d %s done (%d failed)", role, done, total, of, failed)

    async def _spider_closed(self) -> None:
        """A stop (not idle) can find closes still pending: they finish before the crawl ends. Then
        the tasks still held go back to the queue (their attempt not counted), once the crawl database
        has closed the runs of the units still open as incomplete (counted: one close path, whatever
        the stop found them doing)."""
        if self._progress is not None:
            self._progress.cancel()
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        if self.drain is None:
            return
        await self.database.runs.closed.wait()
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


class _Errback:
    """A unit's request errback: the original's output counted for the unit, the request done."""

    def __init__(self, lifecycle: UnitLifecycle, unit: Unit, errback: Callable[[Failure], Any] | None):
        self.lifecycle, self.unit, self.errback = lifecycle, unit, errback
        self.__name__ = getattr(errback, "__name__", "errback")

    def __call__(self, failure: Failure) -> Any:
        request = getattr(failure, "request", None)
        if isinstance(request, Request):
            request.meta[ERRBACK_META] = True  # its output does not go through the middleware again
        if self.errback is None:
            self.unit.requests -= 1
            self.lifecycle.check(self.unit)
            return failure  # Scrapy logs it, as for any request without an errback
        try:
            output = self.errback(failure)
        except Exception as exc:
            self.unit.errors.append(f"{self.__name__} raised {describe(exc)}")
            self.unit.requests -= 1
            self.lifecycle.check(self.unit)
            raise
        return self.lifecycle.track(self.unit, output, source=self.__name__, request=True)
