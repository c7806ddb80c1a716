"""Writing the outcomes of a drain's tasks: completions, batched per event-loop turn, and failures.

A drain (cannaspider/tasks/drain.py) completes each task as its store's crawl ends, and several
can end in the same turn: those not given the crawl's own connection are written by one statement
(queue.complete_many), one round trip instead of one each. Each caller still waits for, and gets,
its own outcome: done, LeaseLost for a task whose lease was lost, or the error that failed the
whole batch. Failures are written at once, retried after the drain's backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import psycopg

from cannaspider.tasks import queue
from cannaspider.tasks.drain_connection import QueueConnection
from cannaspider.tasks.queue import Backoff, Lease, LeaseLost, TaskResult


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
