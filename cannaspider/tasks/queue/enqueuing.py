"""How a task enters the queue: `enqueue`, deduplicated against the identical active task.

The identity of a task is (role, platform, dispensary_id, payload) among pending and running
tasks (unique index worker_tasks_active_identity, migration 007). An identical on-demand request
reuses the row, raising its priority and bringing it forward when the new request is more urgent.
A new pending task wakes the role's drainers through NOTIFY_CHANNEL (migration 007's trigger).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from cannaspider.tasks import roles
from cannaspider.tasks.queue.model import COLUMNS, DEFAULT_MAX_ATTEMPTS, ON_DUPLICATE_TASK, Enqueued, task_from_row
from cannaspider.tasks.roles import TargetNotFound, TaskInputError

NOTIFY_CHANNEL = "cannaspider_tasks"  # migration 007's trigger: payload is the role

ENQUEUE = f"""
INSERT INTO worker_tasks (role, platform, dispensary_id, payload, priority, run_after, max_attempts, parent_task_id)
VALUES (%(role)s, %(platform)s, %(dispensary_id)s, %(payload)s, %(priority)s, coalesce(%(run_after)s, now()),
        %(max_attempts)s, %(parent)s)
{ON_DUPLICATE_TASK} DO UPDATE
   SET priority = greatest(worker_tasks.priority, EXCLUDED.priority),
       run_after = least(worker_tasks.run_after, EXCLUDED.run_after), updated_at = now()
 WHERE worker_tasks.priority < EXCLUDED.priority
    OR (worker_tasks.status = 'pending' AND worker_tasks.run_after > EXCLUDED.run_after)
RETURNING {COLUMNS}, (xmax = 0) AS created
"""
FIND_ACTIVE = f"""
SELECT {COLUMNS} FROM worker_tasks
 WHERE role = %(role)s AND platform = %(platform)s AND dispensary_id IS NOT DISTINCT FROM %(dispensary_id)s
   AND payload = %(payload)s AND status IN ('pending', 'running')
"""


async def enqueue(
    conn: psycopg.AsyncConnection[Any],
    role: str,
    *,
    dispensary_id: int | None = None,
    state: str | None = None,
    keyword_id: int | None = None,
    priority: int = roles.ON_DEMAND_PRIORITY,
    platform: str = "dutchie",
    run_after: datetime | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    parent_task_id: int | None = None,
) -> Enqueued:
    """Queue a task, or reuse the identical pending/running one. TaskInputError on bad input,
    TargetNotFound when the target is well formed but names no store, keyword or state."""
    spec = roles.get(role)
    dispensary_id, payload = spec.target(dispensary_id=dispensary_id, state=state, keyword_id=keyword_id)
    if max_attempts < 1:
        raise TaskInputError("max_attempts must be at least 1")
    params = {
        "role": spec.name,
        "platform": platform,
        "dispensary_id": dispensary_id,
        "payload": Jsonb(payload),
        "priority": priority,
        "run_after": run_after,
        "max_attempts": max_attempts,
        "parent": parent_task_id,
    }
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        await _check_target_exists(cur, dispensary_id, payload.get("keyword_id"))
        for _ in range(5):
            row = await (await cur.execute(ENQUEUE, params)).fetchone()
            if row is not None:
                return Enqueued(task_from_row(row), bool(row["created"]))
            # identical task already as urgent: reuse it as it is (unless it just finished)
            row = await (await cur.execute(FIND_ACTIVE, params)).fetchone()
            if row is not None:
                return Enqueued(task_from_row(row), False)
    raise RuntimeError(f"could not enqueue {role}: the identical task kept changing")  # pragma: no cover


async def _check_target_exists(
    cur: psycopg.AsyncCursor[dict[str, Any]], dispensary_id: int | None, keyword_id: int | None
) -> None:
    if dispensary_id is not None:
        if not await (await cur.execute("SELECT 1 FROM dispensaries WHERE id = %s", (dispensary_id,))).fetchone():
            raise TargetNotFound("dispensary_id", f"dispensary {dispensary_id} does not exist")
    if keyword_id is not None:
        if not await (await cur.execute("SELECT 1 FROM keywords WHERE id = %s", (keyword_id,))).fetchone():
            raise TargetNotFound("keyword_id", f"keyword {keyword_id} does not exist")
