"""How a claimed task ends: complete (with its chained follow-ups) or fail (with a backoff).

The follow-ups are each role's `Chain` (seed "Task Chaining"; docs/architecture.md, "Task queue"):
its child role and the statement that queues the children, declared in the role table (tasks/roles.py); the
queue ends each with its duplicate-task rule (model.py SKIP_DUPLICATE_TASK).
product_discovery chains to nothing (the store's last_crawl_at puts it in the resync schedule).
`complete_many` runs `chain` in the transaction that completes the tasks, so a task is never
completed without its children, nor its children queued for a task that did not complete.

Both act only while the task's lease is held (`leases.HELD`) and report the leases that were
lost; both link the task and its crawl run both ways (crawl_runs.task_id), so that a crawl run
and the task that did it commit together when the caller's transaction is open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from scrapy.settings import BaseSettings

from cannaspider.backoff import Backoff
from cannaspider.db.errors import redact
from cannaspider.project_settings import project_settings
from cannaspider.tasks import roles
from cannaspider.tasks.queue.admin import get
from cannaspider.tasks.queue.leases import HELD, LEASE_COLUMNS, leases_param
from cannaspider.tasks.queue.model import SKIP_DUPLICATE_TASK, Lease, LeaseLost, Task, TaskResult

COMPLETE = f"""
WITH l AS (SELECT * FROM jsonb_to_recordset(%(leases)s::jsonb) AS l({LEASE_COLUMNS}, result jsonb, run bigint)),
done AS (
    UPDATE worker_tasks t
       SET status = 'completed', result = l.result, crawl_run_id = coalesce(l.run, t.crawl_run_id),
           completed_at = now(), updated_at = now(), lease_expires_at = NULL,
           error = NULL  -- an earlier attempt's error ("lease expired", a failed page) is history, not the outcome
      FROM l
     WHERE {HELD}
    RETURNING t.id, t.role, t.crawl_run_id
), link AS (
    UPDATE crawl_runs c SET task_id = done.id FROM done
     WHERE c.id = done.crawl_run_id AND c.task_id IS DISTINCT FROM done.id
)
SELECT id, role FROM done
UNION ALL  -- completed by this very lease already (a retry after the connection dropped on commit)
SELECT t.id, NULL FROM worker_tasks t JOIN l ON t.id = l.id
 WHERE t.status = 'completed' AND t.claimed_by = l.worker AND t.attempts = l.attempt
"""


async def complete(conn: psycopg.AsyncConnection[Any], lease: Lease, result: TaskResult | None = None) -> None:
    """Mark the task completed with its result, link its crawl run, create its follow-up tasks.
    LeaseLost (and nothing written) when the lease is no longer held."""
    lost = await complete_many(conn, [(lease, result or TaskResult())])
    if lost:
        raise LeaseLost(f"task {lease.task_id}: lease lost (expired, re-claimed or cancelled)")


async def complete_many(conn: psycopg.AsyncConnection[Any], done: Sequence[tuple[Lease, TaskResult]]) -> list[Lease]:
    """complete() for many tasks in one statement (plus one per chaining role). Returns the
    leases that were lost (those tasks are left as they are)."""
    if not done:
        return []
    leases = [lease for lease, _ in done]
    params = leases_param(
        leases, result=[result.as_json() for _, result in done], run=[result.crawl_run_id for _, result in done]
    )
    async with conn.transaction():
        rows = await (await conn.execute(COMPLETE, params)).fetchall()
        # a row without its role was completed by this lease before: its children exist already
        await chain(conn, [(task_id, role) for task_id, role in rows if role is not None])
    completed = {r[0] for r in rows}
    return [lease for lease in leases if lease.task_id not in completed]


# Attempts left: back to pending after the lease's backoff (`wait`: cannaspider/backoff.py, from the
# lease's attempt, which HELD checks is the task's). No attempts left, or a failure that trying
# again cannot help (`final`: a store without its platform id, a 4xx on our request): failed for
# good, with the error and crawl run.
FAIL = f"""
WITH l AS (SELECT * FROM jsonb_to_recordset(%(leases)s::jsonb)
             AS l({LEASE_COLUMNS}, error text, run bigint, final boolean, wait float8)),
failed AS (
    UPDATE worker_tasks t
       SET status = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN 'failed' ELSE 'pending' END,
           run_after = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN t.run_after
                            ELSE now() + make_interval(secs => l.wait) END,
           completed_at = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN now() END,
           claimed_by = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN t.claimed_by END,
           lease_expires_at = NULL, updated_at = now(),
           error = 'attempt ' || t.attempts || '/' || t.max_attempts || ': ' || l.error,
           crawl_run_id = coalesce(l.run, t.crawl_run_id)
      FROM l
     WHERE {HELD}
    RETURNING t.id, t.status, t.run_after, t.crawl_run_id
), link AS (
    UPDATE crawl_runs c SET task_id = failed.id FROM failed
     WHERE c.id = failed.crawl_run_id AND c.task_id IS DISTINCT FROM failed.id
)
SELECT id, status, run_after FROM failed
"""


# a retry comes back after half to all of its doubled wait: tasks that failed together spread out
TASK_JITTER = (0.5, 1.0)


def task_backoff(settings: BaseSettings) -> Backoff:
    """The retry wait of a failed attempt: TASK_RETRY_BACKOFF_S doubled, up to TASK_RETRY_BACKOFF_MAX_S."""
    return Backoff.from_settings(settings, "TASK_RETRY_BACKOFF_S", "TASK_RETRY_BACKOFF_MAX_S", TASK_JITTER)


async def fail(
    conn: psycopg.AsyncConnection[Any],
    lease: Lease,
    error: str,
    crawl_run_id: int | None = None,
    backoff: Backoff | None = None,
    *,
    final: bool = False,
) -> Task:
    """Record a failed attempt: retried after a backoff (None: settings.py's task_backoff) while
    attempts are left (and not `final`), else failed. Returns the task as it now is; LeaseLost
    when the lease is no longer held."""
    lost = await fail_many(conn, [(lease, error, crawl_run_id)], backoff, final=final)
    if lost:
        raise LeaseLost(f"task {lease.task_id}: lease lost (expired, re-claimed or cancelled)")
    found = await get(conn, lease.task_id)
    assert found is not None
    return found


async def fail_many(
    conn: psycopg.AsyncConnection[Any],
    failures: Sequence[tuple[Lease, str, int | None]],
    backoff: Backoff | None = None,
    *,
    final: bool = False,
) -> list[Lease]:
    if not failures:
        return []
    leases = [f[0] for f in failures]
    wait = backoff or task_backoff(project_settings())
    params = leases_param(
        leases,
        error=[_one_line(f[1]) for f in failures],
        run=[f[2] for f in failures],
        final=[final] * len(failures),
        wait=[wait.delay(lease.attempt) for lease in leases],
    )
    async with conn.transaction():
        rows = await (await conn.execute(FAIL, params)).fetchall()
    failed = {r[0] for r in rows}
    return [lease for lease in leases if lease.task_id not in failed]


def _one_line(error: str) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return redact(lines[0] if lines else "failed")[:2000]


async def chain(conn: psycopg.AsyncConnection[Any], completed: Iterable[tuple[int, str]]) -> None:
    """Queue the follow-ups of the tasks just completed, given as (task id, role), one statement
    per chaining role. Runs in the caller's transaction."""
    by_role: dict[str, list[int]] = {}
    for task_id, role in completed:
        by_role.setdefault(role, []).append(task_id)
    for role, ids in by_role.items():
        follow_up = roles.get(role).chain  # declared in the role table (tasks/roles.py, Chain)
        if follow_up is not None:
            params = {"ids": ids, "priority": roles.CHAINED_PRIORITY, "child": follow_up.to}
            await conn.execute(f"{follow_up.sql}{SKIP_DUPLICATE_TASK}", params)
