"""The task queue's values: a task as its row reads, the lease that holds it, what it reports.

One definition each, used by the queue's SQL modules, the spiders and the HTTP service (whose
responses are these dataclasses: `cannaspider/web/models.py`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

TaskStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
STATUSES: tuple[str, ...] = get_args(TaskStatus)
ACTIVE = ("pending", "running")
DEFAULT_MAX_ATTEMPTS = 5

# The queue's duplicate-task rule, written once: a task's identity is (role, platform,
# dispensary_id, payload) among the pending and running tasks (unique index
# worker_tasks_active_identity, migration 007). Every INSERT INTO worker_tasks ends with
# ON_DUPLICATE_TASK and what becomes of the identical active task: SKIP_DUPLICATE_TASK (it stays as
# it is: the schedule, the chains) or enqueue()'s update (a more urgent request raises it).
ON_DUPLICATE_TASK = "ON CONFLICT (role, platform, dispensary_id, payload) WHERE status IN ('pending', 'running')"
SKIP_DUPLICATE_TASK = f"{ON_DUPLICATE_TASK} DO NOTHING"


class LeaseLost(RuntimeError):
    """The task is no longer ours (lease expired and re-queued or re-claimed, or cancelled)."""


@dataclass(frozen=True)
class Lease:
    """Who holds a claimed task: the fencing token of every later write about it."""

    task_id: int
    worker: str
    attempt: int


@dataclass(frozen=True)
class Task:
    """A row of worker_tasks (migration 003; docs/architecture.md, "Task queue")."""

    id: int
    role: str
    platform: str
    dispensary_id: int | None
    payload: dict[str, Any]
    priority: int
    status: TaskStatus
    attempts: int
    max_attempts: int
    run_after: datetime
    claimed_by: str | None
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    error: str | None
    result: dict[str, Any] | None
    parent_task_id: int | None
    crawl_run_id: int | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    @property
    def lease(self) -> Lease:
        if self.claimed_by is None:
            raise LeaseLost(f"task {self.id} is not claimed")
        return Lease(self.id, self.claimed_by, self.attempts)

    @property
    def state(self) -> str | None:
        state: str | None = self.payload.get("state")
        return state

    @property
    def keyword_id(self) -> int | None:
        keyword_id: int | None = self.payload.get("keyword_id")
        return keyword_id

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(Task))
COLUMNS = ", ".join(FIELDS)  # every statement that returns tasks selects these


def task_from_row(row: dict[str, Any]) -> Task:
    """A Task from a dict_row that selected COLUMNS."""
    return Task(**{k: row[k] for k in FIELDS})


@dataclass
class TaskResult:
    """What a completed task reports (stored in worker_tasks.result)."""

    pages: int = 0
    products: int = 0
    new: int = 0
    missed: int = 0
    oos: int = 0
    crawl_run_id: int | None = None
    # store_discovery: the stores it created. None: every store of the task's state created since
    # the task was created counts as new (tasks/roles.py, ENTRY_POINT_TASK_PER_NEW_STORE).
    new_dispensary_ids: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pages": self.pages, "products": self.products, "new": self.new, "missed": self.missed}
        out["oos"] = self.oos
        if self.crawl_run_id is not None:
            out["crawl_run_id"] = self.crawl_run_id
        if self.new_dispensary_ids is not None:
            out["new_dispensary_ids"] = [int(d) for d in self.new_dispensary_ids]
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Enqueued:
    task: Task
    created: bool  # False: an identical pending or running task was reused


@dataclass(frozen=True)
class TaskPage:
    """One page of tasks, newest first (GET /api/tasks, `scrapy tasks`)."""

    tasks: list[Task]
    next_before_id: Annotated[
        int | None, Field(description="pass as before_id for the next (older) page; null: last page")
    ]


def worker_name() -> str:
    """Unique per process and host: it names the holder of a lease (and shows in `scrapy tasks`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
