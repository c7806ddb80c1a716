"""The liveness of the crawl_runs this process opened (migrations/006).

A crawl_runs row is 'running' until its store's crawl closes it. A process that dies (kill -9, a
lost machine) cannot close its rows, and a row left 'running' would read as a crawl still going:
so each open run carries a heartbeat, stamped every CRAWL_RUN_HEARTBEAT_S, and the host and pid
of its process. The next crawl to open closes as 'failed' the runs of dead processes: no
heartbeat for CRAWL_RUN_STALE_AFTER_S, or a pid gone on this host (known at once, without waiting
for the heartbeat to go stale). Runs still open when this crawl closes (a stop, a shutdown) are
closed as 'incomplete' with the reason, so nothing is marked missing.

The pool is the crawler's CrawlDatabase's (db/crawl_database.py), which runs these at its open and close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable
from typing import Protocol

import psycopg
from psycopg_pool import AsyncConnectionPool
from scrapy.crawler import Crawler

from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT
from cannaspider.db.errors import first_line

logger = logging.getLogger(__name__)


class TaskLease(Protocol):
    """The lease a run of a queue task is opened under (the queue's `Lease`, tasks/queue/model.py),
    as this ledger reads it: the database layer sits beneath the queue and imports nothing of it."""

    @property
    def task_id(self) -> int: ...
    @property
    def worker(self) -> str: ...
    @property
    def attempt(self) -> int: ...


FAIL_DEAD_RUNS = """
UPDATE crawl_runs
   SET status = 'failed', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       error = CASE WHEN id = ANY(%(dead)s)
                    THEN format('abandoned: its crawl process (pid %%s on %%s) ended without closing it', pid, host)
                    ELSE format('abandoned: no heartbeat from its crawl process since %%s', heartbeat_at)
               END
 WHERE status = 'running'
   AND (id = ANY(%(dead)s) OR heartbeat_at < now() - make_interval(secs => %(stale)s))
RETURNING id
"""
CLOSE_OPEN_RUNS = """
UPDATE crawl_runs
   SET status = 'incomplete', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       errors = errors + 1, error = %(error)s
 WHERE id = ANY(%(runs)s) AND status = 'running'
RETURNING id
"""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class CrawlRuns:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.settings = crawler.settings
        self.open_ids: set[int] = set()  # crawl_runs this process opened and may still be open
        # the task lease each queued run was opened under, until its store's close (forget)
        self.leases: dict[int, TaskLease] = {}
        # set once spider_closed has closed the runs still open (units/lifecycle.py releases the
        # queue's tasks only then: a stopped store's run is 'incomplete', never 'released')
        self.closed = asyncio.Event()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._heartbeat: asyncio.Task[None] | None = None

    async def start(self, pool: AsyncConnectionPool, dispensary_id: int, role: str, lease: TaskLease | None) -> int:
        task_id = lease.task_id if lease is not None else None
        async with pool.connection() as conn:
            row = await (
                await conn.execute(
                    "INSERT INTO crawl_runs (dispensary_id, role, task_id, host, pid) VALUES (%s, %s, %s, %s, %s) "
                    "RETURNING id",
                    (dispensary_id, role, task_id, self.host, self.pid),
                )
            ).fetchone()
        assert row is not None  # INSERT … RETURNING returns its row
        run_id: int = row[0]
        self.open_ids.add(run_id)
        if lease is not None:
            self.leases[run_id] = lease
        return run_id

    def forget(self, run_id: int | None) -> None:
        """The run's store is closed: its rows are settled, its lease no longer needed."""
        if run_id is not None:
            self.leases.pop(run_id, None)

    def leases_of(self, run_ids: Iterable[object]) -> list[dict[str, object]]:
        """The task leases under which these runs were opened (runs of an explicit target have
        none): the fencing tokens of their product writes (pipelines/product_writer.py)."""
        return [
            {"run": run, "id": lease.task_id, "worker": lease.worker, "attempt": lease.attempt}
            for run in set(run_ids)
            if isinstance(run, int) and (lease := self.leases.get(run)) is not None
        ]

    async def fail_dead(self, conn: psycopg.AsyncConnection) -> None:
        """Close as failed the runs whose process died: a pid gone on this host, or no heartbeat."""
        rows = await (
            await conn.execute(
                "SELECT id, pid FROM crawl_runs WHERE status = 'running' AND host = %s AND pid <> %s",
                (self.host, self.pid),
            )
        ).fetchall()
        dead = [run_id for run_id, pid in rows if not _pid_alive(pid)]
        stale = self.settings.getfloat("CRAWL_RUN_STALE_AFTER_S")
        failed = await (await conn.execute(FAIL_DEAD_RUNS, {"dead": dead, "stale": stale})).fetchall()
        if failed:
            logger.warning(
                "%d crawl run(s) of crawl processes that died were still 'running': marked failed (ids %s)",
                len(failed),
                ", ".join(str(row[0]) for row in failed),
            )

    def start_heartbeat(self, pool: Callable[[], AsyncConnectionPool | None]) -> None:
        self._heartbeat = asyncio.ensure_future(self.beat(pool))

    async def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat

    async def beat(self, pool: Callable[[], AsyncConnectionPool | None]) -> None:
        """Every CRAWL_RUN_HEARTBEAT_S: one statement stamps all the runs this process has open.

        `pool` is asked at every beat: the store's pool is None while it is closed."""
        interval = self.settings.getfloat("CRAWL_RUN_HEARTBEAT_S")
        while True:
            await asyncio.sleep(interval)
            current = pool()
            if not self.open_ids or current is None:
                continue
            sent = set(self.open_ids)
            try:
                async with current.connection(timeout=interval) as conn:
                    rows = await (
                        await conn.execute(
                            "UPDATE crawl_runs SET heartbeat_at = now() WHERE id = ANY(%s) AND status = 'running' "
                            "RETURNING id",
                            (list(sent),),
                        )
                    ).fetchall()
            except psycopg.Error as exc:
                logger.warning("crawl-run heartbeat failed: %s", first_line(exc))
                continue
            self.open_ids -= sent - {row[0] for row in rows}  # closed since: no more beats

    async def close_open(self, pool: AsyncConnectionPool, reason: str) -> None:
        if reason == "finished":
            error = "the crawl finished without closing this store's crawl"
        else:
            error = f"the crawl was stopped ({reason}) before this store's crawl finished"
        async with pool.connection() as conn:
            closed = await (
                await conn.execute(CLOSE_OPEN_RUNS, {"runs": list(self.open_ids), "error": error})
            ).fetchall()
        self.open_ids.clear()
        if closed:
            self.crawler.stats.inc_value(UNITS_INCOMPLETE_STAT, len(closed))
            logger.warning(
                "%d store crawl(s) still open when the crawl closed (%s): marked incomplete, nothing marked missing",
                len(closed),
                reason,
            )
