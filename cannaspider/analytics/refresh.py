"""Refreshing the analytics views (docs/analytics.md) so that readers never wait.

The materialized views are refreshed CONCURRENTLY: PostgreSQL builds the new contents beside the
old and applies the difference, so readers keep reading the old rows meanwhile (a view never
populated is refreshed plainly once: CONCURRENTLY needs existing contents).
analytics_product_daily is a table rolled forward instead (analytics_roll_product_daily(), see
migrations/010_analytics.sql): recomputing it would read the whole snapshot history every day.
The same roll keeps analytics_product_days (days in stock per product; read through the view
analytics_product_days_in_stock). The last step rolls the market tables forward from those two
(market.py, docs/analytics.md "Market analytics"). Steps run one after the other, each in its own transaction,
under an advisory lock so two refreshes (two nodes, a manual run) take turns; the product roll
and the market roll run in `parts` transactions at once, on as many connections (product_roll.py,
market.roll_in_parts: one statement runs on one core). Every step is recorded in
analytics_refreshes with its duration and row count.

The market roll reads the product roll's rows right after they are written, before autovacuum
has analyzed them: without statistics for a table that grew by a tenth or more, PostgreSQL can
plan that read disastrously (the first roll of the 24-million-snapshot benchmark history, 4
million new product-days that the planner took for 25 a day, joined each store-day to a whole
day's rows: over ten minutes, not finished). So a roll that wrote that much analyzes the table
itself first (ANALYZE samples 30,000 rows: a fraction of a second; docs/analytics.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cannaspider.analytics import market, product_roll
from cannaspider.analytics.parts import needs_url

ROLLED = "analytics_product_daily"  # rolled forward by analytics_roll_product_daily(), with analytics_product_days
# the market roll reads the product roll's and the store view's rows: it comes after both
VIEWS: tuple[str, ...] = (
    "analytics_brand_category_state",
    ROLLED,
    "analytics_store_daily",
    "market_brands_now",  # GET /api/brands, a brand's states (migrations/020_market_analytics.sql, 046)
    "brand_categories_now",  # a brand's categories (GET /api/brands/{id}, migrations/046_brand_figures_now.sql)
    "specials_category_now",  # GET /api/specials' categories (migrations/042_specials_brand_search.sql)
    "brand_shelf_now",  # a brand's share of shelf (GET /api/brands/{id}/market, migration 042)
    market.STEP,
)
INCREMENTAL = (ROLLED, market.STEP)
# a roll that writes at least this share of the table's rows (as the planner last counted them)
# analyzes it before the next step reads it: autovacuum's own default threshold
ANALYZE_SHARE = 0.1
LOCK = (1952543597, 0)  # pg_advisory_lock key of the refresh (the scheduler's is 1952543596)


@dataclass(frozen=True)
class RefreshResult:
    view: str
    duration_ms: int
    rows: int  # the view's rows; for the rolled table, the rows this roll (re)wrote
    method: str  # 'concurrently', 'plain' or 'incremental'

    def as_json(self) -> dict[str, Any]:
        return {"view": self.view, "duration_ms": self.duration_ms, "rows": self.rows, "method": self.method}


async def refresh_view(
    conn: psycopg.AsyncConnection,
    view: str,
    work_mem: str,
    parts: int = 1,
    url: str | None = None,
) -> RefreshResult:
    """Refresh one view (roll the rolled table forward) and record it; `conn` in autocommit.

    `parts` > 1 rolls the rolled table in that many transactions at once, the others on
    connections of their own to `url` (product_roll.py), and the market tables in up to as many,
    by state (market.roll_in_parts); the views take one."""
    started = time.perf_counter()
    if view == ROLLED:
        rows = await product_roll.roll(conn, work_mem, parts, url)
        await analyze_if_grown(conn, ROLLED, rows)
        return await _record(conn, RefreshResult(view, _since(started), rows, "incremental"))
    if view == market.STEP and parts > 1:
        rows = await market.roll_in_parts(conn, work_mem, parts, needs_url(url))
        return await _record(conn, RefreshResult(view, _since(started), rows, "incremental"))
    async with conn.transaction():
        await conn.execute("SELECT set_config('work_mem', %s, true)", (work_mem,))
        if view == market.STEP:
            method = "incremental"
            rows = await market.roll(conn)
            duration_ms = _since(started)
        else:
            cur = await conn.execute("SELECT ispopulated FROM pg_matviews WHERE matviewname = %s", (view,))
            row = await cur.fetchone()
            if row is None:
                raise LookupError(f"no materialized view {view!r}: run `scrapy migrate`")
            method = "concurrently" if row[0] else "plain"
            how = sql.SQL("CONCURRENTLY ") if row[0] else sql.SQL("")
            await conn.execute(sql.SQL("REFRESH MATERIALIZED VIEW {}{}").format(how, sql.Identifier(view)))
            duration_ms = _since(started)
            cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(view)))
            rows = int((await cur.fetchone() or (0,))[0])
        return await _record(conn, RefreshResult(view, duration_ms, rows, method))


async def analyze_if_grown(conn: psycopg.AsyncConnection, table: str, written: int) -> bool:
    """ANALYZE `table` when the rows changed since its last ANALYZE, `written` now or counted by
    the server (a refresh that failed after its product roll left them to this one), are
    ANALYZE_SHARE or more of the rows the planner last counted (never analyzed: if any changed);
    whether it did."""
    cur = await conn.execute(
        "SELECT c.reltuples, coalesce(s.n_mod_since_analyze, 0) FROM pg_class c "
        "LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid WHERE c.oid = %s::regclass",
        (table,),
    )
    counted, modified = await cur.fetchone() or (-1.0, 0)
    changed = max(written, int(modified))
    if changed <= 0 or (counted > 0 and changed < ANALYZE_SHARE * counted):
        return False
    await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
    return True


def _since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


async def _record(conn: psycopg.AsyncConnection, result: RefreshResult) -> RefreshResult:
    """The step's row in analytics_refreshes (in the step's transaction when it has one)."""
    await conn.execute(
        "INSERT INTO analytics_refreshes (view_name, duration_ms, row_count, method) VALUES (%s, %s, %s, %s)",
        (result.view, result.duration_ms, result.rows, result.method),
    )
    return result


async def refresh_all(
    conn: psycopg.AsyncConnection, work_mem: str, parts: int = 1, url: str | None = None
) -> list[RefreshResult]:
    """Refresh every view in order, one refresh process at a time; `conn` in autocommit (`parts`,
    `url`: refresh_view's)."""
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", LOCK)
    try:
        return [await refresh_view(conn, view, work_mem, parts, url) for view in VIEWS]
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", LOCK)
