"""Claiming tasks and holding them: claim, heartbeat, check_lease, release, requeue_expired.

A claimed task is held under a `Lease` (task id, worker, attempt). Heartbeat, complete, fail and
release only act while that lease is still the task's current one (`HELD`): a worker whose lease
expired and whose task went to another worker gets `LeaseLost` and must not record anything of
its crawl. The life of a task (the outcomes are in `outcomes.py`):

    enqueue ─► pending ─claim─► running ─complete─► completed (+ chained tasks)
                  ▲                │ fail: attempts left → pending after a backoff; else failed
                  └────────────────┤ lease expired (worker died) → pending, the attempt counted
                                   │ release (worker stopping) → pending, the attempt not counted
                                   └ cancel → cancelled          retry (failed/cancelled) → pending
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import psycopg
from psycopg.rows import dict_row

from cannaspider.tasks import roles
from cannaspider.tasks.queue.model import COLUMNS, Lease, LeaseLost, Task, task_from_row

LEASE_COLUMNS = "id bigint, worker text, attempt integer"
LEASES = f"SELECT * FROM jsonb_to_recordset(%(leases)s::jsonb) AS l({LEASE_COLUMNS})"
HELD = "t.id = l.id AND t.status = 'running' AND t.claimed_by = l.worker AND t.attempts = l.attempt"


def leases_param(leases: Sequence[Lease], **columns: Sequence[object]) -> dict[str, str]:
    """The leases (and per-lease values) as one JSON parameter: PostgreSQL parses it in C, where
    psycopg's array dumping escaped every string in Python (a third of a batch's client time)."""
    rows: list[dict[str, object]] = [
        {"id": lease.task_id, "worker": lease.worker, "attempt": lease.attempt} for lease in leases
    ]
    for name, values in columns.items():
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return {"leases": orjson.dumps(rows).decode()}


def interval_s(seconds: float) -> str:
    return f"{float(seconds)} seconds"


async def claim(
    conn: psycopg.AsyncConnection[Any], role: str, worker: str, limit: int = 1, *, lease_s: float
) -> list[Task]:
    """Up to `limit` tasks of `role` (claim_task(): priority DESC, created_at ASC, SKIP LOCKED,
    never a second running task of a store, run_after respected). Expired leases of the role go
    back to the queue first."""
    roles.get(role)
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        rows = await (
            await cur.execute(
                f"SELECT {COLUMNS} FROM claim_task(%s, %s, %s, %s::interval)",
                (role, worker, limit, interval_s(lease_s)),
            )
        ).fetchall()
    return [task_from_row(r) for r in rows]


async def heartbeat(conn: psycopg.AsyncConnection[Any], leases: Sequence[Lease], *, lease_s: float) -> set[int]:
    """Renew the leases; returns the ids still held (the others were lost)."""
    if not leases:
        return set()
    async with conn.transaction():
        rows = await (
            await conn.execute(
                f"UPDATE worker_tasks t SET heartbeat_at = now(), lease_expires_at = now() + %(lease)s::interval "
                f"FROM ({LEASES}) l WHERE {HELD} RETURNING t.id",
                {**leases_param(leases), "lease": interval_s(lease_s)},
            )
        ).fetchall()
    return {r[0] for r in rows}


async def check_lease(conn: psycopg.AsyncConnection[Any], lease: Lease) -> None:
    """Lock the task row in the caller's transaction if the lease is still held, else LeaseLost.

    A crawl that commits its outcome (misses, out-of-stock) calls this first in the same
    transaction: a crawl whose task expired and went to another worker then records nothing.
    """
    row = await (
        await conn.execute(
            "SELECT 1 FROM worker_tasks WHERE id = %s AND status = 'running' AND claimed_by = %s AND attempts = %s "
            "FOR UPDATE",
            (lease.task_id, lease.worker, lease.attempt),
        )
    ).fetchone()
    if row is None:
        raise LeaseLost(f"task {lease.task_id}: lease lost (expired, re-claimed or cancelled)")


RELEASE = f"""
WITH l AS ({LEASES}), released AS (
    UPDATE worker_tasks t
       SET status = 'pending', attempts = greatest(t.attempts - 1, 0), claimed_by = NULL,
           lease_expires_at = NULL, updated_at = now()
      FROM l WHERE {HELD}
    RETURNING t.id
), runs AS (
    UPDATE crawl_runs SET status = 'failed', finished_at = now(),
           duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
           error = 'released: the worker stopped before the crawl completed'
     WHERE status = 'running' AND task_id IN (SELECT id FROM released)
)
SELECT id FROM released
"""


async def release(conn: psycopg.AsyncConnection[Any], leases: Sequence[Lease]) -> set[int]:
    """Give tasks back (the worker is stopping): pending again, this attempt not counted. Their
    unfinished crawl runs are closed as failed (an unfinished crawl marks nothing missing)."""
    if not leases:
        return set()
    async with conn.transaction():
        rows = await (await conn.execute(RELEASE, leases_param(leases))).fetchall()
    return {r[0] for r in rows}


async def requeue_expired(conn: psycopg.AsyncConnection[Any], role: str | None = None) -> int:
    async with conn.transaction():
        row = await (await conn.execute("SELECT requeue_expired_tasks(%s)", (role,))).fetchone()
    return int(row[0]) if row else 0
