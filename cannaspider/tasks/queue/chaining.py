"""Follow-up tasks by the role that completed (seed "Task Chaining"; docs/architecture.md, "Task queue"):
each role's `Chain` (its child role and the statement that queues the children) is declared on its
spider; product_discovery chains to nothing (the store's last_crawl_at puts it in the resync schedule).

`outcomes.complete_many` calls `chain` in the transaction that completes the tasks, so a task is
never completed without its children, nor its children queued for a task that did not complete.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from cannaspider.tasks import roles


async def chain(conn: psycopg.AsyncConnection[Any], completed: Iterable[tuple[int, str]]) -> None:
    """Queue the follow-ups of the tasks just completed, given as (task id, role), one statement
    per chaining role. Runs in the caller's transaction."""
    by_role: dict[str, list[int]] = {}
    for task_id, role in completed:
        by_role.setdefault(role, []).append(task_id)
    for role, ids in by_role.items():
        follow_up = roles.get(role).chain  # declared on the role's spider (units/role.py, Chain)
        if follow_up is not None:
            params = {"ids": ids, "priority": roles.CHAINED_PRIORITY, "child": follow_up.to}
            await conn.execute(follow_up.sql, params)
