"""The analytics_refresh role (docs/analytics.md): refreshes the analytics materialized views.
A spider because Scrapyd runs only spiders; it sends no request.

    scrapy crawl analytics_refresh                  drain the role's queue: one refresh per task
    scrapy crawl analytics_refresh -a follow=1      the same, waiting for tasks until stopped (Scrapyd)
    scrapy crawl analytics_refresh -a once=1        refresh once (no task involved)

Without an argument it drains, as every role does: `scrapy schedule --scrapyd` starts it so, and a
refresh run per start instead of per task would refresh on every tick that finds the node free
and never complete the day's task (docs/analytics.md, "The refresh").

Each refresh is a unit of units/lifecycle.py (`UnitLifecycle.run`): the one refresh, or a task's,
run one at a time.

Each view's duration and row count go to the crawl's stats (`analytics/<view>/duration_ms`,
`analytics/<view>/rows`), to the analytics_refreshes table and, for a task, to its result.
A refresh that fails fails its task (retried with the queue's backoff).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import scrapy

from cannaspider.analytics.refresh import RefreshResult, refresh_all
from cannaspider.db.connection import database_url
from cannaspider.db.errors import first_line
from cannaspider.tasks import roles
from cannaspider.tasks.queue import TaskResult
from cannaspider.units.arguments import SpiderArgumentError, SpiderParams
from cannaspider.units.lifecycle import Outcome, Unit, UnitLifecycle, describe

ROLE = "analytics_refresh"


class AnalyticsRefreshSpider(scrapy.Spider):
    name = ROLE
    role = roles.get(name)  # its schedule: cannaspider/tasks/roles.py
    custom_settings = {"ITEM_PIPELINES": {}}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        params, runner_args = SpiderParams.of_spider(ROLE, frozenset({"once"}), kwargs)
        if params.once and params.follow:
            raise SpiderArgumentError(f"{ROLE}: once=1 refreshes once without the queue: give it no follow")
        self.follow = params.follow
        self.use_queue = not params.once
        super().__init__(*args, **runner_args)
        self.results: list[RefreshResult] = []

    async def start(self) -> AsyncIterator[Any]:
        assert self.crawler is not None
        url = await asyncio.to_thread(database_url, self.crawler.settings)
        # once=1: the crawl's one unit is "refresh once" (a Unit without a task)
        targets = None if self.use_queue else [Unit()]
        await UnitLifecycle.of(self.crawler).run(
            ROLE, self.follow, lambda unit: self._unit_outcome(unit, url), targets=targets, one_at_a_time=True
        )
        return
        yield  # an async generator that yields nothing

    async def _unit_outcome(self, unit: Unit, url: str) -> Outcome:
        """A refresh's unit: the views' figures, or why it failed (a task's attempt counted)."""
        try:
            results = await self.refresh(url)
        except Exception as exc:  # whatever it is, the unit fails (logged here: a traceback unless the database)
            expected = isinstance(exc, (psycopg.Error, LookupError))  # the database's: one line is enough
            reason = first_line(exc) if expected else describe(exc)
            self.logger.error("analytics refresh failed: %s", reason, exc_info=None if expected else exc)
            # counted for the exit by the lifecycle (a target's) or by the drain (a task's), as every role's
            return reason, False
        return TaskResult(extra={"views": [r.as_json() for r in results]}), False

    async def refresh(self, url: str) -> list[RefreshResult]:
        assert self.crawler is not None
        stats = self.crawler.stats
        assert stats is not None
        work_mem = self.crawler.settings["ANALYTICS_REFRESH_WORK_MEM"]
        parts = self.crawler.settings.getint("ANALYTICS_ROLL_PARTS")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            results = await refresh_all(conn, work_mem, parts, url)
        for r in results:
            stats.set_value(f"analytics/{r.view}/duration_ms", r.duration_ms)
            stats.set_value(f"analytics/{r.view}/rows", r.rows)
            self.logger.info(
                "refreshed %s (%s): %d rows in %d ms",
                r.view,
                r.method,
                r.rows,
                r.duration_ms,
            )
        stats.inc_value("analytics/refreshes")
        self.results = results
        return results
