"""Keeping the leases of the tasks a drain holds: renewed every `heartbeat_s` in the background.

A task whose lease is found lost (it expired while the process stalled, or an operator cancelled
it) leaves the drain's slots, is logged, and goes to the drain's `on_lost`; its result will not be
recorded (cannaspider/tasks/drain.py). A failed renewal is only logged: a lease outlives a few
missed beats.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from cannaspider.db.errors import first_line
from cannaspider.tasks import queue
from cannaspider.tasks.drain_connection import QueueConnection
from cannaspider.tasks.queue import Task

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the leases of `held` (the drain's own dict) over the drain's connection."""

    def __init__(self, db: QueueConnection, role: str, held: dict[int, Task], lease_s: float, heartbeat_s: float):
        self.db = db
        self.role = role
        self.held = held
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s

    async def renew(self, free_slot: Callable[[int], None], on_lost: Callable[[Task], Any] | None) -> set[int]:
        """Renew every held lease now: the ids still held. A lost one's slot is freed (free_slot)."""
        tasks = list(self.held.values())
        if not tasks:
            return set()
        alive: set[int] = await self.db.run(
            lambda c: queue.heartbeat(c, [t.lease for t in tasks], lease_s=self.lease_s)
        )
        for task in tasks:
            if task.id not in alive and task.id in self.held:
                logger.warning("task %s (%s): lease lost: its result will not be recorded", task.id, self.role)
                free_slot(task.id)
                if on_lost is not None:
                    on_lost(task)
        return alive

    async def keep(self, heartbeat: Callable[[], Awaitable[object]]) -> None:
        """heartbeat() every heartbeat_s, until cancelled."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await heartbeat()
            except psycopg.Error as exc:  # the lease outlives a few missed beats
                logger.warning("task queue: heartbeat failed: %s", first_line(exc))
