"""Ending an idle crawl as soon as the work that held it open settles (docs/architecture.md,
"Unit lifecycle").

A component that keeps the engine open past its downloads (a spider_idle handler that raises
DontCloseSpider: the unit lifecycle while closes are pending, the image pipeline while its store
queries and downloads are out) must wake the engine when that work is done. Otherwise the engine
looks again only on its next heartbeat (5 s), and Scrapy 2.19 has no public "check idle now".
`end_if_idle` runs the engine's own idle check with public APIs: `engine.spider_is_idle()`, then
`spider_idle` through `send_catch_log`, then `engine.close_spider_async` unless a handler raised
DontCloseSpider (a CloseSpider's reason is the close's reason, as the engine does it).
"""

from __future__ import annotations

import asyncio
import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from twisted.python.failure import Failure

from cannaspider.db.errors import first_line

logger = logging.getLogger(__name__)

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
    # a second close (the heartbeat's, in the meantime) awaits this one: it is harmless
    ending = asyncio.ensure_future(engine.close_spider_async(reason=reason))
    _ENDING.add(ending)
    ending.add_done_callback(_ended)
    return True


def _ended(job: asyncio.Future[None]) -> None:
    _ENDING.discard(job)
    if not job.cancelled() and (exc := job.exception()) is not None:
        logger.error("closing the idle crawl failed: %s: %s", type(exc).__name__, first_line(exc))
