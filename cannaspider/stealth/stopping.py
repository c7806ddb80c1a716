"""When the stealth layer cannot go on (no active proxy, no identity): failure = alert + stop.

There is no fallback to a direct connection or a default identity. The crawl stops with an ALERT
line (and the crawl's fatal error stat), and every Dutchie request still queued then fails at once
with ProxyBlocked, so each store's crawl run closes as incomplete. A spider draining its queue with
follow=1 does not stop when the pool empties: its tasks go back and it waits for an active proxy
(stealth/outage.py), then `resume` lets requests through again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from scrapy.crawler import Crawler

from cannaspider.crawl_outcome import record_fatal_error
from cannaspider.stealth.outage import PoolOutage
from cannaspider.stealth.pool import ProxyPool
from cannaspider.tasks.drain import TaskDrain

logger = logging.getLogger(__name__)


class StealthStop:
    def __init__(self, crawler: Crawler, pool: ProxyPool, on_resume: Callable[[], None]) -> None:
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.outage = PoolOutage(crawler, pool)
        self.on_resume = on_resume
        self.reason: str | None = None  # why the crawl stopped (the alert), or waits for a proxy

    def pool_empty(self, why: str) -> None:
        """No proxy left: stop, or for a spider draining its queue with follow=1, wait for one
        (its tasks given back either way: stealth/outage.py)."""
        drain = TaskDrain.of(self.crawler)
        if drain is None or self.reason is not None:
            self.stop(why)
            return
        if drain.config.follow:
            self.reason = why
            self.stats.inc_value("cannaspider/proxy_outages")
            logger.critical(
                "ALERT: %s: the %s queue waits until a proxy is active again (crawls in progress end "
                "incomplete, their tasks go back to the queue)",
                why,
                drain.role,
            )
        else:
            self.stop(why)
        self.outage.begin(why, drain, on_end=self.resume)

    def resume(self) -> None:
        self.reason = None
        self.on_resume()

    def stop(self, why: str) -> None:
        if self.reason is not None:
            return
        self.reason = why
        message = f"ALERT: {why}: stopping the crawl (crawls in progress end incomplete)"
        logger.critical(message)
        record_fatal_error(self.stats, message)
