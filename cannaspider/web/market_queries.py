"""Reads over the canonical brands and products (migration 016; docs/analytics.md, "One brand,
one product"): which stores carry a brand, per state, at what median price (as of the last
analytics refresh: market_brands_now); every store that sells a canonical product, with its price
and stock (current rows); and the market analytics (migration 020): a state's day, its brands'
availability and 4-week change, movers, price per gram.

A store *carries* a brand or a product when it has one of its store products in stock, and its menu
is not empty (dispensaries.menu_empty_since NULL): a store whose menu went dark keeps its products'
stock as it was (migrations/025_empty_menus.sql) but says nothing about what it carries now, so
it is left out of the brands' figures (migrations/031_empty_menus_now.sql)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection

from cannaspider.analytics.market import SKUS_OF
from cannaspider.web.dashboard_queries import _all

# from the view the analytics refresh keeps (market_brands_now: state NULL is every state), not
# from store_products: per request that sorted the whole table. The stores per state come as two
# arrays, zipped in brands(): psycopg reads arrays in C, where a jsonb per row cost a JSON decode
# in Python each (60 a request: half the handler's CPU time, benchmarks/market.py)
BRANDS = """
SELECT b.id, coalesce(b.display_name, b.name) AS name, n.stores, n.products, n.store_products, n.median_price,
       s.states, s.state_stores
  FROM market_brands_now n JOIN brands b ON b.id = n.brand_id
 CROSS JOIN LATERAL (
       SELECT array_agg(p.state ORDER BY p.state) AS states, array_agg(p.stores ORDER BY p.state) AS state_stores
         FROM market_brands_now p
        WHERE p.brand_id = n.brand_id AND p.state IS NOT NULL
          AND (%(state)s::text IS NULL OR p.state = %(state)s)) s
 WHERE n.state IS NOT DISTINCT FROM %(state)s::text
 ORDER BY n.stores DESC, b.name, b.id
 LIMIT %(limit)s
"""

# brands by name (GET /api/brands?q=): `q` is folded as the stored keys are (identity.brand_key_name:
# case, accents, punctuation, a company's suffix), found inside a spelling's key or an alias through
# their trigram indexes (migration 042); a key that starts with it first, then the most stores.
# A brand carried nowhere now is found too, with no stores.
BRANDS_SEARCH = """
WITH matched AS (
    SELECT coalesce(b.canonical_brand_id, b.id) AS id, bool_or(b.normalized_name LIKE %(prefix)s) AS lead
      FROM brands b WHERE b.normalized_name LIKE %(inside)s GROUP BY 1
    UNION ALL
    SELECT a.brand_id, a.alias LIKE %(prefix)s FROM brand_aliases a WHERE a.alias LIKE %(inside)s),
found AS (SELECT id, bool_or(lead) AS lead FROM matched GROUP BY id)
SELECT b.id, coalesce(b.display_name, b.name) AS name, coalesce(n.stores, 0) AS stores,
       coalesce(n.products, 0) AS products, coalesce(n.store_products, 0) AS store_products, n.median_price,
       s.states, s.state_stores
  FROM found f JOIN brands b ON b.id = f.id
  LEFT JOIN market_brands_now n ON n.brand_id = b.id AND n.state IS NOT DISTINCT FROM %(state)s::text
 CROSS JOIN LATERAL (
       SELECT array_agg(p.state ORDER BY p.state) AS states, array_agg(p.stores ORDER BY p.state) AS state_stores
         FROM market_brands_now p
        WHERE p.brand_id = b.id AND p.state IS NOT NULL
          AND (%(state)s::text IS NULL OR p.state = %(state)s)) s
 WHERE %(state)s::text IS NULL OR n.brand_id IS NOT NULL
 ORDER BY f.lead DESC, coalesce(n.stores, 0) DESC, coalesce(b.display_name, b.name), b.id
 LIMIT %(limit)s
"""


# the listed brands' stores per platform (GET /api/brands: stores_by_platform), from the daily roll
# (market_brand_daily, migration 034: GET /api/market's figure) on each state's last rolled day,
# summed over the states asked for. market_brands_now has no platform (a new view is a migration),
# and read live from store_products for the brands listed it cost 0.8 s at 2,000 stores × 400
# products (a scan of every store product in stock: EXPLAIN ANALYZE, docs/analytics.md)
BRANDS_BY_PLATFORM = """
WITH last AS (
    SELECT state, max(day) AS day FROM market_state_daily
     WHERE %(state)s::text IS NULL OR state = %(state)s GROUP BY state)
SELECT m.canonical_brand_id AS brand_id, p.key AS platform, sum(p.value::integer)::integer AS stores
  FROM last JOIN market_brand_daily m ON m.state = last.state AND m.day = last.day
 CROSS JOIN LATERAL jsonb_each_text(m.stores_by_platform) p
 WHERE m.canonical_brand_id = ANY(%(ids)s)
 GROUP BY 1, 2 ORDER BY 1, 2
"""


def like_pattern(key: str) -> str:
    """`key` as a LIKE pattern's literal text (keys hold no % or _, but a pattern must not trust it)."""
    return key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


BRAND = """
SELECT b.id, coalesce(b.display_name, b.name) AS name,
       coalesce((SELECT array_agg(DISTINCT o.name ORDER BY o.name) FROM brands o
                  WHERE coalesce(o.canonical_brand_id, o.id) = b.id AND o.name IS NOT NULL), '{}') AS spellings,
       coalesce((SELECT array_agg(DISTINCT o.provider_brand_id ORDER BY o.provider_brand_id) FROM brands o
                  WHERE coalesce(o.canonical_brand_id, o.id) = b.id AND o.provider_brand_id IS NOT NULL), '{}')
           AS provider_brand_ids,
       coalesce((SELECT array_agg(a.alias ORDER BY a.alias) FROM brand_aliases a WHERE a.brand_id = b.id), '{}')
           AS aliases
  FROM brands b WHERE b.id = %s AND b.canonical_brand_id IS NULL
"""

# A brand per state and per category, as of the last analytics refresh (migrations/046_brand_figures_now.sql):
# grouped per request from store_products they read the brand's every store product twice, each on
# its own heap page (13,000 for a large brand at 2,000 stores: 150-300 ms in PostgreSQL)
BRAND_STATES = """
SELECT state, stores, stores_by_platform, products, store_products, median_price, median_price_per_g
  FROM market_brands_now
 WHERE brand_id = %(b)s AND state IS NOT NULL
 ORDER BY state
"""

BRAND_CATEGORIES = """
SELECT category, products, stores, median_price, median_unit_price, unit_price_basis
  FROM brand_categories_now
 WHERE brand_id = %s
 ORDER BY category
"""

PRODUCT = """
SELECT cp.id, cp.name, cp.category, cp.size_key, cp.enterprise_product_id, cp.canonical_brand_id AS brand_id,
       coalesce(b.display_name, b.name) AS brand
  FROM canonical_products cp LEFT JOIN brands b ON b.id = cp.canonical_brand_id
 WHERE cp.id = %s
"""

PRODUCT_STORES = """
SELECT sp.dispensary_id, d.name AS store, d.city, d.state, d.platform, sp.provider_product_id,
       coalesce(sp.name, sp.name_raw) AS name,
       sp.price_rec::float8 AS price_rec, sp.price_rec_special::float8 AS price_rec_special, sp.is_on_special,
       sp.unit_price::float8 AS unit_price, sp.unit_price_basis, sp.stock_status, sp.quantity_available,
       sp.last_seen_at,
       -- its SKUs: each option with its size and unit price (identity.unit_prices)
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'option', e->>'option', 'size_value', e->'size_value', 'size_unit', e->>'size_unit',
                   'price_rec', e->'price_rec', 'price_rec_special', e->'price_rec_special',
                   'unit_price', e->'unit_price', 'unit_price_special', e->'unit_price_special',
                   'unit_price_basis', e->>'unit_price_basis')), '[]')
          FROM jsonb_array_elements(sp.options) e) AS options
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.canonical_product_id = %s
 ORDER BY sp.stock_status, sp.price_rec NULLS LAST, sp.dispensary_id, sp.provider_product_id
 LIMIT %s
"""


# its sizes now, over the store products in stock (a store whose menu is empty now says nothing)
PRODUCT_SIZES = f"""
SELECT k.size, k.grams::float8, count(DISTINCT sp.dispensary_id) AS stores, count(*) AS skus,
       min(k.price)::float8 AS price_min, max(k.price)::float8 AS price_max,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY k.price))::float8 AS price_median,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY k.unit_price))::float8 AS unit_price_median,
       CASE WHEN count(DISTINCT k.basis) = 1 THEN min(k.basis) END AS unit_price_basis
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 CROSS JOIN LATERAL ({SKUS_OF}) k
 WHERE sp.canonical_product_id = %s AND sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL
 GROUP BY k.size, k.grams ORDER BY k.grams NULLS LAST, k.size
"""

# its days across stores, as the analytics refresh rolled them (migration 041, analytics/market.py)
PRODUCT_DAYS = """
SELECT day, stores, store_products, snapshots FROM product_listed_daily
 WHERE canonical_product_id = %(id)s AND day BETWEEN %(since)s AND %(until)s ORDER BY day
"""
PRODUCT_DAY_SIZES = """
SELECT day, size, grams::float8, stores, price_min::float8, price_median::float8, price_max::float8,
       unit_price_median::float8, unit_price_basis
  FROM product_size_daily
 WHERE canonical_product_id = %(id)s AND day BETWEEN %(since)s AND %(until)s
 ORDER BY day, grams NULLS LAST, size
"""
PRODUCT_LAST_DAY = "SELECT max(day) FROM product_listed_daily WHERE canonical_product_id = %s"


async def brands(conn: AsyncConnection, *, state: str | None, limit: int, q: str | None = None) -> list[dict[str, Any]]:
    """Each brand with `stores_by_state` ({state: stores}, in state order) and `stores_by_platform`
    ({platform: stores}, in platform order, rolled: BRANDS_BY_PLATFORM); with `q` (a brand key:
    identity.brand_key_name), the brands whose name contains it."""
    if q is None:
        rows = await _all(conn, BRANDS, {"state": state, "limit": limit})
    else:
        literal = like_pattern(q)
        params = {"state": state, "limit": limit, "prefix": literal + "%", "inside": "%" + literal + "%"}
        rows = await _all(conn, BRANDS_SEARCH, params)
    for row in rows:
        row["stores_by_state"] = dict(zip(row.pop("states") or (), row.pop("state_stores") or (), strict=True))
        row["stores_by_platform"] = {}
    if rows:
        listed = {row["id"]: row for row in rows}
        for found in await _all(conn, BRANDS_BY_PLATFORM, {"ids": list(listed), "state": state}):
            listed[found["brand_id"]]["stores_by_platform"][found["platform"]] = found["stores"]
    return rows


async def brand(conn: AsyncConnection, brand_id: int) -> dict[str, Any] | None:
    rows = await _all(conn, BRAND, (brand_id,))
    if not rows:
        return None
    return {
        **rows[0],
        "states": await _all(conn, BRAND_STATES, {"b": brand_id}),
        "categories": await _all(conn, BRAND_CATEGORIES, (brand_id,)),
    }


async def canonical_product(conn: AsyncConnection, product_id: int, *, limit: int) -> dict[str, Any] | None:
    rows = await _all(conn, PRODUCT, (product_id,))
    if not rows:
        return None
    return {
        **rows[0],
        "sizes": await _all(conn, PRODUCT_SIZES, (product_id,)),
        "stores": await _all(conn, PRODUCT_STORES, (product_id, limit)),
    }


async def product_history(
    conn: AsyncConnection, product_id: int, *, since: date | None, until: date | None, days: int
) -> dict[str, Any] | None:
    """A canonical product's days across stores from `since` to `until` (default: the `days` up to
    its last rolled day): the stores listing it, and per size its lowest, median and highest price.
    None: no such product."""
    found = await _all(conn, PRODUCT, (product_id,))
    if not found:
        return None
    if until is None:
        last = await _all(conn, PRODUCT_LAST_DAY, (product_id,))
        if last and last[0]["max"]:
            until = last[0]["max"]
        else:  # nothing rolled: the span from since, or up to today
            until = since + timedelta(days=days - 1) if since else datetime.now(UTC).date()
    if since is None:
        since = until - timedelta(days=days - 1)
    params = {"id": product_id, "since": since, "until": until}
    sizes: dict[date, list[dict[str, Any]]] = {}
    for row in await _all(conn, PRODUCT_DAY_SIZES, params):
        sizes.setdefault(row.pop("day"), []).append(row)
    listed = await _all(conn, PRODUCT_DAYS, params)
    return {
        **found[0],
        "since": since,
        "until": until,
        "days": [{**row, "sizes": sizes.get(row["day"], [])} for row in listed],
    }


# --- the market analytics (migration 020, rolled by cannaspider/analytics/market.py) ---

# the day shown, and the state's crawled stores on the day compared with (one round trip)
MARKET_DAY = """
SELECT n.day, n.stores_crawled, n.products_seen, n.listed, n.price_changed, n.price_drops, n.price_rises,
       n.specials_started, n.specials_ended, n.out_of_stock, n.back_in_stock, n.price_changes_implausible,
       n.stores_by_platform,
       (SELECT t.stores_crawled FROM market_state_daily t
         WHERE t.state = n.state AND t.day = n.day - %(compare)s) AS stores_crawled_then,
       (SELECT t.stores_by_platform FROM market_state_daily t
         WHERE t.state = n.state AND t.day = n.day - %(compare)s) AS stores_by_platform_then,
       -- the day's complete crawls the figures were made of (a store's day counts with one of them)
       (SELECT jsonb_object_agg(platform, runs) FROM (
            SELECT d.platform, count(*) AS runs FROM crawl_runs c JOIN dispensaries d ON d.id = c.dispensary_id
             WHERE c.status = 'complete' AND NOT c.empty AND coalesce(d.state, '') = n.state
               AND c.started_at >= n.day::timestamp AT TIME ZONE 'UTC'
               AND c.started_at < (n.day + 1)::timestamp AT TIME ZONE 'UTC'
             GROUP BY 1) r) AS crawl_runs_by_platform
  FROM market_state_daily n
 WHERE n.state = %(state)s AND (%(day)s::date IS NULL OR n.day <= %(day)s)
 ORDER BY n.day DESC LIMIT 1
"""

# every brand carried on either day: a brand carried then and not now has availability 0 now
MARKET_BRANDS = """
SELECT coalesce(n.canonical_brand_id, t.canonical_brand_id) AS id, coalesce(b.display_name, b.name) AS name,
       coalesce(n.stores, 0) AS stores, coalesce(t.stores, 0) AS stores_then, n.products, n.median_price::float8,
       coalesce(n.stores_by_platform, '{}') AS stores_by_platform,
       coalesce(t.stores_by_platform, '{}') AS stores_by_platform_then
  FROM (SELECT * FROM market_brand_daily WHERE state = %(state)s AND day = %(day)s) n
  FULL JOIN (SELECT * FROM market_brand_daily WHERE state = %(state)s AND day = %(then)s) t
    ON t.canonical_brand_id = n.canonical_brand_id
  LEFT JOIN brands b ON b.id = coalesce(n.canonical_brand_id, t.canonical_brand_id)
"""

MARKET_CATEGORIES = """
SELECT category, stores, stores_by_platform, products, on_special, skus_weighed, price_per_g_mean::float8,
       price_per_g_p25::float8, price_per_g_median::float8, price_per_g_p75::float8
  FROM market_category_daily
 WHERE state = %(state)s AND day = %(day)s AND city = %(city)s
 ORDER BY category
"""

# each weighed size per category, the state's (migrations/041_sizes_as_skus.sql)
MARKET_SIZES = """
SELECT category, grams::float8, stores, stores_by_platform, skus, price_mean::float8, price_p25::float8,
       price_median::float8, price_p75::float8, price_per_g_median::float8
  FROM market_size_daily
 WHERE state = %(state)s AND day = %(day)s
 ORDER BY category, grams
"""

MARKET_MOVERS = """
SELECT m.kind, m.rank, m.event_id, m.crawl_run_id, m.dispensary_id, d.name AS store, d.city, d.platform,
       sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS product, sp.canonical_brand_id AS brand_id,
       sp.brand_name_raw AS brand, m.price_old::float8, m.price_new::float8, m.change_pct::float8
  FROM market_movers m
  JOIN dispensaries d ON d.id = m.dispensary_id
  JOIN store_products sp ON sp.id = m.store_product_id
 WHERE m.state = %(state)s AND m.day = %(day)s AND m.rank <= %(movers)s
 ORDER BY m.kind, m.rank
"""

# price per gram by category over the days up to the page's day (the market page's chart)
MARKET_CATEGORY_HISTORY = """
SELECT day, category, price_per_g_median::float8 AS median
  FROM market_category_daily
 WHERE state = %(state)s AND city = '' AND day >= %(day)s::date - %(days)s AND day <= %(day)s
   AND price_per_g_median IS NOT NULL
 ORDER BY category, day
"""


def _stores_by_platform(rows: list[dict[str, Any]]) -> dict[str, int]:
    """The distinct stores of the rows (movers) per platform, in platform order."""
    stores: dict[str, set[int]] = {}
    for row in rows:
        stores.setdefault(row["platform"], set()).add(row["dispensary_id"])
    return {platform: len(stores[platform]) for platform in sorted(stores)}


def _share(part: int, whole: int | None) -> float | None:
    return None if not whole else round(part / whole, 4)


async def market(
    conn: AsyncConnection,
    *,
    state: str,
    day: date | None,
    compare_days: int,
    city: str,
    limit: int,
    movers: int,
) -> dict[str, Any] | None:
    """A state's market on `day` (default its last rolled day): None when nothing was rolled."""
    found = await _all(conn, MARKET_DAY, {"state": state, "day": day, "compare": compare_days})
    if not found:
        return None
    head = found[0]
    params = {"state": state, "day": head["day"], "then": head["day"] - timedelta(days=compare_days)}
    crawled, crawled_then = head["stores_crawled"], head.pop("stores_crawled_then")
    by_platform, by_platform_then = head.pop("stores_by_platform"), head.pop("stores_by_platform_then")
    runs_by_platform = head.pop("crawl_runs_by_platform") or {}
    brands = []
    for row in await _all(conn, MARKET_BRANDS, params):
        now, before = _share(row["stores"], crawled), _share(row["stores_then"], crawled_then)
        change = None if now is None or before is None else round(now - before, 4)
        brands.append({**row, "availability": now or 0.0, "availability_then": before, "change": change})
    ranked = sorted((b for b in brands if b["stores"]), key=lambda b: (-b["stores"], b["name"] or "", b["id"]))
    moved = [b for b in brands if b["change"]]
    gains = sorted((b for b in moved if b["change"] > 0), key=lambda b: (-b["change"], b["id"]))[:movers]
    losses = sorted((b for b in moved if b["change"] < 0), key=lambda b: (b["change"], b["id"]))[:movers]
    moves = await _all(conn, MARKET_MOVERS, {**params, "movers": movers})
    events = {k: head[k] for k in head if k not in ("day", "stores_crawled", "products_seen")}
    return {
        "state": state,
        "day": head["day"],
        "compared_with": params["then"],
        "stores_crawled": crawled,
        "stores_crawled_then": crawled_then,
        "stores_by_platform": by_platform,
        "stores_by_platform_then": by_platform_then,
        "crawl_runs_by_platform": runs_by_platform,
        "products_seen": head["products_seen"],
        "events": events,
        "brands": ranked[:limit],
        "brand_movers": {"gains": gains, "losses": losses},
        "price_movers": {
            "drops": [m for m in moves if m["kind"] == "drop"],
            "rises": [m for m in moves if m["kind"] == "rise"],
            "stores_by_platform": _stores_by_platform(moves),
        },
        "categories": await _all(conn, MARKET_CATEGORIES, {**params, "city": city}),
        "sizes": await _all(conn, MARKET_SIZES, params),
    }


async def category_history(conn: AsyncConnection, *, state: str, day: date, days: int) -> list[dict[str, Any]]:
    return await _all(conn, MARKET_CATEGORY_HISTORY, {"state": state, "day": day, "days": days})


MARKET_STATES = """
SELECT DISTINCT ON (state) state, day, stores_crawled, stores_by_platform, products_seen
  FROM market_state_daily WHERE state <> '' ORDER BY state, day DESC
"""


async def market_states(conn: AsyncConnection) -> list[dict[str, Any]]:
    """Each state's last rolled day (the market index page)."""
    return await _all(conn, MARKET_STATES, None)


# --- the states side by side, one category (GET /api/market/states; the market index page) ---

# the sizes the table shows per category: the trade's common sizes (an eighth is 3.5 g); another
# category shows its sizes sold in the most state-days of the rows (up to COMMON_SHOWN)
COMMON_SIZES: dict[str, tuple[float, ...]] = {"Flower": (1.0, 3.5, 7.0, 14.0, 28.0)}
COMMON_SHOWN = 5
SIZE_FIGURES = ("stores", "skus", "price_mean", "price_p25", "price_median", "price_p75", "price_per_g_median")

# each state's last rolled day up to `day`, with the category's price per gram (state-wide) then
STATES_TABLE = """
SELECT n.state, n.day, n.stores_crawled, c.stores, c.stores_by_platform, c.products, c.skus_weighed,
       c.price_per_g_mean::float8, c.price_per_g_p25::float8, c.price_per_g_median::float8,
       c.price_per_g_p75::float8
  FROM (SELECT DISTINCT ON (state) state, day, stores_crawled FROM market_state_daily
         WHERE state <> '' AND (%(day)s::date IS NULL OR day <= %(day)s) ORDER BY state, day DESC) n
  LEFT JOIN market_category_daily c ON c.state = n.state AND c.day = n.day AND c.city = '' AND c.category = %(category)s
 ORDER BY n.state
"""
STATES_SIZES = """
SELECT state, grams::float8, stores, skus, price_mean::float8, price_p25::float8, price_median::float8,
       price_p75::float8, price_per_g_median::float8
  FROM market_size_daily
 WHERE (state, day) IN (SELECT unnest(%(states)s::text[]), unnest(%(days)s::date[])) AND category = %(category)s
 ORDER BY state, grams
"""


WEIGHED_CATEGORIES = """
SELECT DISTINCT category FROM market_category_daily WHERE city = '' AND skus_weighed > 0 ORDER BY 1
"""


async def weighed_categories(conn: AsyncConnection) -> list[str]:
    """The categories with a price per gram on some rolled day (the states table's choices)."""
    return [row["category"] for row in await _all(conn, WEIGHED_CATEGORIES, None)]


async def states_table(conn: AsyncConnection, *, category: str, day: date | None) -> dict[str, Any]:
    """Every state's last rolled day up to `day` side by side for `category`: its price per gram
    over every weighed size and the price of the common sizes (null where a state sells none)."""
    states = await _all(conn, STATES_TABLE, {"category": category, "day": day})
    sizes = await _all(
        conn,
        STATES_SIZES,
        {"states": [r["state"] for r in states], "days": [r["day"] for r in states], "category": category},
    )
    shown = COMMON_SIZES.get(category)
    if shown is None:
        counts: dict[float, int] = {}
        for row in sizes:
            counts[row["grams"]] = counts.get(row["grams"], 0) + 1
        shown = tuple(sorted(sorted(counts, key=lambda g: (-counts[g], g))[:COMMON_SHOWN]))
    by_state: dict[str, dict[float, dict[str, Any]]] = {}
    for row in sizes:
        by_state.setdefault(row.pop("state"), {})[row["grams"]] = row
    for row in states:
        row["stores"] = row["stores"] or 0
        row["stores_by_platform"] = row["stores_by_platform"] or {}
        row["products"] = row["products"] or 0
        row["skus_weighed"] = row["skus_weighed"] or 0
        own = by_state.get(row["state"], {})
        row["sizes"] = [own.get(g) or {"grams": g, **dict.fromkeys(SIZE_FIGURES)} for g in shown]
    return {"category": category, "day": day, "sizes": list(shown), "states": states}
