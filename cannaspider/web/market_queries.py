"""Reads over the canonical brands and products (migration 016; docs/analytics.md, "One brand,
one product"): which stores carry a brand, per state, at what median price; every store that
sells a canonical product, with its price and stock. Current state only (store_products): the
availability over time and its 4-week change are the market analytics' (docs/analytics.md).

A store *carries* a brand or a product when it has one of its store products in stock."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from cannaspider.web.dashboard_queries import _all

BRANDS = """
WITH carried AS (
    SELECT sp.canonical_brand_id AS brand_id, d.state, sp.dispensary_id, sp.price_rec, sp.canonical_product_id
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.stock_status = 'in_stock' AND sp.canonical_brand_id IS NOT NULL
       AND (%(state)s::text IS NULL OR d.state = %(state)s)),
per_state AS (
    SELECT brand_id, coalesce(state, '') AS state, count(DISTINCT dispensary_id) AS stores
      FROM carried GROUP BY 1, 2)
SELECT b.id, b.name, s.stores, s.products, s.store_products, s.median_price,
       (SELECT jsonb_object_agg(p.state, p.stores ORDER BY p.state) FROM per_state p WHERE p.brand_id = b.id)
           AS stores_by_state
  FROM (SELECT brand_id, count(DISTINCT dispensary_id) AS stores, count(DISTINCT canonical_product_id) AS products,
               count(*) AS store_products,
               (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec))::float8 AS median_price
          FROM carried GROUP BY brand_id) s
  JOIN brands b ON b.id = s.brand_id
 ORDER BY s.stores DESC, b.name, b.id
 LIMIT %(limit)s
"""

BRAND = """
SELECT b.id, b.name,
       coalesce((SELECT array_agg(DISTINCT o.name ORDER BY o.name) FROM brands o
                  WHERE coalesce(o.canonical_brand_id, o.id) = b.id AND o.name IS NOT NULL), '{}') AS spellings,
       coalesce((SELECT array_agg(DISTINCT o.provider_brand_id ORDER BY o.provider_brand_id) FROM brands o
                  WHERE coalesce(o.canonical_brand_id, o.id) = b.id AND o.provider_brand_id IS NOT NULL), '{}')
           AS provider_brand_ids,
       coalesce((SELECT array_agg(a.alias ORDER BY a.alias) FROM brand_aliases a WHERE a.brand_id = b.id), '{}')
           AS aliases
  FROM brands b WHERE b.id = %s AND b.canonical_brand_id IS NULL
"""

BRAND_STATES = """
SELECT coalesce(d.state, '') AS state, count(DISTINCT sp.dispensary_id) AS stores,
       count(DISTINCT sp.canonical_product_id) AS products, count(*) AS store_products,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec))::float8 AS median_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.unit_price) FILTER (WHERE sp.unit_price_basis = 'g'))::float8
           AS median_price_per_g
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.canonical_brand_id = %s AND sp.stock_status = 'in_stock'
 GROUP BY 1 ORDER BY 1
"""

BRAND_CATEGORIES = """
SELECT coalesce(sp.category, '') AS category, count(DISTINCT sp.canonical_product_id) AS products,
       count(DISTINCT sp.dispensary_id) AS stores,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec))::float8 AS median_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.unit_price))::float8 AS median_unit_price,
       CASE WHEN count(DISTINCT sp.unit_price_basis) = 1 THEN min(sp.unit_price_basis) END AS unit_price_basis
  FROM store_products sp
 WHERE sp.canonical_brand_id = %s AND sp.stock_status = 'in_stock'
 GROUP BY 1 ORDER BY 1
"""

PRODUCT = """
SELECT cp.id, cp.name, cp.category, cp.size_key, cp.enterprise_product_id, cp.canonical_brand_id AS brand_id,
       b.name AS brand
  FROM canonical_products cp LEFT JOIN brands b ON b.id = cp.canonical_brand_id
 WHERE cp.id = %s
"""

PRODUCT_STORES = """
SELECT sp.dispensary_id, d.name AS store, d.city, d.state, sp.provider_product_id,
       coalesce(sp.name, sp.name_raw) AS name,
       sp.price_rec::float8 AS price_rec, sp.price_rec_special::float8 AS price_rec_special, sp.is_on_special,
       sp.unit_price::float8 AS unit_price, sp.unit_price_basis, sp.stock_status, sp.quantity_available,
       sp.last_seen_at
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.canonical_product_id = %s
 ORDER BY sp.stock_status, sp.price_rec NULLS LAST, sp.dispensary_id, sp.provider_product_id
 LIMIT %s
"""


async def brands(conn: AsyncConnection, *, state: str | None, limit: int) -> list[dict[str, Any]]:
    return await _all(conn, BRANDS, {"state": state, "limit": limit})


async def brand(conn: AsyncConnection, brand_id: int) -> dict[str, Any] | None:
    rows = await _all(conn, BRAND, (brand_id,))
    if not rows:
        return None
    return {
        **rows[0],
        "states": await _all(conn, BRAND_STATES, (brand_id,)),
        "categories": await _all(conn, BRAND_CATEGORIES, (brand_id,)),
    }


async def canonical_product(conn: AsyncConnection, product_id: int, *, limit: int) -> dict[str, Any] | None:
    rows = await _all(conn, PRODUCT, (product_id,))
    if not rows:
        return None
    return {**rows[0], "stores": await _all(conn, PRODUCT_STORES, (product_id, limit))}
