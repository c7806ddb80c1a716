"""Product crawls: a store's menu page by page, asked of the store's platform (`dispensaries.platform`,
through cannaspider/platforms/interface.py) and paginated by that platform's rules, so one
`product_resync` drains the stores of every platform. `product_discovery` (first crawl) and
`product_resync` (every 4 hours) share this code and differ only in role.

    scrapy crawl product_resync -a dispensary_id=12          one store
    scrapy crawl product_resync -a dispensary_id=12,13,14    several
    scrapy crawl product_resync -a state=AZ                  every resolved, enabled store of a state
    scrapy crawl product_resync [-a follow=1]                drain the product_resync queue

Each store's crawl is one unit of the lifecycle (units/lifecycle.py), a queue task's or a target's
of `-a`: the lifecycle closes it once none of its pages or products is outstanding, and its close
(units/crawl_close.py) applies the misses/OOS and completes the task in one transaction
(units/crawl_close.py), or closes the run incomplete and fails the task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from scrapy import Request
from scrapy.http import Response
from twisted.python.failure import Failure

from cannaspider.db.errors import first_line
from cannaspider.items import RawProduct
from cannaspider.platforms.interface import MenuState, Platform, PlatformFailure
from cannaspider.spiders.base import PlatformSpider
from cannaspider.tasks import roles
from cannaspider.tasks.queue import Task
from cannaspider.units.crawl_close import CrawlClose, StoreOutcome
from cannaspider.units.lifecycle import Closing, Unit, UnitLifecycle


@dataclass
class StoreCrawl:
    dispensary_id: int
    platform_id: str
    crawl_run_id: int | None
    pages: MenuState
    platform: Platform
    products_yielded: int = 0
    errors: int = 0
    done: bool = False  # its last page (or its first failure) is known
    complete: bool = False
    error: str | None = None
    log_name: str = field(default="")
    task: Task | None = None  # the queue's task this crawl does (None: an explicit target)
    lost: bool = False  # the task's lease was lost: stop crawling, record nothing


class ProductSpider(PlatformSpider):
    name = "product_resync"
    role = roles.get(name)  # its target and schedule: cannaspider/tasks/roles.py
    pipelines_setting = "PRODUCT_PIPELINES"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._task_crawls: dict[int, StoreCrawl] = {}  # the drained tasks' crawls still running

    async def start(self) -> AsyncIterator[Any]:
        units = UnitLifecycle.of(self.crawler)
        targets = None if self.draining else await self._targets()
        if self.draining:
            drain = await units.open_drain(self.name, self.params.follow)
            drain.on_lost = self._task_lost
        async for unit in units.units(self.name, self.params.follow, targets):
            dispensary_id: int = unit.target["dispensary_id"]  # a product role's target (StoreTarget)
            task = unit.task
            try:
                row = await self._store(dispensary_id)
                if isinstance(row, str):
                    await units.close(unit, (row, True))
                    continue
                name, platform_id, platform_name = row
                platform = self.platform(platform_name)
                run_id = await self.store.start_run(dispensary_id, self.name, task.lease if task else None)
            except Exception as exc:  # noqa: BLE001 - the database: this attempt failed, the queue retries
                await units.close(unit, (f"starting the crawl failed: {first_line(exc)}", False))
                continue
            crawl = StoreCrawl(
                dispensary_id, platform_id, run_id, platform.menu_state(), platform, log_name=name, task=task
            )
            if task is not None:
                self._task_crawls[task.id] = crawl
            unit.data["crawl"] = crawl
            async for out in units.start(unit, [self._page_request(crawl, 0)]):
                yield out

    async def _targets(self) -> list[Unit]:
        """The `-a` targets' units: the stores named that can be crawled (the others are skipped,
        each with the reason, as the arguments' choice rather than a unit that failed)."""
        rows = await self.select_dispensaries(
            "id, name, platform_dispensary_id, crawl_enabled", state_filter="AND crawl_enabled"
        )
        targets = []
        for dispensary_id, name, platform_id, enabled in rows:
            if not enabled:
                self.logger.warning("dispensary %s (%s) has crawl_enabled = false: skipped", dispensary_id, name)
            elif not platform_id:
                self.logger.error(
                    "dispensary %s (%s) has no platform_dispensary_id: run entry_point_discovery first",
                    dispensary_id,
                    name,
                )
            else:
                targets.append(Unit(target={"dispensary_id": dispensary_id}))
        return targets

    async def _store(self, dispensary_id: int) -> tuple[str, str, str] | str:
        """(name, platform id, platform) of a unit's store, or why it cannot be crawled (retrying
        cannot help)."""
        pool = await self.store.open()
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT name, platform_dispensary_id, crawl_enabled, platform FROM dispensaries WHERE id = %s",
                    (dispensary_id,),
                )
            ).fetchone()
        if row is None:
            return f"dispensary {dispensary_id} does not exist"
        name, platform_id, enabled, platform_name = row
        if not enabled:
            return f"dispensary {dispensary_id} ({name}) has crawl_enabled = false"
        if not platform_id:
            return f"dispensary {dispensary_id} ({name}) has no platform_dispensary_id: run entry_point_discovery"
        return name, platform_id, platform_name

    def _task_lost(self, task: Task) -> None:
        crawl = self._task_crawls.get(task.id)
        if crawl is not None:
            crawl.lost = True  # its next page ends the crawl, incomplete

    def _page_request(self, crawl: StoreCrawl, page: int) -> Request:
        return crawl.platform.menu_request(
            crawl.platform_id,
            page,
            crawl.pages.per_page,
            callback=self.parse_products,
            errback=self.on_error,
            meta={"store_crawl": crawl, "page": page},
        )

    def contract_meta(self, platform: str, target: dict[str, Any]) -> dict[str, Any]:
        chosen = self.platform(platform)
        crawl = StoreCrawl(0, target["platform_id"], None, chosen.menu_state(target["per_page"], 100), chosen)
        return {"store_crawl": crawl, "page": target["page"]}

    def parse_products(self, response: Response) -> Iterator[RawProduct | Request]:
        """One FilteredProducts page: its products, then the next page (or the store's crawl ends).

        @graphql FilteredProducts store=sandbox:AZ:0 page=0 perPage=100
        @returns items 100 100
        @returns requests 1 1
        @scrapes dispensary_id raw page
        """
        crawl: StoreCrawl = response.meta["store_crawl"]
        page: int = response.meta["page"]
        if crawl.lost:
            task_id = crawl.task.id if crawl.task else "?"
            yield from self._incomplete(crawl, f"page {page}: task {task_id} lost its lease")
            return
        platform = crawl.platform
        answer = self.counted(platform.read_menu_page(response))
        if isinstance(answer, PlatformFailure):
            yield from self._incomplete(crawl, f"page {page}: {answer.message}")
            return
        if answer.malformed is not None:
            yield from self._incomplete(crawl, f"page {page}: {answer.malformed}")
            return
        ids: list[str] = []
        repeated: list[str] = []
        anonymous = 0
        for raw in answer.products:
            pid = platform.product_id(raw)
            if pid is None:
                # still yielded (the normalizer skips it with a warning), but the crawl can no
                # longer be complete (the "anonymous" reason, docs/platforms.md)
                anonymous += 1
            elif pid in crawl.pages.seen or pid in ids:
                self.logger.warning(
                    "dispensary %s: page %s repeats product %s: kept once", crawl.dispensary_id, page, pid
                )
                self.crawler.stats.inc_value("cannaspider/duplicate_products")
                repeated.append(pid)
                continue
            else:
                ids.append(pid)
            crawl.products_yielded += 1
            yield RawProduct(crawl.dispensary_id, crawl.crawl_run_id, raw, page, platform.name)
        if anonymous:
            self.crawler.stats.inc_value("cannaspider/products_without_id", anonymous)
        asked = crawl.pages.per_page
        decision = platform.after_page(crawl.pages, page, ids + repeated, answer.page_info, anonymous)
        if crawl.pages.per_page != asked:
            self.logger.warning(
                "dispensary %s: the server caps perPage at %d (DUTCHIE_PER_PAGE = %d): asking for %d per "
                "page for the rest of this store's crawl",
                crawl.dispensary_id,
                crawl.pages.per_page,
                asked,
                crawl.pages.per_page,
            )
            self.crawler.stats.inc_value("cannaspider/per_page_capped")
        if decision.next_page is not None:
            yield self._page_request(crawl, decision.next_page)
        elif decision.complete:
            self._end(crawl, True)
        else:
            yield from self._incomplete(crawl, decision.reason)

    def _end(self, crawl: StoreCrawl, complete: bool, error: str | None = None) -> None:
        if crawl.done:
            return
        crawl.done, crawl.complete, crawl.error = True, complete, error
        if crawl.task is not None:
            self._task_crawls.pop(crawl.task.id, None)

    def _incomplete(self, crawl: StoreCrawl, reason: str) -> Iterator[RawProduct | Request]:
        """The store's crawl ends incomplete (a generator: a callback's whole output)."""
        crawl.errors += 1
        self.logger.warning(
            "dispensary %s (%s): %s: crawl incomplete, no product will be marked missing",
            crawl.dispensary_id,
            crawl.log_name,
            reason,
        )
        self._end(crawl, False, reason)
        yield from ()

    @staticmethod
    def outcome(crawl: StoreCrawl) -> StoreOutcome:
        return StoreOutcome(
            dispensary_id=crawl.dispensary_id,
            crawl_run_id=crawl.crawl_run_id,
            complete=crawl.complete,
            seen_product_ids=list(crawl.pages.seen),
            products_yielded=crawl.products_yielded,
            pages_fetched=crawl.pages.pages_fetched,
            errors=crawl.errors,
            error=crawl.error,
            task=crawl.task,
        )

    async def unit_outcome(self, unit: Unit) -> Closing:
        """The store's close: nothing of its crawl is outstanding any more (units/lifecycle.py).
        It records the task's outcome itself, in the transaction of the store's misses/OOS."""
        crawl: StoreCrawl = unit.data["crawl"]
        if not crawl.done:  # its last request ended without saying how (never downloaded, no errback)
            list(self._incomplete(crawl, unit.errors[0] if unit.errors else "the crawl ended before its last page"))
        unit.data["outcome"] = outcome = self.outcome(crawl)
        await CrawlClose.for_crawler(self.crawler).close(outcome)
        return None

    def unit_failed(self, response: Response, reason: str) -> list[Any] | None:
        """A callback raised (units/middleware.py): the store's crawl ends incomplete, which
        fails its task (the attempt counted)."""
        crawl: StoreCrawl | None = response.meta.get("store_crawl")
        if crawl is None:
            return None
        return list(self._incomplete(crawl, f"page {response.meta.get('page')}: {reason}"))

    def on_error(self, failure: Failure) -> Iterator[RawProduct | Request]:
        request = getattr(failure, "request", None)  # set by Scrapy on a request's failure
        crawl: StoreCrawl | None = request.meta.get("store_crawl") if request is not None else None
        reason = f"request failed: {failure.type.__name__ if failure.type else 'error'}: {failure.getErrorMessage()}"
        if crawl is None or request is None:
            self.logger.error(reason)
            return
        yield from self._incomplete(crawl, f"page {request.meta.get('page')}: {reason}")


class ProductDiscoverySpider(ProductSpider):
    name = "product_discovery"
    role = roles.get(name)  # its target, the first run of product_resync: tasks/roles.py
