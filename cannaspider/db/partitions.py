"""The monthly partitions of product_snapshots and product_events, made before rows need them
(docs/operations.md, "Monthly partitions").

Both tables are partitioned by month (migrations 011 and 014); a row whose month has no partition
is refused by the database. `ensure_snapshot_partitions()` makes this month's and the next one's,
and is run on the timers the fleet already has, so that a process running across a month's end
never meets a missing one:

    a crawl's start              CrawlDatabase.open (db/crawl_database.py)
    every schedule tick          tasks/schedule.py, in the tick's transaction
    a drain's claims             tasks/drain.py, at most every PARTITIONS_EVERY_S (a drainer runs for weeks)
    a batch refused for it       pipelines/batch_writer.py makes them and retries the batch once

A row still refused for a missing partition is not refused for its values: it fails its store's
crawl (incomplete, with the reason), never a complete run with rows lost.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

MONTHS_AHEAD = 2  # this month and the next
PARTITIONS_EVERY_S = 600.0  # a drain checks them at a claim at most this often
ENSURE = f"SELECT ensure_snapshot_partitions(current_date, {MONTHS_AHEAD})"
PARTITIONED = frozenset({"product_snapshots", "product_events"})


async def ensure_ahead(conn: psycopg.AsyncConnection[Any]) -> int:
    """Make the missing partitions of this month and the next; returns how many were made."""
    row = await (await conn.execute(ENSURE)).fetchone()
    return int(row[0]) if row else 0


def missing_partition(exc: BaseException) -> bool:
    """The database refused a row because its month of a partitioned table has no partition.

    PostgreSQL reports it as a check violation naming the partitioned table and no constraint
    (a CHECK constraint's violation names its constraint)."""
    if not isinstance(exc, psycopg.errors.CheckViolation):
        return False
    return exc.diag.constraint_name is None and exc.diag.table_name in PARTITIONED


class EveryInterval:
    """True at the first call, then once `every_s` has passed since the last True."""

    def __init__(self, every_s: float = PARTITIONS_EVERY_S):
        self.every_s = every_s
        self._last: float | None = None

    def due(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            return False
        self._last = now
        return True
