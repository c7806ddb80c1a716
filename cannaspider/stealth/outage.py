"""A queue-draining crawl whose proxy pool empties (docs/stealth.md, "When the pool empties").

Without a proxy nothing can be crawled, and every task the process holds or claims would fail at
once and burn an attempt (a follow=1 drainer would burn them all, for as long as the outage
lasts). So the held tasks are given back (pending again, the attempt not counted: TaskDrain's
release) and the drain claims nothing more (its `may_claim` hook). Without follow the drain then
ends and the crawl stops with its alert, as before. With follow the table is re-read every
STEALTH_OUTAGE_POLL_S (health first written, so a proxy just deactivated is not read back as
active); once a row is active again, `on_end` lets the middleware send requests again and the
drain claims again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db.errors import first_line
from cannaspider.stealth.pool import ProxyPool
from cannaspider.tasks.drain import TaskDrain

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
