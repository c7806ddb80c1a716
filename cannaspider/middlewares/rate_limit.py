"""HTTP 429 (Too Many Requests): wait as the server asks, then send the request again.

Without this, a 429 reaches the spider as an HttpError and the store's crawl ends incomplete at
once. The wait is `Retry-After` (seconds or an HTTP date), else an exponential backoff from
RATE_LIMIT_BACKOFF_S; it never exceeds RATE_LIMIT_MAX_WAIT_S, and a request is sent again at most
RATE_LIMIT_MAX_RETRIES times. Past either bound the 429 goes on to the spider, whose crawl of that
store then ends incomplete (nothing is marked missing). The wait is an asyncio sleep inside the
download chain: the reactor keeps serving other requests, and the waiting request still counts as
in progress, so the crawl does not close under it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

RETRIES_META = "rate_limit_retries"


def retry_after_seconds(value: bytes | str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds from now (never negative); None when absent or unreadable."""
    if value is None:
        return None
    text = (value.decode("latin-1") if isinstance(value, bytes) else value).strip()
    if not text:
        return None
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class RetryAfterMiddleware:
    def __init__(self, stats: StatsCollector, *, max_retries: int, max_wait: float, backoff: float):
        self.stats = stats
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.backoff = backoff

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryAfterMiddleware:
        settings = crawler.settings
        assert crawler.stats is not None
        return cls(
            crawler.stats,
            max_retries=settings.getint("RATE_LIMIT_MAX_RETRIES"),
            max_wait=settings.getfloat("RATE_LIMIT_MAX_WAIT_S"),
            backoff=settings.getfloat("RATE_LIMIT_BACKOFF_S"),
        )

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        if response.status != 429:
            return response
        retries: int = request.meta.get(RETRIES_META, 0)
        asked = retry_after_seconds(response.headers.get("Retry-After"))
        wait = asked if asked is not None else min(self.backoff * 2**retries, self.max_wait)
        if retries >= self.max_retries or wait > self.max_wait:
            why = (
                f"still rate limited after {retries} retries (RATE_LIMIT_MAX_RETRIES)"
                if retries >= self.max_retries
                else f"Retry-After {wait:.0f} s exceeds RATE_LIMIT_MAX_WAIT_S ({self.max_wait:g} s)"
            )
            logger.warning("HTTP 429 for %s: %s; giving up on this request", request.url[:120], why)
            self.stats.inc_value("cannaspider/rate_limit_gave_up")
            return response
        self.stats.inc_value("cannaspider/rate_limit_retries")
        logger.info("HTTP 429: retrying in %.1f s (retry %d of %d)", wait, retries + 1, self.max_retries)
        await asyncio.sleep(wait)
        return request.replace(dont_filter=True, meta={**request.meta, RETRIES_META: retries + 1})
