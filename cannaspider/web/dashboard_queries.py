"""The dashboard's reads: the database, over dispensaries, store_products, crawl_runs, worker_tasks and the view
store_product_snapshots (migration 011: the old columns, read back from the partitioned
product_snapshots). Each is one statement served by an existing index: a store's products by
store_products_identity, a product's history by store_products_identity then
product_snapshots_product_idx (on store_product_id), a store's last run by
crawl_runs_dispensary_idx.

The crawl-health reports the monitors wrote (cannaspider/monitors/health_notify.py) are read here too, from
crawl_health_reports (every node's): the newest per spider and node, and the blocks of the last 24 hours.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from cannaspider.history.reader import cold_history
from cannaspider.identity import brand_key_name

StockFilter = Literal["in_stock", "oos", "missing"]

OVERVIEW = """
SELECT
  (SELECT count(DISTINCT dispensary_id) FROM crawl_runs WHERE started_at > now() - interval '24 hours')
      AS stores_crawled_24h,
  (SELECT count(*) FROM crawl_runs WHERE started_at > now() - interval '24 hours' AND status = 'complete')
      AS runs_complete_24h,
  (SELECT count(*) FROM crawl_runs WHERE started_at > now() - interval '24 hours' AND status = 'incomplete')
      AS runs_incomplete_24h,
  (SELECT count(*) FROM crawl_runs WHERE started_at > now() - interval '24 hours' AND status = 'failed')
      AS runs_failed_24h,
  (SELECT count(*) FROM dispensaries) AS stores,
  (SELECT count(*) FROM store_products) AS products,
  (SELECT count(*) FROM store_products WHERE stock_status = 'in_stock') AS in_stock,
  (SELECT count(*) FROM store_products WHERE stock_status = 'oos') AS oos,
  (SELECT count(*) FROM worker_tasks WHERE status = 'pending') AS queue_pending,
  (SELECT count(*) FROM worker_tasks WHERE status = 'running') AS queue_running
"""

STORES = """
SELECT d.id, d.name, d.city, d.state, d.platform_dispensary_id, d.crawl_enabled, d.last_crawl_at,
       d.resolution_error, d.menu_empty_since,
       r.started_at AS last_run_at, r.status AS last_run_status, r.error AS last_run_error,
       r.products_seen AS last_run_products,
       (SELECT count(*) FROM store_products p WHERE p.dispensary_id = d.id) AS products,
       (SELECT count(*) FROM store_products p WHERE p.dispensary_id = d.id AND p.stock_status = 'oos') AS oos
  FROM dispensaries d
  LEFT JOIN LATERAL (
        SELECT started_at, status, error, products_seen FROM crawl_runs c
         WHERE c.dispensary_id = d.id ORDER BY c.started_at DESC LIMIT 1) r ON true
 WHERE (%(state)s::text IS NULL OR d.state = %(state)s) AND (%(id)s::bigint IS NULL OR d.id = %(id)s)
 ORDER BY d.name, d.id
 LIMIT %(limit)s
"""

STORE = "SELECT id, name, city, state, last_crawl_at, menu_empty_since FROM dispensaries WHERE id = %s"

# a store's menu emptied and returned (migrations/025_empty_menus.sql), newest first
MENU_EVENTS_SHOWN = 20
MENU_EVENTS = """
SELECT occurred_at, type, products, crawl_run_id FROM store_events
 WHERE dispensary_id = %s ORDER BY id DESC LIMIT %s
"""

# a store's products with their canonical brand (the filter: every spelling of a brand is one
# choice) and unit prices; `brand` is a name in any spelling, resolved to the canonical brands of
# its key (identity.brand_key_name) by the caller
PRODUCTS = """
SELECT sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS name, sp.brand_name_raw AS brand,
       sp.canonical_brand_id, coalesce(b.display_name, b.name) AS canonical_brand, sp.category, sp.subcategory,
       cp.size_key, sp.price_rec::float8 AS price_rec, sp.price_rec_special::float8 AS price_rec_special,
       sp.price_med::float8 AS price_med, sp.unit_price::float8 AS unit_price,
       sp.unit_price_special::float8 AS unit_price_special, sp.unit_price_basis, sp.is_on_special, sp.stock_status,
       sp.is_in_stock, sp.quantity_available, sp.consecutive_misses, sp.last_seen_at,
       -- since when it is out of stock: set with its out_of_stock event (migrations/014_product_events.sql)
       (SELECT es.oos_since FROM product_event_state es
         WHERE es.store_product_id = sp.id AND sp.stock_status = 'oos') AS oos_since
  FROM store_products sp
  LEFT JOIN brands b ON b.id = sp.canonical_brand_id
  LEFT JOIN canonical_products cp ON cp.id = sp.canonical_product_id
 WHERE sp.dispensary_id = %(d)s
   AND (%(brand_ids)s::bigint[] IS NULL OR sp.canonical_brand_id = ANY(%(brand_ids)s))
   AND (%(category)s::text IS NULL OR sp.category = %(category)s)
   AND (%(stock)s::text IS NULL
        OR (%(stock)s = 'in_stock' AND sp.stock_status = 'in_stock')
        OR (%(stock)s = 'oos' AND sp.stock_status = 'oos')
        OR (%(stock)s = 'missing' AND sp.consecutive_misses > 0 AND sp.stock_status = 'in_stock'))
 ORDER BY coalesce(sp.name, sp.name_raw), sp.provider_product_id
 LIMIT %(limit)s
"""

# the canonical brands a name in any spelling is (its key, or an operator's alias of it)
BRANDS_NAMED = """
SELECT coalesce(array_agg(DISTINCT coalesce(canonical_brand_id, id)), '{}') FROM brands WHERE normalized_name = %(key)s
 UNION ALL SELECT coalesce(array_agg(brand_id), '{}') FROM brand_aliases WHERE alias = %(key)s
"""

# the store's brands (canonical: one choice per brand, whatever its spellings) and categories
FACETS = """
SELECT coalesce((SELECT jsonb_agg(jsonb_build_object('id', f.id, 'name', f.name, 'products', f.products)
                                  ORDER BY f.name, f.id)
                   FROM (SELECT b.id, coalesce(b.display_name, b.name) AS name, count(*) AS products
                           FROM store_products sp JOIN brands b ON b.id = sp.canonical_brand_id
                          WHERE sp.dispensary_id = %(d)s GROUP BY b.id) f), '[]'),
       (SELECT array_agg(DISTINCT category ORDER BY category) FROM store_products
         WHERE dispensary_id = %(d)s AND category IS NOT NULL)
"""

PRODUCT = """
SELECT provider_product_id, coalesce(name, name_raw) AS name, brand_name_raw AS brand, canonical_brand_id, category,
       price_rec::float8 AS price_rec, price_rec_special::float8 AS price_rec_special, stock_status,
       consecutive_misses, canonical_product_id
  FROM store_products WHERE dispensary_id = %s AND provider_product_id = %s
"""

HISTORY = """
SELECT captured_at, crawl_run_id, price_rec::float8 AS price_rec, price_rec_special::float8 AS price_rec_special,
       price_med::float8 AS price_med, is_on_special, is_in_stock, stock_status, quantity_available
  FROM store_product_snapshots
 WHERE dispensary_id = %s AND provider_product_id = %s
 ORDER BY captured_at
 LIMIT %s
"""


async def _all(conn: AsyncConnection, query: str, params: Any) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def planned(conn: AsyncConnection, query: str, params: Any) -> list[dict[str, Any]]:
    """`_all`, planned for these very values every time: never a prepared statement. psycopg
    prepares a query run five times, and PostgreSQL may then keep one generic plan for every value;
    for optional filters (`%(store)s::bigint IS NULL OR …`) or a brand of 13,000 rows against one
    of 10, that plan reads what the values would have spared (GET /api/specials?store=: 1.4 ms
    planned for its store, some 300 ms generic at 2,000 stores, benchmarks/analyst.py)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params, prepare=False)
        return await cur.fetchall()


async def overview(conn: AsyncConnection) -> dict[str, Any]:
    return (await _all(conn, OVERVIEW, None))[0]


async def stores(
    conn: AsyncConnection, *, state: str | None = None, store_id: int | None = None, limit: int = 500
) -> list[dict[str, Any]]:
    return await _all(conn, STORES, {"state": state, "id": store_id, "limit": limit})


async def menu_events(
    conn: AsyncConnection, dispensary_id: int, limit: int = MENU_EVENTS_SHOWN
) -> list[dict[str, Any]]:
    """The store's latest store_events (its menu emptied, its menu returned), newest first."""
    return await _all(conn, MENU_EVENTS, (dispensary_id, limit))


async def store(conn: AsyncConnection, dispensary_id: int) -> dict[str, Any] | None:
    rows = await _all(conn, STORE, (dispensary_id,))
    return rows[0] if rows else None


async def products(
    conn: AsyncConnection,
    dispensary_id: int,
    *,
    brand_ids: list[int] | None = None,
    category: str | None = None,
    stock: StockFilter | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """The store's products; `brand_ids`: of these canonical brands only."""
    params = {"d": dispensary_id, "brand_ids": brand_ids, "category": category, "stock": stock, "limit": limit}
    return await _all(conn, PRODUCTS, params)


async def brands_named(conn: AsyncConnection, name: str) -> list[int]:
    """The canonical brands a brand name in any spelling is: none when no brand has its key."""
    key = brand_key_name(name)
    if key is None:
        return []
    rows = await (await conn.execute(BRANDS_NAMED, {"key": key})).fetchall()
    return sorted({brand for (ids,) in rows for brand in ids})


async def facets(conn: AsyncConnection, dispensary_id: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The canonical brands ({id, name, products}) and categories a store's products have (the
    filters' choices)."""
    row = await (await conn.execute(FACETS, {"d": dispensary_id})).fetchone()
    assert row is not None  # scalar subqueries: one row
    return row[0] or [], row[1] or []


async def product(conn: AsyncConnection, dispensary_id: int, provider_product_id: str) -> dict[str, Any] | None:
    rows = await _all(conn, PRODUCT, (dispensary_id, provider_product_id))
    return rows[0] if rows else None


async def history(
    conn: AsyncConnection, dispensary_id: int, provider_product_id: str, *, limit: int = 2000
) -> list[dict[str, Any]]:
    """A product's snapshots, oldest first, from both tiers (docs/history.md): the archived
    months' and PostgreSQL's, merged by time (a month restored may lie between archived ones)."""
    # both at once: the files are read in threads while PostgreSQL answers (psycopg queues the
    # two tiers' queries on the one connection)
    hot, cold = await asyncio.gather(
        _all(conn, HISTORY, (dispensary_id, provider_product_id, limit)),
        cold_history(conn, dispensary_id, provider_product_id, limit),
    )
    if not cold:
        return hot
    return sorted(cold + hot, key=lambda row: row["captured_at"])[:limit]


# The crawl-health reports the monitors wrote (cannaspider/monitors/health_notify.py), every node's:
# the newest of each spider on each node that reported in the last REPORTS_KEPT_DAYS (a node retired
# drops off the page then), and the blocks of the last 24 hours (crawl_health_reports_spider_idx,
# crawl_health_reports_time_idx).
REPORTS_KEPT_DAYS = 7
LATEST_REPORTS = """
SELECT DISTINCT ON (spider, host) host, report FROM crawl_health_reports
 WHERE finished_at > now() - make_interval(days => %s)
 ORDER BY spider, host, finished_at DESC, id DESC
"""
BLOCKS = "SELECT coalesce(sum(blocks), 0) FROM crawl_health_reports WHERE finished_at > now() - interval '24 hours'"


async def latest_reports(conn: AsyncConnection) -> list[dict[str, Any]]:
    """The newest report of each spider on each node, by spider then node."""
    rows = await (await conn.execute(LATEST_REPORTS, (REPORTS_KEPT_DAYS,))).fetchall()
    return [{**report, "host": host} for host, report in rows if isinstance(report, dict)]


async def blocks_24h(conn: AsyncConnection) -> int:
    row = await (await conn.execute(BLOCKS)).fetchone()
    return int(row[0]) if row else 0
