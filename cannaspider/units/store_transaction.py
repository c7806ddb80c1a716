"""The transaction that records a store's close: the seed's out-of-stock rules and the task's
completion commit together or not at all (the SQL: db/store_close.py).

A complete crawl applies the seed's rules (misses reset for products in the feed, +1 for the
others, up to 3, 'oos' at 3) unless the OOS guard finds it suspect or its menu is empty (then it
records the store's empty menu instead), writes the product events and sets
dispensaries.last_crawl_at; an incomplete one marks nothing missing. Either way the crawl_runs
row gets its figures. A complete crawl checks its task's lease first, in the transaction: a crawl
whose lease expired (its task went back to the queue, maybe to another worker) must not mark
misses that the task's next crawl will mark again. The task completes on the same connection. A
lost lease, or a run that is no longer 'running' (failed by the queue, closed by a stop), rolls
all of it back: the run gets an incomplete close's figures instead, which change nothing of a run
closed already, so a close runs once.
"""

from __future__ import annotations

from typing import Any

import orjson
from psycopg_pool import AsyncConnectionPool

from cannaspider.db.store_close import CLOSE_COMPLETE, CLOSE_INCOMPLETE, OOS_AFTER_MISSES
from cannaspider.db.write_ledger import RunLedger
from cannaspider.tasks import queue
from cannaspider.tasks.drain import TaskDrain
from cannaspider.tasks.queue import LeaseLost, TaskResult
from cannaspider.units.store_outcome import StoreOutcome, StoreVerdict


class RunClosed(Exception):
    """The store's run was closed already (failed by the queue, closed by a stop): its close
    records nothing (the statement changed nothing; the transaction rolls back the task's part)."""


def close_figures(
    item: StoreOutcome, ledger: RunLedger | None, error: str | None, min_share: float, events: bool
) -> dict[str, Any]:
    """The close statement's parameters."""
    return {
        "d": item.dispensary_id,
        "seen": orjson.dumps(item.seen_product_ids).decode(),
        "limit": OOS_AFTER_MISSES,
        "run": item.crawl_run_id,
        "pages": item.pages_fetched,
        "seen_n": len(item.seen_product_ids),
        # a complete crawl that saw no product: an empty menu, no evidence (migrations/025_empty_menus.sql)
        "empty": not item.seen_product_ids,
        "new": ledger.inserted if ledger else 0,
        "errors": item.errors + (ledger.refused if ledger else 0),  # rows refused for their values count too
        "missed": 0,
        "oos": 0,
        "error": error,
        "min_share": min_share,
        "events": events,
    }


def task_result(item: StoreOutcome, figures: dict[str, Any]) -> TaskResult:
    return TaskResult(
        pages=item.pages_fetched,
        products=figures["seen_n"],
        new=figures["new"],
        missed=figures["missed"],
        oos=figures["oos"],
        crawl_run_id=item.crawl_run_id,
    )


async def record_close(
    pool: AsyncConnectionPool,
    item: StoreOutcome,
    figures: dict[str, Any],
    complete: bool,
    error: str | None,
    drain: TaskDrain | None,
) -> StoreVerdict:
    """Record the store's close (and complete its task, if it is complete and has one)."""
    verdict = StoreVerdict(complete, error, figures)
    async with pool.connection() as conn:
        if complete:
            try:
                async with conn.transaction():
                    if drain is not None and item.task is not None:
                        # the lease first: a crawl whose task is no longer ours records nothing
                        await queue.check_lease(conn, drain.lease(item.task))
                    row = await (await conn.execute(CLOSE_COMPLETE, figures)).fetchone()
                    assert row is not None  # the statement always returns its one row of figures
                    figures["missed"], figures["oos"] = row[0], row[1]
                    (
                        verdict.suspect,
                        verdict.seen_in_stock,
                        verdict.in_stock,
                        verdict.streak,
                        verdict.confirmed,
                        verdict.events,
                    ) = row[5:11]
                    verdict.empty, verdict.store_event, verdict.empty_since = row[12:15]
                    if not row[4]:
                        raise RunClosed(f"crawl run {item.crawl_run_id} is no longer running")
                    if drain is not None and item.task is not None:
                        await drain.complete(item.task, task_result(item, figures), conn=conn)
            except (LeaseLost, RunClosed) as exc:
                lost = "task was lost" if isinstance(exc, LeaseLost) else "run was closed already"
                error = f"the crawl's {lost} ({exc}): nothing recorded"
                verdict = StoreVerdict(False, error, figures, lost=True)
                figures["error"], figures["missed"], figures["oos"] = error, 0, 0
                await conn.execute(CLOSE_INCOMPLETE, figures)
        elif item.crawl_run_id is not None:
            await conn.execute(CLOSE_INCOMPLETE, figures)
    return verdict
