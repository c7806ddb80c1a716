"""The task drain: one process draining a role's queue, several tasks at once (a spider's start()).

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

One component, read top to bottom: its limits (`DrainConfig`, read from the TASK_* settings), its
connection through restarts and outages (`QueueConnection`, `OutageWait`), what wakes it
(`Wakeup`), the renewal of its leases (`LeaseKeeper`), the writing of outcomes (`Outcomes`), and
the drain itself (`TaskDrain`): its slots and the loop that fills them. A crawl finds its drain
through `CrawlDrain`, a Scrapy extension (EXTENSIONS in settings.py): `TaskDrain.of(crawler)`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from cannaspider.db import partitions
from cannaspider.db.errors import first_line
from cannaspider.extensions import extension
from cannaspider.project_settings import project_settings
from cannaspider.shutdown import on_reactor_shutdown
from cannaspider.tasks import queue, roles
from cannaspider.tasks.queue import Backoff, Lease, LeaseLost, Task, TaskResult, task_backoff

__all__ = ["CrawlDrain", "DrainConfig", "TaskDrain"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CrawlDrain:
    """The crawl's task drain, where the components that record a task's outcome find it: a Scrapy
    extension (EXTENSIONS, settings.py). Empty until the spider opens a drain (a crawl of `-a`
    targets never does); the latest TaskDrain.from_crawler is the crawler's."""

    def __init__(self) -> None:
        self.drain: TaskDrain | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlDrain:
        return cls()


# -- limits ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrainConfig:
    """A drain's limits, read from the TASK_* settings (their defaults: settings.py, and only there)."""

    slots: int  # tasks held (stores crawled) at once
    batch: int  # most tasks claimed by one statement
    lease_s: float
    heartbeat_s: float
    follow: bool
    poll_s: float
    listen: bool  # wake on NOTIFY; False: poll only
    backoff: Backoff
    reconnect_s: float  # how long one queue operation retries a lost connection
    outage_wait_max_s: float  # with follow: longest wait between claims in an outage

    @classmethod
    def of_project(cls, **overrides: Any) -> DrainConfig:
        """The project's settings (a drain built without a crawler: tests, benchmarks)."""
        return cls.from_settings(project_settings(), **overrides)

    @classmethod
    def from_settings(cls, settings: BaseSettings, **overrides: Any) -> DrainConfig:
        values: dict[str, Any] = {
            "slots": settings.getint("TASK_SLOTS"),
            "batch": settings.getint("TASK_CLAIM_BATCH"),
            "lease_s": settings.getfloat("TASK_LEASE_S"),
            "heartbeat_s": settings.getfloat("TASK_HEARTBEAT_S"),
            "follow": False,  # a spider's -a follow=1, given as an override
            "poll_s": settings.getfloat("TASK_POLL_S"),
            "listen": settings.getbool("TASK_LISTEN"),
            "backoff": task_backoff(settings),
            "reconnect_s": settings.getfloat("TASK_RECONNECT_S"),
            "outage_wait_max_s": settings.getfloat("TASK_OUTAGE_WAIT_MAX_S"),
        }
        values.update(overrides)
        return cls(**values)


# -- the connection, through restarts and outages (issue 16) --------------------------------------
# Every queue operation of one process runs over one connection, one at a time. `QueueConnection.run`
# reopens it when PostgreSQL drops it (a restart) and tries the operation again for up to
# `reconnect_s`; past that the error is the caller's. A drain with follow does not end on it:
# `OutageWait` says how long to wait before the next claim (doubling up to a ceiling) and logs the
# outage and its end once each.
class QueueConnection:
    """One autocommit connection, opened on first use, shared by a drain's operations in turn."""

    def __init__(self, url: str, reconnect_s: float):
        self.url = url
        self.reconnect_s = reconnect_s
        self.conn: psycopg.AsyncConnection | None = None
        self._lock = asyncio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection:
        if self.conn is None or self.conn.closed:
            self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
            # The queue's own writes (claim, heartbeat, completion, release) do not wait for the WAL
            # flush. A server crash can lose the last few: a lost claim leaves the task pending (the
            # crawl's completion then gets LeaseLost), a lost completion lets the lease expire and
            # the task run again. Both are the at-least-once the queue gives anyway, and the flush
            # was most of a batch's cost. A completion made in the crawl's own transaction
            # (TaskDrain.complete(..., conn=)) commits as that connection does.
            await self.conn.execute("SET synchronous_commit TO off")
        return self.conn

    async def run(self, op: Callable[[psycopg.AsyncConnection], Awaitable[T]]) -> T:
        """Run op on the connection; reconnect (PostgreSQL restarted) and try again."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.reconnect_s
        delay = 0.1
        async with self._lock:
            while True:
                try:
                    return await op(await self._connection())
                except psycopg.OperationalError as exc:
                    await self.close()
                    if loop.time() + delay > give_up:
                        raise
                    logger.warning("task queue: database connection lost (%s): reconnecting", first_line(exc))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None


class OutageWait:
    """With follow, the wait between claims while the database stays unreachable: from `first_s`,
    doubling up to `max_s`, back to none once a claim goes through."""

    def __init__(self, role: str, first_s: float, max_s: float):
        self.role = role
        self.first_s = first_s
        self.max_s = max_s
        self.seconds = 0.0  # the current wait; 0: no outage

    def longer(self, exc: psycopg.OperationalError) -> float:
        """The wait after a claim failed with exc (logged)."""
        self.seconds = min(max(self.seconds * 2, self.first_s), self.max_s)
        logger.warning(
            "task queue: the database is still unreachable (%s): the %s drain claims again in %.0f s",
            first_line(exc),
            self.role,
            self.seconds,
        )
        return self.seconds

    def over(self) -> None:
        """A claim went through: the outage, if there was one, is over (logged)."""
        if self.seconds:
            logger.info("task queue: the database is back: the %s drain goes on", self.role)
            self.seconds = 0.0


# -- wake-ups -----------------------------------------------------------------------------------
# The drain waits on one `Wakeup` whatever it waits for (a slot freed, stop(), a task of its role
# announced by the queue: LISTEN on its NOTIFY channel, migration 007, or a timeout), so a wait for
# a slot also ends on an announcement and the reverse. The LISTEN connection is the drain's second,
# apart from the one its operations share; it is reopened (polling meanwhile) when the server drops it.
class Wakeup:
    """An event that a waiting drain wakes on; `wait` ends on it or on its timeout."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    async def wait(self, timeout: float | None) -> None:
        """Until set, or `timeout` seconds (None: no timeout)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass

    async def listen(self, url: str, role: str, listening: Callable[[], bool], retry_max_s: float) -> None:
        """Set on every announcement of a task of `role`, while `listening()`."""
        delay = 0.5
        while listening():
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=10) as conn:
                    await conn.execute(f"LISTEN {queue.NOTIFY_CHANNEL}")
                    self.set()  # anything queued while we were not listening
                    delay = 0.5
                    async for note in conn.notifies():
                        if note.payload == role:
                            self.set()
            except psycopg.OperationalError as exc:
                logger.warning("task queue: LISTEN connection lost (%s): polling until it is back", first_line(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, retry_max_s)


# -- leases ---------------------------------------------------------------------------------------
# A task whose lease is found lost (expired while the process stalled, or cancelled by an operator)
# leaves the drain's slots, is logged, and goes to the drain's `on_lost`; its result will not be
# recorded. A failed renewal is only logged: a lease outlives a few missed beats.
class LeaseKeeper:
    """Renews the leases of `held` (the drain's own dict) over the drain's connection."""

    def __init__(self, db: QueueConnection, role: str, held: dict[int, Task], lease_s: float, heartbeat_s: float):
        self.db = db
        self.role = role
        self.held = held
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s

    async def renew(self, free_slot: Callable[[int], None], on_lost: Callable[[Task], Any] | None) -> set[int]:
        """Renew every held lease now: the ids still held. A lost one's slot is freed (free_slot)."""
        tasks = list(self.held.values())
        if not tasks:
            return set()
        alive: set[int] = await self.db.run(
            lambda c: queue.heartbeat(c, [t.lease for t in tasks], lease_s=self.lease_s)
        )
        for task in tasks:
            if task.id not in alive and task.id in self.held:
                logger.warning("task %s (%s): lease lost: its result will not be recorded", task.id, self.role)
                free_slot(task.id)
                if on_lost is not None:
                    on_lost(task)
        return alive

    async def keep(self, heartbeat: Callable[[], Awaitable[object]]) -> None:
        """heartbeat() every heartbeat_s, until cancelled."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await heartbeat()
            except psycopg.Error as exc:  # the lease outlives a few missed beats
                logger.warning("task queue: heartbeat failed: %s", first_line(exc))


# -- outcomes -------------------------------------------------------------------------------------
# Several crawls can end in the same event-loop turn: completions not given the crawl's own
# connection are written by one statement (queue.complete_many), one round trip instead of one each.
# Each caller still waits for, and gets, its own outcome: done, LeaseLost for a task whose lease was
# lost, or the error that failed the whole batch. Failures are written at once, retried after the
# drain's backoff.
class Outcomes:
    """A drain's writes of outcomes, over its connection; the completions waiting for the next flush."""

    def __init__(self, db: QueueConnection, backoff: Backoff):
        self.db = db
        self.backoff = backoff
        self._pending: list[tuple[Lease, TaskResult, asyncio.Future[None]]] = []
        self._flush_scheduled = False

    async def complete(self, lease: Lease, result: TaskResult | None, conn: psycopg.AsyncConnection | None) -> None:
        """With `conn`, inside the caller's transaction; without, once this turn's completions are
        written. LeaseLost: not recorded."""
        if conn is not None:
            await queue.complete(conn, lease, result)
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((lease, result or TaskResult(), future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(lambda: asyncio.ensure_future(self.flush()))
        await future

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    async def flush(self) -> None:
        """Write the completions pending now, and settle each one's wait."""
        self._flush_scheduled = False
        batch, self._pending = self._pending, []
        try:
            lost = await self.db.run(lambda c: queue.complete_many(c, [(lease, result) for lease, result, _ in batch]))
        except Exception as exc:  # noqa: BLE001 - whatever failed the batch is each waiting completion's error
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        lost_ids = {lease.task_id for lease in lost}
        for lease, _, future in batch:
            if future.done():
                continue
            if lease.task_id in lost_ids:
                future.set_exception(LeaseLost(f"task {lease.task_id}: lease lost"))
            else:
                future.set_result(None)

    async def fail(self, failures: Sequence[tuple[Lease, str, int | None]], *, final: bool = False) -> list[Lease]:
        """Record failed attempts (lease, error, crawl_run_id): retried after the backoff, or failed
        for good (attempts used up, or `final`). The leases found lost are returned."""
        lost: list[Lease] = await self.db.run(lambda c: queue.fail_many(c, failures, self.backoff, final=final))
        return lost


# -- the drain -------------------------------------------------------------------------------------
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
        extension(crawler, CrawlDrain).drain = drain
        return drain

    @staticmethod
    def of(crawler: Crawler) -> TaskDrain | None:
        """The drain built for this crawler by from_crawler, if its spider drains a queue."""
        return extension(crawler, CrawlDrain).drain

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
