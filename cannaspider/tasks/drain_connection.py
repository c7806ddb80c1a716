"""A task drain's connection to the queue, through server restarts and outages.

The drain (cannaspider/tasks/drain.py) runs every queue operation of one process over one
connection, one operation at a time. `QueueConnection.run` reopens it when PostgreSQL drops it
(a restart) and tries the operation again for up to `reconnect_s`; past that the error is the
caller's. A drain with follow does not end on it: `OutageWait` says how long to wait before the
next claim (doubling up to a ceiling) and logs the outage and its end once each (issue 16).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg

from cannaspider.db.errors import first_line

logger = logging.getLogger(__name__)

T = TypeVar("T")


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
