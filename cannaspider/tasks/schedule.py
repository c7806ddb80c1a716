"""The periodic schedule (seed "Scheduling"): what `scrapy schedule` enqueues on each tick, from
the `schedule` of each role in the role table (tasks/roles.py Schedule). Today:

    product_resync      every SCHEDULE_RESYNC_EVERY_S (4 h) for each enabled, resolved store whose
                        last complete crawl (dispensaries.last_crawl_at) is older than that (`stores`)
    store_discovery     every SCHEDULE_DISCOVERY_EVERY_S (daily) for each of SCHEDULE_DISCOVERY_STATES
    analytics_refresh   every SCHEDULE_ANALYTICS_EVERY_S (daily), one task (`once`)

Each tick deletes finished tasks (completed, failed, cancelled) last updated more than
TASK_RETENTION_DAYS ago, a bounded batch at a time: the queue would otherwise grow by every
store's six crawls a day forever. The retention must outlast every period above, whose checks
look back at recent tasks. It also makes the snapshot and event partitions of this month and the
next (db/partitions.py): no crawl meets a month without its partition.

A tick is one transaction under an advisory lock, so schedulers running at the same moment (on
one machine or several) take turns and the second sees what the first created. A task is not
created again while an identical one is pending or running, nor within the period after the last
one (for a store: after its last failed or cancelled product task, since a completed one moved
last_crawl_at), so a store whose resync keeps failing is tried once per period, not on every tick.
Scheduled tasks run at priority 0: on-demand and chained work goes first.

The queue's schedule only: `scrapy schedule` (commands/schedule.py) re-probes the deactivated
proxies after each tick itself (stealth/probe.py), so the queue imports nothing of stealth/.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg.types.json import Jsonb
from scrapy.settings import BaseSettings

from cannaspider import platforms
from cannaspider.db import partitions
from cannaspider.project_settings import project_settings
from cannaspider.tasks import roles
from cannaspider.tasks.queue import SKIP_DUPLICATE_TASK
from cannaspider.tasks.roles import Role

LOCK = (1952543596, 0)  # pg_advisory_xact_lock key of the scheduler (claim_task's is 1952543595)

RESYNC = f"""
INSERT INTO worker_tasks (role, platform, dispensary_id, priority)
SELECT %(role)s, d.platform, d.id, %(priority)s
  FROM dispensaries d
 WHERE d.crawl_enabled AND d.platform_dispensary_id IS NOT NULL
   AND (d.last_crawl_at IS NULL OR d.last_crawl_at < now() - %(every)s::interval)
   -- same_work: the role and the roles that are its first run (roles.same_work: product_discovery)
   AND NOT EXISTS (  -- product work queued or running (index worker_tasks_active_identity)
        SELECT 1 FROM worker_tasks t
         WHERE t.role = ANY (%(same_work)s::text[]) AND t.platform = d.platform
           AND t.dispensary_id = d.id AND t.status IN ('pending', 'running'))
   AND NOT EXISTS (  -- tried within the period and failed or cancelled (a completed one set last_crawl_at)
        SELECT 1 FROM worker_tasks t
         WHERE t.dispensary_id = d.id AND t.status IN ('failed', 'cancelled')
           AND t.role = ANY (%(same_work)s::text[]) AND t.created_at > now() - %(every)s::interval)
 ORDER BY d.last_crawl_at NULLS FIRST, d.id
{SKIP_DUPLICATE_TASK}
"""
# One task per payload (a state, or none) and platform, unless one is active or younger than the period.
PERIODIC = f"""
INSERT INTO worker_tasks (role, platform, payload, priority)
SELECT %(role)s, pl.platform, p.payload, %(priority)s
  FROM unnest(%(payloads)s::jsonb[]) AS p(payload)
 CROSS JOIN unnest(%(platforms)s::text[]) AS pl(platform)
 WHERE NOT EXISTS (
        SELECT 1 FROM worker_tasks t
         WHERE t.role = %(role)s AND t.dispensary_id IS NULL AND t.payload = p.payload AND t.platform = pl.platform
           AND (t.status IN ('pending', 'running') OR t.created_at > now() - %(every)s::interval))
{SKIP_DUPLICATE_TASK}
"""
PRUNE = """
DELETE FROM worker_tasks
 WHERE id IN (SELECT id FROM worker_tasks
               WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < now() - %(keep)s::interval
               ORDER BY id LIMIT %(batch)s)
"""


def scheduled_roles() -> list[Role]:
    """The roles that declare a schedule, stores first, then states, then single tasks."""
    order = {"stores": 0, "states": 1, "once": 2}
    declared = [role for role in roles.all_roles().values() if role.schedule is not None]
    return sorted(declared, key=lambda role: order[role.schedule.over] if role.schedule else 0)


def periods(settings: BaseSettings) -> dict[str, float]:
    """Each scheduled role's period, from the setting its declaration names."""
    return {role.name: settings.getfloat(role.schedule.every_setting) for role in scheduled_roles() if role.schedule}


@dataclass(frozen=True)
class ScheduleConfig:
    every_s: dict[str, float] = field(default_factory=lambda: periods(project_settings()))
    discovery_states: tuple[str, ...] = ()
    discovery_platforms: tuple[str, ...] = (platforms.DEFAULT,)  # each state's discovery, per platform
    retention_s: float = field(default_factory=lambda: project_settings().getfloat("TASK_RETENTION_DAYS") * 86400)
    prune_batch: int = 5000  # most tasks deleted by one tick

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ScheduleConfig:
        states: list[str] = []
        for role in scheduled_roles():
            if role.schedule is not None and role.schedule.over == "states":
                for raw in settings.getlist("SCHEDULE_DISCOVERY_STATES"):
                    _, payload = role.target(state=raw)  # TaskInputError on an unknown state
                    states.append(payload["state"])
        config = cls(
            every_s=periods(settings),
            discovery_states=tuple(dict.fromkeys(states)),
            discovery_platforms=tuple(
                dict.fromkeys(roles.platform(p) for p in settings.getlist("SCHEDULE_DISCOVERY_PLATFORMS"))
            ),
            retention_s=settings.getfloat("TASK_RETENTION_DAYS") * 86400,
        )
        longest = max(config.every_s.values(), default=0.0)
        if config.retention_s <= longest:
            raise roles.TaskInputError(
                f"TASK_RETENTION_DAYS ({config.retention_s / 86400:g}) must be longer than the longest "
                f"schedule period ({longest / 86400:g} days): the schedule looks back at recent tasks"
            )
        return config


@dataclass(frozen=True)
class TickReport:
    created: dict[str, int]
    requeued: int  # expired leases put back in the queue (or failed for good)
    pruned: int = 0  # finished tasks past the retention, deleted
    partitions: int = 0  # monthly snapshot partitions made (db/partitions.py)

    @property
    def total(self) -> int:
        return sum(self.created.values())


def _every(seconds: float) -> str:
    return f"{float(seconds)} seconds"


async def tick(conn: psycopg.AsyncConnection, config: ScheduleConfig) -> TickReport:
    """Apply the schedule once; returns how many tasks each role got."""
    created: dict[str, int] = {}
    prio = roles.SCHEDULED_PRIORITY
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK)
        requeued = (await (await conn.execute("SELECT requeue_expired_tasks(NULL)")).fetchone() or (0,))[0]
        for role in scheduled_roles():
            assert role.schedule is not None
            every = _every(config.every_s[role.name])
            if role.schedule.over == "stores":
                params = {
                    "role": role.name,
                    "priority": prio,
                    "every": every,
                    "same_work": list(roles.same_work(role.name)),
                }
                cur = await conn.execute(RESYNC, params)
                created[role.name] = cur.rowcount
                continue
            if role.schedule.over == "states":
                payloads = [Jsonb(role.target(state=s)[1]) for s in config.discovery_states]
                names = list(config.discovery_platforms)
            else:
                payloads = [Jsonb(role.target()[1])]
                names = [platforms.DEFAULT]  # a task of no store: the platform column's default
            if not payloads:
                continue
            params = {"role": role.name, "payloads": payloads, "platforms": names, "priority": prio, "every": every}
            cur = await conn.execute(PERIODIC, params)
            created[role.name] = cur.rowcount
        cur = await conn.execute(PRUNE, {"keep": _every(config.retention_s), "batch": config.prune_batch})
        pruned = cur.rowcount
        made = await partitions.ensure_ahead(conn)
    return TickReport(created, int(requeued), pruned, made)
