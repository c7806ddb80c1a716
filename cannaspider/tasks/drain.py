"""Draining a role's queue from one process that runs several tasks at once (a spider's start()).

    drain = TaskDrain.from_crawler(crawler, "product_resync")
    async for task in drain.tasks():              # claims in batches as slots free up
        ...start the store's crawl for task...     # the lease is renewed in the background
    # when that store's crawl ends:
    await drain.complete(task, TaskResult(...))    # or drain.fail(task, error, crawl_run_id)

`tasks()` hands out at most `slots` tasks at a time; completing or failing one frees its slot.
Without `follow` it ends when nothing is held and a claim finds nothing; with `follow` it waits
for work (LISTEN on the queue's channel, with a poll every `poll_s` as a safety net for tasks whose
run_after comes due) until `stop()`. `close()` stops claiming and releases what is still held
(pending again, the attempt not counted): call it when the process stops (Scrapy: spider_closed).

A task whose lease is lost (it expired while this process stalled, or an operator cancelled it)
leaves `held`; `on_lost` is called with it, and complete()/fail() for it raise LeaseLost.
Completions not given a connection are batched: those arriving in the same event-loop turn are
written by one statement.

Its claims also make the snapshot partitions of the months ahead, at most every
PARTITIONS_EVERY_S (db/partitions.py): a drainer may run across a month's end with no schedule.

This module is the drain's slots and the loop that fills them. Beside it, a module each: its limits
(drain_config.py: DrainConfig, re-exported here), its connection through restarts and outages
(drain_connection.py), the writing of outcomes (drain_outcomes.py), the renewal of its leases
(drain_leases.py) and what wakes it (drain_wakeups.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from scrapy import signals
from scrapy.crawler import Crawler

from cannaspider.db import partitions
from cannaspider.shutdown import on_reactor_shutdown
from cannaspider.tasks import queue, roles
from cannaspider.tasks.drain_config import DrainConfig
from cannaspider.tasks.drain_connection import OutageWait, QueueConnection
from cannaspider.tasks.drain_leases import LeaseKeeper
from cannaspider.tasks.drain_outcomes import Outcomes
from cannaspider.tasks.drain_wakeups import Wakeup
from cannaspider.tasks.queue import Lease, LeaseLost, Task, TaskResult

__all__ = ["DrainConfig", "TaskDrain"]

logger = logging.getLogger(__name__)

# the drain of each crawler that drains a queue (TaskDrain.of): components find it there
_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, TaskDrain] = weakref.WeakKeyDictionary()


class TaskDrain:
    def __init__(
        self,
        url: str,
        role: str,
        config: DrainConfig,
        *,
        worker: str | None = None,
        on_lost: Callable[[Task], Any] | None = None,
    ):
        roles.get(role)  # TaskInputError for a role no spider declares
        self.url = url
        self.role = role
        self.config = config
        self.worker = worker or queue.worker_name()
        self.on_lost = on_lost
        # None, or asked before each claim: False while this process cannot work (no active proxy:
        # middlewares/stealth.py). Nothing is claimed then; with follow, the drain waits and asks again.
        self.may_claim: Callable[[], bool] | None = None
        self.held: dict[int, Task] = {}
        self.claimed = self.completed = self.failed = self.released = 0
        self._db = QueueConnection(url, config.reconnect_s)
        self._outcomes = Outcomes(self._db, config.backoff)
        self._leases = LeaseKeeper(self._db, role, self.held, config.lease_s, config.heartbeat_s)
        self._wake = Wakeup()
        self._partitions = partitions.EveryInterval()
        self._stopping = False
        self._background: list[asyncio.Task[None]] = []
        # with follow, the current wait between claims in a database outage
        self._outage = OutageWait(role, config.poll_s, config.outage_wait_max_s)

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, role: str, url: str, *, close_with_spider: bool = True, **overrides: Any
    ) -> TaskDrain:
        """A drain configured by the TASK_* settings (follow from overrides, e.g. the spider's
        `-a follow=1`), released when the spider closes (or, without `close_with_spider`, by
        whoever built it: the unit lifecycle, once its units are closed)."""
        drain = cls(url, role, DrainConfig.from_settings(crawler.settings, **overrides))
        if close_with_spider:
            crawler.signals.connect(drain.close, signal=signals.spider_closed)
        on_reactor_shutdown(drain.close)
        _BY_CRAWLER[crawler] = drain
        return drain

    @staticmethod
    def of(crawler: Crawler) -> TaskDrain | None:
        """The drain built for this crawler by from_crawler, if its spider drains a queue."""
        return _BY_CRAWLER.get(crawler)

    # -- claiming --------------------------------------------------------------------------------
    async def tasks(self) -> AsyncIterator[Task]:
        """Claimed tasks, as slots free up (see the module docstring)."""
        self._start_background()
        while not self._stopping:
            free = self.config.slots - len(self.held)
            claimed: list[Task] = []
            if free > 0 and (self.may_claim is None or self.may_claim()):
                self._wake.clear()
                got = await self._claim_through_outages(min(free, self.config.batch))
                if got is None:
                    continue
                claimed = got
                for task in claimed:
                    self.held[task.id] = task
                self.claimed += len(claimed)
                for task in claimed:
                    if self._stopping:
                        break
                    yield task
                if claimed:
                    continue
            if not self.held and not self.config.follow:
                return  # queue empty, nothing running
            await self._wait()

    async def _claim_through_outages(self, limit: int) -> list[Task] | None:
        """A claim. With follow, a database unreachable for longer than reconnect_s is waited out
        (a log line, a doubling wait up to outage_wait_max_s; None: try again) instead of ending
        the drain: a long-running drainer goes on once the server is back (issue 16)."""
        try:
            claimed: list[Task] = await self._db.run(functools.partial(self._claim, limit))
        except psycopg.OperationalError as exc:
            if not self.config.follow:
                raise
            await self._sleep_unless_stopped(self._outage.longer(exc))
            return None
        self._outage.over()
        return claimed

    async def _sleep_unless_stopped(self, seconds: float) -> None:
        self._wake.clear()
        if not self._stopping:
            await self._wake.wait(seconds)

    async def _claim(self, limit: int, conn: psycopg.AsyncConnection) -> list[Task]:
        if self._partitions.due():  # a drainer runs for weeks: its claims make the months ahead
            async with conn.transaction():
                await partitions.ensure_ahead(conn)
        return await queue.claim(conn, self.role, self.worker, limit, lease_s=self.config.lease_s)

    async def _wait(self) -> None:
        """Until a slot frees up, a task is announced, stop(), or the poll interval passes."""
        timeout = self.config.poll_s if (self.config.follow or self.held) else 0
        await self._wake.wait(timeout or None)
        self._wake.clear()

    def _free_slot(self, task_id: int) -> None:
        if self.held.pop(task_id, None) is not None:
            self._wake.set()

    # -- outcomes ---------------------------------------------------------------------------------
    def lease(self, task: Task) -> Lease:
        if task.id not in self.held:
            raise LeaseLost(f"task {task.id} is not held by this worker")
        return task.lease

    async def complete(
        self, task: Task, result: TaskResult | None = None, conn: psycopg.AsyncConnection | None = None
    ) -> None:
        """Complete a held task. With `conn`, inside the caller's transaction (commit the crawl's
        outcome and the task together); without, batched with other completions of this turn."""
        lease = self.lease(task)
        try:
            await self._outcomes.complete(lease, result, conn)
            self.completed += 1
        finally:
            self._free_slot(task.id)

    async def fail(self, task: Task, error: str, crawl_run_id: int | None = None, *, final: bool = False) -> None:
        """Record a failed attempt of a held task (retried after a backoff, or failed for good:
        attempts used up, or `final`)."""
        lease = self.lease(task)
        try:
            if await self._outcomes.fail([(lease, error, crawl_run_id)], final=final):
                raise LeaseLost(f"task {task.id}: lease lost")
            self.failed += 1
        finally:
            self._free_slot(task.id)

    async def fail_claimable(self, error: str) -> int:
        """Claim one batch and fail it at once with `error` (retried after the backoff): a worker
        that cannot work (no active proxy) says why on the tasks instead of leaving them silent."""
        claimed = await self._db.run(functools.partial(self._claim, self.config.batch))
        if claimed:
            await self._outcomes.fail([(task.lease, error, None) for task in claimed])
        self.claimed += len(claimed)
        self.failed += len(claimed)
        return len(claimed)

    # -- lease renewal and wake-ups ----------------------------------------------------------------
    def _start_background(self) -> None:
        if self._background:
            return
        self._background.append(asyncio.ensure_future(self._leases.keep(self.heartbeat)))
        if self.config.follow and self.config.listen:
            listen = self._wake.listen(self.url, self.role, lambda: not self._stopping, self.config.poll_s)
            self._background.append(asyncio.ensure_future(listen))

    async def heartbeat(self) -> set[int]:
        """Renew every held lease now; tasks found lost leave `held` (and go to on_lost)."""
        return await self._leases.renew(self._free_slot, self.on_lost)

    # -- stopping ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Claim nothing more; tasks() returns at its next step. Held tasks stay held."""
        self._stopping = True
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT → stop() (outside Scrapy, which handles these signals itself)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    async def release_all(self) -> int:
        leases = [t.lease for t in self.held.values()]
        if not leases:
            return 0
        released = await self._db.run(lambda c: queue.release(c, leases))
        for task_id in list(self.held):
            self._free_slot(task_id)
        self.released += len(released)
        return len(released)

    async def close(self) -> None:
        """stop(), give back what is held, end the background work, close the connections."""
        self.stop()
        try:
            if self._outcomes.pending:
                await self._outcomes.flush()
            released = await self.release_all()
            if released:
                logger.info("task queue: released %d %s task(s) on stop", released, self.role)
        finally:
            for job in self._background:
                job.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
            self._background.clear()
            await self._db.close()
