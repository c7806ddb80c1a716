"""Operators' view of the queue: get, list (keyset-paged), cancel and retry a task.

Used by the HTTP service (/api/tasks) and `scrapy tasks`; a refusal is a TaskInputError whose
one line says why (the service answers it as a 400).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from cannaspider.tasks import roles
from cannaspider.tasks.queue.enqueuing import FIND_ACTIVE
from cannaspider.tasks.queue.model import COLUMNS, STATUSES, Task, TaskPage, task_from_row
from cannaspider.tasks.roles import TaskInputError


async def get(conn: psycopg.AsyncConnection[Any], task_id: int) -> Task | None:
    cur = conn.cursor(row_factory=dict_row)
    row = await (await cur.execute(f"SELECT {COLUMNS} FROM worker_tasks WHERE id = %s", (task_id,))).fetchone()
    return task_from_row(row) if row else None


async def cancel(conn: psycopg.AsyncConnection[Any], task_id: int) -> Task:
    """Cancel a pending or running task (a running one's worker loses its lease)."""
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        row = await (
            await cur.execute(
                f"UPDATE worker_tasks SET status = 'cancelled', lease_expires_at = NULL, completed_at = now(), "
                f"updated_at = now() WHERE id = %s AND status IN ('pending', 'running') RETURNING {COLUMNS}",
                (task_id,),
            )
        ).fetchone()
        if row is None:
            task = await get(conn, task_id)
            if task is None:
                raise TaskInputError(f"task {task_id} does not exist")
            raise TaskInputError(f"task {task_id} is {task.status}: only pending or running tasks can be cancelled")
        await conn.execute(
            "UPDATE crawl_runs SET status = 'failed', finished_at = now(), error = 'task cancelled' "
            "WHERE task_id = %s AND status = 'running'",
            (task_id,),
        )
    return task_from_row(row)


async def retry(conn: psycopg.AsyncConnection[Any], task_id: int) -> Task:
    """Put a failed or cancelled task back in the queue now, with its attempts reset."""
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        task = await get(conn, task_id)
        if task is None:
            raise TaskInputError(f"task {task_id} does not exist")
        if task.status not in ("failed", "cancelled"):
            raise TaskInputError(f"task {task_id} is {task.status}: only failed or cancelled tasks can be retried")
        try:
            async with conn.transaction():
                row = await (
                    await cur.execute(
                        f"UPDATE worker_tasks SET status = 'pending', attempts = 0, run_after = now(), "
                        f"claimed_by = NULL, completed_at = NULL, updated_at = now() "
                        f"WHERE id = %s AND status IN ('failed', 'cancelled') RETURNING {COLUMNS}",
                        (task_id,),
                    )
                ).fetchone()
        except psycopg.errors.UniqueViolation:
            twin = await (
                await cur.execute(
                    FIND_ACTIVE,
                    {
                        "role": task.role,
                        "platform": task.platform,
                        "dispensary_id": task.dispensary_id,
                        "payload": Jsonb(task.payload),
                    },
                )
            ).fetchone()
            twin_id = twin["id"] if twin else "?"
            raise TaskInputError(f"task {task_id}: an identical task ({twin_id}) is already queued") from None
        if row is None:
            raise TaskInputError(f"task {task_id} changed while being retried: try again")
    return task_from_row(row)


async def list_tasks(
    conn: psycopg.AsyncConnection[Any],
    *,
    role: str | None = None,
    status: str | None = None,
    dispensary_id: int | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> TaskPage:
    """Newest first, keyset-paged by id."""
    if role is not None:
        roles.get(role)
    if status is not None and status not in STATUSES:
        raise TaskInputError(f"unknown status {status!r} (statuses: {', '.join(STATUSES)})")
    where: list[str] = ["true"]
    params: list[object] = []
    for column, value in (("role", role), ("status", status), ("dispensary_id", dispensary_id)):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    if before_id is not None:
        where.append("id < %s")
        params.append(before_id)
    cur = conn.cursor(row_factory=dict_row)
    rows = await (
        await cur.execute(
            f"SELECT {COLUMNS} FROM worker_tasks WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT %s",
            [*params, limit + 1],
        )
    ).fetchall()
    tasks = [task_from_row(r) for r in rows[:limit]]
    return TaskPage(tasks, tasks[-1].id if len(rows) > limit else None)
