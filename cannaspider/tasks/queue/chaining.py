"""Follow-up tasks by the role that completed (seed "Task Chaining"; docs/architecture.md, "Task queue").

`outcomes.complete_many` calls `chain` in the transaction that completes the tasks, so a task is
never completed without its children, nor its children queued for a task that did not complete.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from cannaspider.tasks import roles

# Each statement gets the ids of the completed tasks of its role and inserts their children (of the
# role it declares it chains to, `Role.chains_to` on its spider) at the chained priority; an
# identical child already queued is left as it is.
CHAIN_SQL: dict[str, str] = {
    # → a task (entry_point_discovery) for each *new* store
    "store_discovery": """
INSERT INTO worker_tasks (role, platform, dispensary_id, priority, parent_task_id)
SELECT DISTINCT ON (d.id) %(child)s, t.platform, d.id, %(priority)s, t.id
  FROM worker_tasks t
  JOIN dispensaries d ON CASE WHEN t.result ? 'new_dispensary_ids'
                              THEN d.id IN (SELECT jsonb_array_elements_text(t.result -> 'new_dispensary_ids')::bigint)
                              ELSE d.state = t.payload ->> 'state' AND d.created_at >= t.created_at END
 WHERE t.id = ANY(%(ids)s) AND d.crawl_enabled
ON CONFLICT (role, platform, dispensary_id, payload) WHERE status IN ('pending', 'running') DO NOTHING
""",
    # → a task (product_discovery) for that store, when it was resolved (has its platform id)
    "entry_point_discovery": """
INSERT INTO worker_tasks (role, platform, dispensary_id, priority, parent_task_id)
SELECT %(child)s, t.platform, t.dispensary_id, %(priority)s, t.id
  FROM worker_tasks t JOIN dispensaries d ON d.id = t.dispensary_id
 WHERE t.id = ANY(%(ids)s) AND d.platform_dispensary_id IS NOT NULL AND d.crawl_enabled
ON CONFLICT (role, platform, dispensary_id, payload) WHERE status IN ('pending', 'running') DO NOTHING
""",
    # product_discovery → no chain: the store's last_crawl_at now puts it in the resync schedule
}


async def chain(conn: psycopg.AsyncConnection[Any], completed: Iterable[tuple[int, str]]) -> None:
    """Queue the follow-ups of the tasks just completed, given as (task id, role), one statement
    per chaining role. Runs in the caller's transaction."""
    by_role: dict[str, list[int]] = {}
    for task_id, role in completed:
        by_role.setdefault(role, []).append(task_id)
    for role, ids in by_role.items():
        child = roles.get(role).chains_to
        if child is not None:
            await conn.execute(CHAIN_SQL[role], {"ids": ids, "priority": roles.CHAINED_PRIORITY, "child": child})
