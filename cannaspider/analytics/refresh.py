"""Refreshing the analytics materialized views (docs/analytics.md).

Each view is refreshed CONCURRENTLY: PostgreSQL builds the new contents beside the old and applies
the difference, so readers keep reading the old rows meanwhile and never wait (a view never
populated yet is refreshed plainly once: CONCURRENTLY needs existing contents). Views run in
dependency order (analytics_product_days_in_stock reads analytics_product_daily), each in its own
transaction, under an advisory lock so two refreshes (two nodes, a manual run) take turns.
Every refresh is recorded in analytics_refreshes with its duration and row count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

# In refresh order: a view comes after those it reads
VIEWS: tuple[str, ...] = (
    "analytics_brand_category_state",
    "analytics_product_daily",
    "analytics_store_daily",
    "analytics_product_days_in_stock",
)
LOCK = (1952543597, 0)  # pg_advisory_lock key of the refresh (the scheduler's is 1952543596)
DEFAULT_WORK_MEM = "256MB"  # sorts of the snapshot history stay in memory (one refresh at a time)


@dataclass(frozen=True)
class RefreshResult:
    view: str
    duration_ms: int
    rows: int
    concurrent: bool

    def as_json(self) -> dict:
        return {"view": self.view, "duration_ms": self.duration_ms, "rows": self.rows, "concurrent": self.concurrent}


async def refresh_view(conn: psycopg.AsyncConnection, view: str, work_mem: str = DEFAULT_WORK_MEM) -> RefreshResult:
    """Refresh one view (CONCURRENTLY when it has contents) and record it; `conn` in autocommit."""
    name = sql.Identifier(view)
    async with conn.transaction():
        cur = await conn.execute("SELECT ispopulated FROM pg_matviews WHERE matviewname = %s", (view,))
        row = await cur.fetchone()
        if row is None:
            raise LookupError(f"no materialized view {view!r}: run `scrapy migrate`")
        concurrent = bool(row[0])
        await conn.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
        started = time.perf_counter()
        how = sql.SQL("CONCURRENTLY ") if concurrent else sql.SQL("")
        await conn.execute(sql.SQL("REFRESH MATERIALIZED VIEW {}{}").format(how, name))
        duration_ms = round((time.perf_counter() - started) * 1000)
        cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name))
        rows = int((await cur.fetchone() or (0,))[0])
        await conn.execute(
            "INSERT INTO analytics_refreshes (view_name, duration_ms, row_count, concurrent) VALUES (%s, %s, %s, %s)",
            (view, duration_ms, rows, concurrent),
        )
    return RefreshResult(view, duration_ms, rows, concurrent)


async def refresh_all(conn: psycopg.AsyncConnection, work_mem: str = DEFAULT_WORK_MEM) -> list[RefreshResult]:
    """Refresh every view in order, one refresh process at a time; `conn` in autocommit."""
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", LOCK)
    try:
        return [await refresh_view(conn, view, work_mem) for view in VIEWS]
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", LOCK)
