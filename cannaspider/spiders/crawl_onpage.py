"""SERP competitor pages through a self-hosted Firecrawl (docs/onpage.md).

    scrapy crawl crawl_onpage -a keyword_id=N[,N…] [-O onpage.json]
    scrapy crawl crawl_onpage [-a follow=1]         drain the crawl_onpage queue (one keyword per task)

Every keyword runs at once (OnpageJobs.crawl_keyword, one coroutine each); within a keyword,
every locale is one Firecrawl batch polled about every FIRECRAWL_POLL_INTERVAL_S. Firecrawl
calls are Scrapy requests sent through the engine's downloader; the waits between polls hold
nothing, so the keywords finish in about the time of the slowest one. Pages are read in parser
processes of their own, each within ONPAGE_PARSE_TIMEOUT_S (firecrawl/parser_pool.py), ended with
the crawl. Results are merged into
keywords.serp by the job itself (one statement per locale), and each competitor is also yielded
as a CompetitorPage item for feeds. No item pipeline runs. Draining, a task completes with the
job's totals, or fails (retried later unless Firecrawl refused the request itself). Either way
each keyword is a unit of units/lifecycle.py (`UnitLifecycle.run`): a target of `-a` that failed
is counted incomplete, and the crawl closes `onpage_failed` (exit 3).

The job (firecrawl/job.py: its page parser loads trafilatura, extruct and their kin) is imported
when this spider is built, not with its module: Scrapy imports every spider module on each start
of `scrapy`, whichever spider runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self, cast

import scrapy
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, UsageError
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.firecrawl.api import FirecrawlClient
from cannaspider.firecrawl.items import CompetitorPage
from cannaspider.tasks import roles
from cannaspider.tasks.queue import TaskResult
from cannaspider.units.arguments import SpiderParams
from cannaspider.units.lifecycle import Outcome, Unit, UnitLifecycle, describe

if TYPE_CHECKING:
    from cannaspider.firecrawl.job import OnpageJobs


class CrawlOnpageSpider(scrapy.Spider):
    name = "crawl_onpage"
    role = roles.get(name)  # its target: cannaspider/tasks/roles.py
    jobs: OnpageJobs

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        # the job writes its own merge; the Dutchie pipelines have nothing to do with its items
        settings.set("ITEM_PIPELINES", {}, priority="spider")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        params, runner_args = SpiderParams.of_spider(self.name, frozenset({"keyword_id"}), kwargs)
        super().__init__(*args, **runner_args)
        self.keyword_ids = list(params.keyword_ids)
        self.follow = params.follow
        self.results: dict[int, dict[str, Any]] = {}
        self._items: asyncio.Queue[CompetitorPage] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        from cannaspider.firecrawl.job import MISSING_URL, OnpageConfig, OnpageJobs  # noqa: PLC0415 - a command's start-up time

        spider = super().from_crawler(crawler, *args, **kwargs)
        config = OnpageConfig.from_settings(crawler.settings)
        if not config.api_url and spider.keyword_ids:
            # before the engine exists: one line on stderr and exit 2, nothing started or written
            raise UsageError(MISSING_URL, print_help=False)
        client = None
        if config.api_url:
            client = FirecrawlClient(
                lambda request: crawler.engine.download_async(request),
                config.api_url,
                config.api_key,
                page_timeout_ms=config.page_timeout_ms,
                request_timeout_s=config.request_timeout_s,
            )
        # built now, but reads crawler.stats and the store (an extension, built after the spider)
        # only once the crawl runs; the job only calls its stats' inc_value, which _LazyStats forwards
        stats = cast(StatsCollector, _LazyStats(crawler))
        spider.jobs = OnpageJobs(config, client, lambda: CrawlDatabase.for_crawler(crawler).open(), spider._emit, stats)
        return spider

    def closed(self, reason: str) -> None:
        """Scrapy calls this when the crawl ends: the page parser processes end with it."""
        self.jobs.close()

    def _emit(self, item: CompetitorPage) -> None:
        assert self._items is not None
        self._items.put_nowait(item)

    async def run_keyword(self, keyword_id: int) -> dict[str, Any]:
        """One keyword's job; its result ({crawled, blocked, failed}, or {error, retryable})."""
        from cannaspider.firecrawl.job import OnpageJobError  # noqa: PLC0415 - as from_crawler's (imported there)

        try:
            result: dict[str, Any] = await self.jobs.crawl_keyword(keyword_id)
        except OnpageJobError as exc:
            result = {"error": str(exc), "retryable": exc.retryable}
        except Exception as exc:  # e.g. a RecursionError on a hostile answer: the unit fails
            self.logger.exception("keyword %s: on-page crawl FAILED", keyword_id)
            result = {"error": f"the on-page crawl raised {describe(exc)}", "retryable": True}
        self.results[keyword_id] = result
        return result

    async def start(self) -> AsyncIterator[CompetitorPage]:
        from cannaspider.firecrawl.job import MISSING_URL  # noqa: PLC0415 - as from_crawler's (imported there)

        units = UnitLifecycle.of(self.crawler)
        if self.jobs.client is None:  # draining (from_crawler refused explicit keywords already)
            # No Firecrawl to send the work to: the queued tasks say why (failed for a retry, as
            # without an active proxy), then one line and the crawl's fatal error (exit 2); nothing
            # to wait for with follow=1 (the URL is a setting: a restart brings it)
            await units.cannot_work(
                MISSING_URL, "firecrawl_unconfigured", role=self.name, draining=True, follow=self.follow
            )
        self._items = asyncio.Queue()
        # a keyword per unit (units/lifecycle.py): the -a targets, or else the queue's tasks
        targets = [Unit(target={"keyword_id": k}) for k in self.keyword_ids] if self.keyword_ids else None
        running = asyncio.ensure_future(units.run(self.name, self.follow, self._unit_outcome, targets=targets))
        async for item in _drain(self._items, {running}):
            yield item
        failed = sorted(unit.target["keyword_id"] for unit in running.result()) if targets else []
        if failed:  # each counted incomplete by the lifecycle (the crawl command's exit)
            self.logger.error("on-page crawl failed for keyword(s) %s", ", ".join(map(str, failed)))
            raise CloseSpider("onpage_failed")

    async def _unit_outcome(self, unit: Unit) -> Outcome:
        """A keyword's unit: its job's totals, or why it failed (for good: Firecrawl refused it)."""
        keyword_id: int = unit.target["keyword_id"]  # the role's target (KeywordTarget), a task's or an -a one
        result = await self.run_keyword(keyword_id)
        if "error" in result:
            return result["error"], not result.get("retryable", True)
        counts = {k: int(v) for k, v in result.items()}
        return TaskResult(pages=sum(counts.values()), extra=counts), False


class _LazyStats:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler

    def inc_value(self, key: str, count: int = 1) -> None:
        self.crawler.stats.inc_value(key, count)


async def _drain(
    queue: asyncio.Queue[CompetitorPage], pending: set[asyncio.Future[Any]]
) -> AsyncIterator[CompetitorPage]:
    """Items from the queue as they come, until every task is over and the queue is empty."""
    while True:
        while not queue.empty():
            yield queue.get_nowait()
        if not pending:
            return
        getter = asyncio.ensure_future(queue.get())
        done, _ = await asyncio.wait(pending | {getter}, return_when=asyncio.FIRST_COMPLETED)
        pending -= done
        if getter in done:
            yield getter.result()
        else:
            getter.cancel()
