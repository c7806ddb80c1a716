"""The crawl's proxy pool: the `proxies` table re-read every STEALTH_PROXY_REFRESH_S, each proxy's
rotation state (scrapy-rotating-proxies' Proxies keyed by row id: IdStates, below), the
choice of a proxy for a request, and its health written back in batches every
STEALTH_HEALTH_FLUSH_S and at close (the batches and their UPDATE: cannaspider/stealth/proxies.py).

`success_count` and `failure_count` are lifetime counters (a success erases nothing). A proxy is
deactivated when STEALTH_PROXY_MAX_FAILURES of its last STEALTH_PROXY_ATTEMPT_WINDOW attempts (a
success, or a failure event) failed: in memory at once, and in the table with the next batch
(`recent_attempts`, stealth/proxies.py; `scrapy schedule` re-probes it, stealth/probe.py).
The window starts from the table's, so it spans crawls, and crawls sharing a proxy fill one window.

Failures are taken in the order they complete. One that completes within STEALTH_FAILURE_WINDOW_S
of the start of the proxy's current event, or whose request was sent before that event began
(it was in flight at that moment), is part of that event: its error is kept, it is not counted
again. Sixteen requests in flight through a proxy that blips for a second are one failure, not
sixteen. A success ends the event: the next failure is a new one, so a proxy that fails one
request in three under load has its failures counted (docs/stealth.md, "Failures").

A contract check (`scrapy check`: CONTRACT_MODE, cannaspider/contracts.py) keeps health in
memory only: a check is not traffic, and one run against a sandbox must not rate or deactivate
the pool's proxies.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

import psycopg
from rotating_proxies.expire import Proxies, ProxyState, exp_backoff_full_jitter
from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db.connection import database_url
from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.extensions import extension
from cannaspider.stealth.proxies import (
    ACTIVE_PROXIES,
    CRAWL_POOL,
    FAILURE,
    FLUSH_HEALTH,
    SUCCESS,
    FailureRule,
    HealthBatch,
    ProxyRecord,
    health_params,
    merge_unwritten,
    record_of,
)

logger = logging.getLogger(__name__)


class ProxyPools:
    """The crawler's proxy pools, one of each name, shared by the components that use them: the
    crawl's ('crawl'), and IMAGES_PROXY_POOL's when an operator gives images their own. A Scrapy
    extension enabled in EXTENSIONS (settings.py); a pool is made when a component first asks
    for it, and closed (its health written) when the spider closes."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.pools: dict[str, ProxyPool] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyPools:
        return cls(crawler)

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> ProxyPools:
        """The enabled extension. Available once the crawler's extensions are built: in
        components' from_crawler and at run time."""
        return extension(crawler, cls)

    def pool(self, name: str = CRAWL_POOL) -> ProxyPool:
        pool = self.pools.get(name)
        if pool is None:
            pool = self.pools[name] = ProxyPool(self.crawler, name)
            self.crawler.signals.connect(pool.close, signal=signals.spider_closed)
        return pool


class ProxyPool:
    def __init__(self, crawler: Crawler, name: str = CRAWL_POOL):
        self.crawler = crawler
        self.name = name  # the rows of `proxies` whose pool is this (migration 030)
        s = crawler.settings
        self.refresh_s = s.getfloat("STEALTH_PROXY_REFRESH_S")
        self.flush_s = s.getfloat("STEALTH_HEALTH_FLUSH_S")
        self.rule = FailureRule.from_settings(s)
        self.window_s = s.getfloat("STEALTH_FAILURE_WINDOW_S")
        self.reprobe_after_s = s.getfloat("PROXY_REPROBE_AFTER_S")
        base, cap = s.getfloat("STEALTH_PROXY_BACKOFF_S"), s.getfloat("STEALTH_PROXY_BACKOFF_CAP_S")
        self.states = IdStates(backoff(base, cap))
        self.records: dict[int, ProxyRecord] = {}
        self.attempts: dict[int, str] = {}  # each proxy's recent attempts, S or F, oldest first
        self.event_started: dict[int, float] = {}  # monotonic start of the proxy's current failure event
        self.pending: dict[int, HealthBatch] = {}
        self.loaded = False
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.write_health = not s.getbool("CONTRACT_MODE")

    @classmethod
    def for_crawler(cls, crawler: Crawler, name: str = CRAWL_POOL) -> ProxyPool:
        """The crawler's pool of that name (ProxyPools, above)."""
        return ProxyPools.for_crawler(crawler).pool(name)

    # -- the table ---------------------------------------------------------------------------
    async def ensure_loaded(self) -> None:
        """The first read of the table, once however many requests ask at the same time."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.loaded:
                await self.refresh()

    async def refresh(self) -> list[ProxyRecord]:
        """Re-read the active rows; returns them."""
        db = await CrawlDatabase.for_crawler(self.crawler).open()
        async with db.connection() as conn:
            rows = await (await conn.execute(ACTIVE_PROXIES, (self.name,))).fetchall()
        records = {r.id: r for r in map(record_of, rows)}
        for pid, record in records.items():
            if pid not in self.records or record != self.records[pid]:
                # a new row, one an operator edited or re-enabled, or other crawls' attempts: the
                # window is the table's, then this crawl's attempts not written yet
                unwritten = self.pending.get(pid)
                self.attempts[pid] = self._trim(record.recent_attempts + (unwritten.attempts if unwritten else ""))
            if pid not in self.records:  # new, or back in the pool: no failure event in course
                self.event_started.pop(pid, None)
        added = set(records) - set(self.records)
        removed = set(self.records) - set(records)
        if self.loaded and (added or removed):
            logger.info("proxy pool: %d active (%d added, %d removed)", len(records), len(added), len(removed))
        self.records = records
        self.states.sync(set(records))
        self.loaded = True
        self._start_loop()
        return list(records.values())

    def _start_loop(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        next_refresh = time.monotonic() + self.refresh_s
        while not self._closed:
            await asyncio.sleep(min(self.flush_s, max(0.05, next_refresh - time.monotonic())))
            try:
                self.states.reanimate()
                await self.flush()
                if time.monotonic() >= next_refresh:
                    next_refresh = time.monotonic() + self.refresh_s
                    await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - an outage: health waits in memory for the next batch
                logger.warning("proxy pool: could not sync with the proxies table: %s", exc)

    async def flush(self) -> None:
        if not self.write_health:
            self.pending.clear()
        if not self.pending:
            return
        batch, self.pending = self.pending, {}
        params = [health_params(pid, h, self.rule, self.reprobe_after_s) for pid, h in sorted(batch.items())]
        try:
            if self._closed:
                # at close the crawl's pool may already be gone (spider_closed handlers run in turn)
                url = database_url(self.crawler.settings)
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    async with conn.cursor() as cur:
                        await cur.executemany(FLUSH_HEALTH, params)
                return
            db = await CrawlDatabase.for_crawler(self.crawler).open()
            async with db.connection() as conn:
                async with conn.cursor() as cur:
                    await cur.executemany(FLUSH_HEALTH, params)
        except BaseException:
            # an outage, or close() cancelling the sync loop in mid-write (CancelledError is no
            # Exception): the transaction was rolled back, so the batch is kept for the next try
            # (merged with what came since) — the close's own flush writes it
            merge_unwritten(self.pending, batch)
            raise

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the sync task's own failure was logged when it happened
                pass
            self._task = None
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 - a crawl's close must not fail on it: logged
            logger.error("proxy pool: proxy health of this crawl could not be written: %s", exc)

    # -- choosing and recording --------------------------------------------------------------
    def choose(self, avoid: frozenset[int] | set[int] = frozenset(), browser: bool = False) -> ProxyRecord | None:
        """A good or unchecked proxy, not one of `avoid` (those that already failed this request)
        when there is another; when every active proxy is backing off, the one whose backoff
        ends first; None when none is active. For a browser page (`browser`) only a proxy
        Chromium can use (ProxyRecord.browser_refusal)."""
        self.states.reanimate()
        usable = {p for p, r in self.records.items() if not browser or r.browser_refusal is None}
        fresh = [p for p in self.states.good | self.states.unchecked if p in usable]
        if fresh:
            others = [p for p in fresh if p not in avoid]
            return self.records[random.choice(others or fresh)]
        dead = sorted(
            (p for p in self.states.dead if p in usable),
            key=lambda p: (p in avoid, self.states.proxies[p].next_check or 0),
        )
        return self.records[dead[0]] if dead else None

    def is_active(self, proxy_id: int) -> bool:
        return proxy_id in self.records

    def record_success(self, proxy_id: int, seconds: float | None) -> None:
        if proxy_id not in self.records:
            return
        self.states.mark_good(proxy_id)
        self.event_started.pop(proxy_id, None)  # the proxy worked again: the next failure is a new event
        h = self._attempt(proxy_id, SUCCESS)
        h.successes += 1
        h.total_ms += (seconds or 0.0) * 1000
        h.last_used_at = datetime.now(UTC)

    def _trim(self, attempts: str) -> str:
        return attempts[-self.rule.window :]

    def _attempt(self, proxy_id: int, outcome: str) -> HealthBatch:
        """One more attempt in the proxy's window and in its batch."""
        self.attempts[proxy_id] = self._trim(self.attempts.get(proxy_id, "") + outcome)
        h = self.pending.setdefault(proxy_id, HealthBatch())
        h.attempts = self._trim(h.attempts + outcome)
        return h

    def record_failure(self, proxy_id: int, error: str, sent_at: float | None = None) -> bool:
        """Record a failure of a request sent at `sent_at` (time.monotonic(); None: unknown); it
        counts unless it is part of the proxy's current failure event (see the module docstring).
        True when it deactivated the proxy."""
        if proxy_id not in self.records:
            return False
        now = datetime.now(UTC)
        moment = time.monotonic()
        started = self.event_started.get(proxy_id)
        if started is not None and (moment - started < self.window_s or (sent_at is not None and sent_at <= started)):
            h = self.pending.setdefault(proxy_id, HealthBatch())
            h.last_failure_at = h.last_used_at = now
            h.last_error = error[:500]
            self.crawler.stats.inc_value("cannaspider/proxy_failures_in_one_event")
            return False
        self.event_started[proxy_id] = moment
        h = self._attempt(proxy_id, FAILURE)
        h.last_failure_at = h.last_used_at = now
        h.last_error = error[:500]
        h.failures += 1
        window = self.attempts[proxy_id]
        if not self.rule.deactivates(window):
            self.states.mark_dead(proxy_id)
            return False
        record = self.records.pop(proxy_id)
        self.states.sync(set(self.records))
        logger.warning(
            "proxy #%d %s deactivated: %d of its last %d attempts failed (last: %s)",
            record.id,
            record.masked,
            window.count(FAILURE),
            len(window),
            error,
        )
        self.crawler.stats.inc_value("cannaspider/proxies_deactivated")
        return True


# Each proxy's rotation state, by scrapy-rotating-proxies' own state machine (`Proxies`: good,
# unchecked, dead with an exponential, jittered backoff and reanimation), so that the pool
# (stealth/pool.py) rotates as RotatingProxyMiddleware does. Rotating-proxies keys its proxies by
# URL string; ours are rows whose address an operator may edit, so they are keyed by row id (see
# stealth/proxies.py), and the set of ids follows the `proxies` table as the pool re-reads it.


class IdStates(Proxies):  # type: ignore[misc]  # rotating_proxies is untyped
    """rotating_proxies' state machine keyed by proxy row id instead of a URL string."""

    def __init__(self, backoff: Callable[[int], float]) -> None:
        self.proxies: dict[int, ProxyState] = {}
        self.proxies_by_hostport: dict[str, int] = {}  # unused: we never look proxies up by address
        self.unchecked: set[int] = set()
        self.good: set[int] = set()
        self.dead: set[int] = set()
        self.backoff = backoff

    def sync(self, ids: set[int]) -> None:
        """Take in new rows, forget rows that were disabled or deleted."""
        for gone in set(self.proxies) - ids:
            del self.proxies[gone]
            self.unchecked.discard(gone)
            self.good.discard(gone)
            self.dead.discard(gone)
        for new in ids - set(self.proxies):
            self.proxies[new] = ProxyState()
            self.unchecked.add(new)


def _no_backoff(attempt: int) -> float:
    return 0.0


def backoff(base_s: float, cap_s: float) -> Callable[[int], float]:
    """A failed proxy's backoff: rotating-proxies' full-jitter exponential from STEALTH_PROXY_BACKOFF_S
    up to STEALTH_PROXY_BACKOFF_CAP_S; none when the base is 0."""
    return partial(exp_backoff_full_jitter, base=base_s, cap=cap_s) if base_s > 0 else _no_backoff
