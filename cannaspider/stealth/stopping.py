"""When the stealth layer cannot go on (no active proxy, no identity): failure = alert + stop.

There is no fallback to a direct connection or a default identity. The crawl stops with an ALERT
line (and the crawl's fatal error stat), and every Dutchie request still queued then fails at once
with ProxyBlocked, so each store's crawl run closes as incomplete. A spider draining its queue with
follow=1 does not stop when the pool empties: its tasks go back and it waits for an active proxy
(PoolOutage, below; docs/stealth.md, "When the pool empties"), then `resume` lets requests through again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.crawl_outcome import record_fatal_error
from cannaspider.db.errors import first_line
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
        (its tasks given back either way: stealth/stopping.py)."""
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


# A queue-draining crawl whose proxy pool empties (docs/stealth.md, "When the pool empties").
#
# Without a proxy nothing can be crawled, and every task the process holds or claims would fail at
# once and burn an attempt (a follow=1 drainer would burn them all, for as long as the outage
# lasts). So the held tasks are given back (pending again, the attempt not counted: TaskDrain's
# release) and the drain claims nothing more (its `may_claim` hook). Without follow the drain then
# ends and the crawl stops with its alert, as before. With follow the table is re-read every
# STEALTH_OUTAGE_POLL_S (health first written, so a proxy just deactivated is not read back as
# active); once a row is active again, `on_end` lets the middleware send requests again and the
# drain claims again.

logger = logging.getLogger(__name__)


class PoolOutage:
    def __init__(self, crawler: Crawler, pool: ProxyPool):
        self.pool = pool
        self.poll_s = crawler.settings.getfloat("STEALTH_OUTAGE_POLL_S")
        self.reason: str | None = None  # set while the outage lasts
        self._jobs: set[asyncio.Future[None]] = set()
        crawler.signals.connect(self.close, signal=signals.spider_closed)

    def begin(self, why: str, drain: TaskDrain, on_end: Callable[[], None]) -> None:
        """Give the held tasks back, claim nothing; with follow, wait for a proxy, then on_end()."""
        if self.reason is not None:
            return
        self.reason = why
        drain.may_claim = lambda: self.reason is None
        self._spawn(self._give_back(drain))
        if drain.config.follow:
            self._spawn(self._wait_for_proxies(drain, on_end))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        job = asyncio.ensure_future(coro)
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)

    async def _give_back(self, drain: TaskDrain) -> None:
        try:
            released = await drain.release_all()
        except Exception as exc:  # noqa: BLE001 - the database too: the leases expire, the tasks run again
            logger.error("could not give the %s tasks back to the queue: %s", drain.role, first_line(exc))
            return
        logger.warning(
            "%d %s task(s) given back to the queue, attempts not counted: %s", released, drain.role, self.reason
        )

    async def _wait_for_proxies(self, drain: TaskDrain, on_end: Callable[[], None]) -> None:
        while self.reason is not None:
            await asyncio.sleep(self.poll_s)
            try:
                await self.pool.flush()
                records = await self.pool.refresh()
            except Exception as exc:  # noqa: BLE001 - the database restarts: ask again at the next poll
                logger.warning("proxy pool: could not read the proxies table: %s", first_line(exc))
                continue
            if records:
                logger.warning("proxy pool: %d active proxy(ies) again: the %s queue goes on", len(records), drain.role)
                self.reason = None
                on_end()

    async def close(self) -> None:
        for job in list(self._jobs):
            job.cancel()
        await asyncio.gather(*self._jobs, return_exceptions=True)
