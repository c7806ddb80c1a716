"""The task queue on `worker_tasks` (migrations 003 and 007; docs/architecture.md, "Task queue").

Every function takes an open psycopg AsyncConnection and runs its statements in a transaction
of its own (or inside the caller's, when one is open: `complete()` can then commit a task together
with the crawl that did it). The life of a task:

    enqueue ─► pending ─claim─► running ─complete─► completed (+ chained tasks)
                  ▲                │ fail: attempts left → pending after a backoff; else failed
                  └────────────────┤ lease expired (worker died) → pending, the attempt counted
                                   │ release (worker stopping) → pending, the attempt not counted
                                   └ cancel → cancelled          retry (failed/cancelled) → pending

A claimed task is held under a `Lease` (task id, worker, attempt). Heartbeat, complete, fail and
release only act while that lease is still the task's current one: a worker whose lease expired
and whose task went to another worker gets `LeaseLost` and must not record anything of its crawl.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

import orjson
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from cannaspider.db.errors import redact
from cannaspider.tasks import roles
from cannaspider.tasks.roles import TaskInputError

STATUSES = ("pending", "running", "completed", "failed", "cancelled")
ACTIVE = ("pending", "running")
NOTIFY_CHANNEL = "cannaspider_tasks"  # migration 007's trigger: payload is the role
DEFAULT_MAX_ATTEMPTS = 5


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
    id: int
    role: str
    platform: str
    dispensary_id: int | None
    payload: dict
    priority: int
    status: str
    attempts: int
    max_attempts: int
    run_after: datetime
    claimed_by: str | None
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    error: str | None
    result: dict | None
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
        return self.payload.get("state")

    @property
    def keyword_id(self) -> int | None:
        return self.payload.get("keyword_id")

    def as_dict(self) -> dict:
        return asdict(self)


COLUMNS = ", ".join(Task.__dataclass_fields__)


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
    # the task was created counts as new (see CHAIN_SQL).
    new_dispensary_ids: list[int] | None = None
    extra: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        out: dict = {"pages": self.pages, "products": self.products, "new": self.new, "missed": self.missed}
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


def worker_name() -> str:
    """Unique per process and host: it names the holder of a lease (and shows in `scrapy tasks`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _task(row: dict) -> Task:
    return Task(**{k: row[k] for k in Task.__dataclass_fields__})


def _interval_s(seconds: float) -> str:
    return f"{float(seconds)} seconds"


# -- enqueue ---------------------------------------------------------------------------------------
# The identity of a task is (role, platform, dispensary_id, payload) among pending and running
# tasks (unique index worker_tasks_active_identity). An identical on-demand request reuses the
# row, raising its priority and bringing it forward when the new request is more urgent.
ENQUEUE = f"""
INSERT INTO worker_tasks (role, platform, dispensary_id, payload, priority, run_after, max_attempts, parent_task_id)
VALUES (%(role)s, %(platform)s, %(dispensary_id)s, %(payload)s, %(priority)s, coalesce(%(run_after)s, now()),
        %(max_attempts)s, %(parent)s)
ON CONFLICT (role, platform, dispensary_id, payload) WHERE status IN ('pending', 'running') DO UPDATE
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
    conn: psycopg.AsyncConnection,
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
    """Queue a task, or reuse the identical pending/running one. TaskInputError on bad input."""
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
                return Enqueued(_task(row), bool(row["created"]))
            # identical task already as urgent: reuse it as it is (unless it just finished)
            row = await (await cur.execute(FIND_ACTIVE, params)).fetchone()
            if row is not None:
                return Enqueued(_task(row), False)
    raise RuntimeError(f"could not enqueue {role}: the identical task kept changing")  # pragma: no cover


async def _check_target_exists(cur: psycopg.AsyncCursor[dict], dispensary_id: int | None, keyword_id: int | None):
    if dispensary_id is not None:
        if not await (await cur.execute("SELECT 1 FROM dispensaries WHERE id = %s", (dispensary_id,))).fetchone():
            raise TaskInputError(f"dispensary {dispensary_id} does not exist")
    if keyword_id is not None:
        if not await (await cur.execute("SELECT 1 FROM keywords WHERE id = %s", (keyword_id,))).fetchone():
            raise TaskInputError(f"keyword {keyword_id} does not exist")


# -- claim and leases ------------------------------------------------------------------------------
async def claim(
    conn: psycopg.AsyncConnection, role: str, worker: str, limit: int = 1, lease_s: float = 600.0
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
                (role, worker, limit, _interval_s(lease_s)),
            )
        ).fetchall()
    return [_task(r) for r in rows]


def _leases(leases: Sequence[Lease], **columns: Sequence) -> dict:
    """The leases (and per-lease values) as one JSON parameter: PostgreSQL parses it in C, where
    psycopg's array dumping escaped every string in Python (a third of a batch's client time)."""
    rows = [{"id": lease.task_id, "worker": lease.worker, "attempt": lease.attempt} for lease in leases]
    for name, values in columns.items():
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return {"leases": orjson.dumps(rows).decode()}


LEASE_COLUMNS = "id bigint, worker text, attempt integer"
LEASES = f"SELECT * FROM jsonb_to_recordset(%(leases)s::jsonb) AS l({LEASE_COLUMNS})"
HELD = "t.id = l.id AND t.status = 'running' AND t.claimed_by = l.worker AND t.attempts = l.attempt"


async def heartbeat(conn: psycopg.AsyncConnection, leases: Sequence[Lease], lease_s: float = 600.0) -> set[int]:
    """Renew the leases; returns the ids still held (the others were lost)."""
    if not leases:
        return set()
    async with conn.transaction():
        rows = await (
            await conn.execute(
                f"UPDATE worker_tasks t SET heartbeat_at = now(), lease_expires_at = now() + %(lease)s::interval "
                f"FROM ({LEASES}) l WHERE {HELD} RETURNING t.id",
                {**_leases(leases), "lease": _interval_s(lease_s)},
            )
        ).fetchall()
    return {r[0] for r in rows}


async def check_lease(conn: psycopg.AsyncConnection, lease: Lease) -> None:
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


# -- complete and chain ----------------------------------------------------------------------------
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

# Follow-up tasks by the role that completed (seed "Task Chaining"): each statement gets the ids
# of the completed tasks of its role and inserts their children (of the role it declares it chains
# to, `Role.chains_to` on its spider) at the chained priority; an identical child already queued
# is left as it is.
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


async def complete(conn: psycopg.AsyncConnection, lease: Lease, result: TaskResult | None = None) -> None:
    """Mark the task completed with its result, link its crawl run, create its follow-up tasks.
    LeaseLost (and nothing written) when the lease is no longer held."""
    lost = await complete_many(conn, [(lease, result or TaskResult())])
    if lost:
        raise LeaseLost(f"task {lease.task_id}: lease lost (expired, re-claimed or cancelled)")


async def complete_many(conn: psycopg.AsyncConnection, done: Sequence[tuple[Lease, TaskResult]]) -> list[Lease]:
    """complete() for many tasks in one statement (plus one per chaining role). Returns the
    leases that were lost (those tasks are left as they are)."""
    if not done:
        return []
    leases = [lease for lease, _ in done]
    params = _leases(
        leases, result=[result.as_json() for _, result in done], run=[result.crawl_run_id for _, result in done]
    )
    async with conn.transaction():
        rows = await (await conn.execute(COMPLETE, params)).fetchall()
        by_role: dict[str, list[int]] = {}
        for task_id, role in rows:
            if role is not None:
                by_role.setdefault(role, []).append(task_id)
        for role, ids in by_role.items():
            child = roles.get(role).chains_to
            if child is not None:
                await conn.execute(CHAIN_SQL[role], {"ids": ids, "priority": roles.CHAINED_PRIORITY, "child": child})
    completed = {r[0] for r in rows}
    return [lease for lease in leases if lease.task_id not in completed]


# -- fail, release ---------------------------------------------------------------------------------
# Attempts left: back to pending after base·2^(attempt-1) seconds (capped), times a jitter in
# [0.5, 1) so that tasks failing together (a blocked proxy pool, a database restart) do not all
# come back at the same instant. No attempts left, or a failure that trying again cannot help
# (`final`: a store without its platform id, a 4xx on our request): failed for good, with the
# error and crawl run.
FAIL = f"""
WITH l AS (SELECT * FROM jsonb_to_recordset(%(leases)s::jsonb)
             AS l({LEASE_COLUMNS}, error text, run bigint, final boolean)),
failed AS (
    UPDATE worker_tasks t
       SET status = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN 'failed' ELSE 'pending' END,
           run_after = CASE WHEN (t.attempts >= t.max_attempts OR l.final) THEN t.run_after
                            ELSE now() + make_interval(secs => least(%(cap)s::float8,
                                 %(base)s::float8 * power(2, greatest(t.attempts - 1, 0))) * (0.5 + random() / 2))
                       END,
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


@dataclass(frozen=True)
class Backoff:
    base_s: float = 60.0
    cap_s: float = 6 * 3600.0

    @classmethod
    def from_settings(cls, settings) -> Backoff:
        base = settings.getfloat("TASK_RETRY_BACKOFF_S", cls.base_s)
        return cls(base, settings.getfloat("TASK_RETRY_BACKOFF_MAX_S", cls.cap_s))


async def fail(
    conn: psycopg.AsyncConnection,
    lease: Lease,
    error: str,
    crawl_run_id: int | None = None,
    backoff: Backoff = Backoff(),
    *,
    final: bool = False,
) -> Task:
    """Record a failed attempt: retried after a backoff while attempts are left (and not `final`),
    else failed. Returns the task as it now is; LeaseLost when the lease is no longer held."""
    lost = await fail_many(conn, [(lease, error, crawl_run_id)], backoff, final=final)
    if lost:
        raise LeaseLost(f"task {lease.task_id}: lease lost (expired, re-claimed or cancelled)")
    found = await get(conn, lease.task_id)
    assert found is not None
    return found


async def fail_many(
    conn: psycopg.AsyncConnection,
    failures: Sequence[tuple[Lease, str, int | None]],
    backoff: Backoff = Backoff(),
    *,
    final: bool = False,
) -> list[Lease]:
    if not failures:
        return []
    leases = [f[0] for f in failures]
    params = {
        **_leases(
            leases,
            error=[_one_line(f[1]) for f in failures],
            run=[f[2] for f in failures],
            final=[final] * len(failures),
        ),
        "base": backoff.base_s,
        "cap": backoff.cap_s,
    }
    async with conn.transaction():
        rows = await (await conn.execute(FAIL, params)).fetchall()
    failed = {r[0] for r in rows}
    return [lease for lease in leases if lease.task_id not in failed]


def _one_line(error: str) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return redact(lines[0] if lines else "failed")[:2000]


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


async def release(conn: psycopg.AsyncConnection, leases: Sequence[Lease]) -> set[int]:
    """Give tasks back (the worker is stopping): pending again, this attempt not counted. Their
    unfinished crawl runs are closed as failed (an unfinished crawl marks nothing missing)."""
    if not leases:
        return set()
    async with conn.transaction():
        rows = await (await conn.execute(RELEASE, _leases(leases))).fetchall()
    return {r[0] for r in rows}


async def requeue_expired(conn: psycopg.AsyncConnection, role: str | None = None) -> int:
    async with conn.transaction():
        row = await (await conn.execute("SELECT requeue_expired_tasks(%s)", (role,))).fetchone()
    return int(row[0]) if row else 0


# -- operator actions ------------------------------------------------------------------------------
async def get(conn: psycopg.AsyncConnection, task_id: int) -> Task | None:
    cur = conn.cursor(row_factory=dict_row)
    row = await (await cur.execute(f"SELECT {COLUMNS} FROM worker_tasks WHERE id = %s", (task_id,))).fetchone()
    return _task(row) if row else None


async def cancel(conn: psycopg.AsyncConnection, task_id: int) -> Task:
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
    return _task(row)


async def retry(conn: psycopg.AsyncConnection, task_id: int) -> Task:
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
    return _task(row)


@dataclass(frozen=True)
class Page:
    tasks: list[Task]
    next_before_id: int | None  # pass as before_id for the next (older) page; None: last page


async def list_tasks(
    conn: psycopg.AsyncConnection,
    *,
    role: str | None = None,
    status: str | None = None,
    dispensary_id: int | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> Page:
    """Newest first, keyset-paged by id."""
    if role is not None:
        roles.get(role)
    if status is not None and status not in STATUSES:
        raise TaskInputError(f"unknown status {status!r} (statuses: {', '.join(STATUSES)})")
    where, params = ["true"], []
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
    tasks = [_task(r) for r in rows[:limit]]
    return Page(tasks, tasks[-1].id if len(rows) > limit else None)


def leases_of(tasks: Iterable[Task]) -> list[Lease]:
    return [t.lease for t in tasks]
