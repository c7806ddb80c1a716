"""The spider middleware of the unit lifecycle (units/lifecycle.py), closest to the spider.

Each callback's output is counted for the unit its response works for (request meta UNIT_META):
the requests it yields join the unit, its items are the unit's until they leave the pipelines,
and the response's request is done once the output is exhausted (errbacks are counted by the
wrapper the lifecycle gives each unit's request: Scrapy sends their output past the middlewares).

A callback that raises closes its unit (docs/operations.md, "When a callback raises"). Scrapy
never sends a callback's exception to the request's errback: it goes to process_spider_exception
and, unhandled, is only logged, so a unit whose last request ended that way would never close —
its task's lease kept alive by the heartbeat, the drainer waiting for it forever, a stop giving the
task back with its attempt not counted, for the next worker to hang on (issue 16). Any exception
(a RecursionError from json.loads on a 5000-level response as much as a bug) is instead logged
once with its traceback, counted (`cannaspider/callback_errors/<type>`), recorded as the unit's
error (its task fails and retries with the queue's backoff, `failed` once its attempts are used
up), and the spider's `unit_failed(response, reason)`, when it has one, says what to emit instead
(a product crawl's store ends incomplete). A response of no unit whose spider has no
`unit_failed` answer is left to Scrapy.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Response

from cannaspider.units.lifecycle import ERRBACK_META, UNIT_META, Unit, UnitLifecycle, describe

logger = logging.getLogger(__name__)


class UnitTrackingMiddleware:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.units = UnitLifecycle.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UnitTrackingMiddleware:
        return cls(crawler)

    @staticmethod
    def _unit(response: Response) -> Unit | None:
        if response.meta.get(ERRBACK_META):
            return None  # an errback's output: counted by the request's errback wrapper
        unit = response.meta.get(UNIT_META)
        return unit if isinstance(unit, Unit) else None

    @staticmethod
    def _source(response: Response) -> str:
        return getattr(response.request.callback, "__name__", "callback") if response.request else "callback"

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        unit = self._unit(response)
        if unit is None:
            async for out in result:
                yield out
            return
        async for out in self.units.track(unit, result, source=self._source(response), request=True):
            yield out

    def process_spider_exception(self, response: Response, exception: Exception) -> Iterable[Any] | None:
        unit = self._unit(response)
        reason = f"{self._source(response)} raised {describe(exception)}"
        unit_failed = getattr(self.crawler.spider, "unit_failed", None)
        outputs = unit_failed(response, reason) if unit_failed is not None else None
        if unit is None and outputs is None:
            return None  # not a unit's response: Scrapy logs it as a spider error
        logger.error("%s on %s: its unit of work is closed as failed", reason, response.url, exc_info=exception)
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"cannaspider/callback_errors/{type(exception).__name__}")
        if unit is not None:
            self.units.failed(unit, reason)
        return list(outputs or ())
