"""A callback that raises closes the unit of work its response belongs to (docs/operations.md,
"When a callback raises").

Scrapy never sends a callback's exception to the request's errback: it goes to the spider
middlewares' process_spider_exception and, unhandled, is only logged. A unit of work (a store's
crawl, a drained task) whose last request ends that way would never close: its task's lease kept
alive by the heartbeat, the drainer waiting for it forever, and a stop giving the task back with
its attempt not counted, for the next worker to hang on (issue 16). Any exception — a
RecursionError from json.loads on a 5000-level response as much as a bug — is instead logged once
with its traceback, counted (`cannaspider/callback_errors/<type>`), and handed to the spider's
`unit_failed(response, reason)`, which closes the unit as incomplete (or records the error on its
task, which then fails and retries with the queue's backoff, `failed` once its attempts are used
up) and returns what to emit instead (a product crawl's CrawlCompletion). A spider without
`unit_failed`, or whose response belongs to no unit, leaves the exception to Scrapy.

This is the spider-middleware seam the unit-of-work component of issue 21 is to own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Response

from cannaspider.db.errors import first_line

logger = logging.getLogger(__name__)


def describe(exception: BaseException) -> str:
    """The one-line reason a unit fails with (secrets redacted, no traceback)."""
    return f"{type(exception).__name__}: {first_line(exception)}"


class UnitErrorsMiddleware:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UnitErrorsMiddleware:
        return cls(crawler)

    def process_spider_exception(self, response: Response, exception: Exception) -> Iterable[Any] | None:
        unit_failed = getattr(self.crawler.spider, "unit_failed", None)
        if unit_failed is None:
            return None
        callback = getattr(response.request.callback, "__name__", "callback") if response.request else "callback"
        reason = f"{callback} raised {describe(exception)}"
        outputs = unit_failed(response, reason)
        if outputs is None:
            return None  # not a unit's response: Scrapy logs it as a spider error
        logger.error("%s on %s: its unit of work is closed as failed", reason, response.url, exc_info=exception)
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"cannaspider/callback_errors/{type(exception).__name__}")
        return list(outputs)
