"""The task queue on `worker_tasks` (migrations 003 and 007; docs/architecture.md, "Task queue").

One concern per module; this package gathers their public names, so callers write
`queue.enqueue`, `queue.claim`, `queue.complete`:

- `model`: the values (Task, Lease, TaskResult, TaskPage, statuses);
- `enqueuing`: enqueue, deduplicated against the identical active task;
- `leases`: claim, heartbeat, check_lease, release, requeue_expired (the lease state machine);
- `outcomes`: complete (with the follow-up tasks a completion creates: each role's `Chain`) and
  fail (with the retry backoff);
- `admin`: get, list, cancel, retry.

Every function takes an open psycopg AsyncConnection and runs its statements in a transaction
of its own (or inside the caller's, when one is open: `complete()` can then commit a task together
with the crawl that did it).
"""

from cannaspider.backoff import Backoff
from cannaspider.tasks.queue.admin import cancel, get, list_tasks, retry
from cannaspider.tasks.queue.enqueuing import NOTIFY_CHANNEL, enqueue
from cannaspider.tasks.queue.leases import check_lease, claim, heartbeat, release, requeue_expired
from cannaspider.tasks.queue.model import (
    ACTIVE,
    DEFAULT_MAX_ATTEMPTS,
    ON_DUPLICATE_TASK,
    SKIP_DUPLICATE_TASK,
    STATUSES,
    Enqueued,
    Lease,
    LeaseLost,
    Task,
    TaskPage,
    TaskResult,
    TaskStatus,
    worker_name,
)
from cannaspider.tasks.queue.outcomes import complete, complete_many, fail, fail_many, task_backoff

__all__ = [
    "ACTIVE",
    "DEFAULT_MAX_ATTEMPTS",
    "NOTIFY_CHANNEL",
    "ON_DUPLICATE_TASK",
    "SKIP_DUPLICATE_TASK",
    "STATUSES",
    "Backoff",
    "task_backoff",
    "Enqueued",
    "Lease",
    "LeaseLost",
    "Task",
    "TaskPage",
    "TaskResult",
    "TaskStatus",
    "cancel",
    "check_lease",
    "claim",
    "complete",
    "complete_many",
    "enqueue",
    "fail",
    "fail_many",
    "get",
    "heartbeat",
    "list_tasks",
    "release",
    "requeue_expired",
    "retry",
    "worker_name",
]
