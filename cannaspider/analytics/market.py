"""The market roll (docs/analytics.md, "Market analytics"; tables of migrations/020_market_analytics.sql).

Per state and UTC day: the stores with a complete crawl that saw a menu (a store whose every
complete crawl of the day found its menu empty is left out: migrations/025_empty_menus.sql), the
day's events by type, each canonical brand's carrying stores (its availability is stores /
stores_crawled), price per gram per category (state and city) over every weighed size, the price
of each size per category (each size its own SKU: migrations/041_sizes_as_skus.sql), and the
day's largest price moves.
One step of the analytics refresh (refresh.py), run after analytics_product_daily is rolled and
analytics_store_daily refreshed: it reads those (one row per product per day, not per snapshot: the
snapshots were read once by the product roll) and the events of the days it rewrites. The days
rewritten are those that can have changed since the last market roll: the earliest day the product
roll wrote since then (analytics_roll_state.market_from, migrations/023_market_from.sql), of an
event recorded or of a crawl closed complete since then (less an hour for transactions still open
then); each is deleted and written again in one transaction (readers see the old rows until it
commits), the days before stand. Emptying market_roll_state rebuilds them all.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg

from cannaspider.analytics import parts
from cannaspider.analytics.plausible import price_move_plausible_sql
from cannaspider.identity import WEIGHED_CATEGORIES

# a price_changed event's move is a drop, a rise or a mover only when plausible (plausible.py)
PLAUSIBLE_MOVE = price_move_plausible_sql("e.price_rec_old", "e.price_rec")

STEP = "market_daily"  # its name in analytics_refreshes and in a refresh task's result
MOVERS_PER_DAY = 20  # price drops and rises kept per state and day (the API shows up to this many)

# the earliest day that can have changed since the last market roll began (its rolled_at): the
# product roll's (market_from), an event's recorded since, a crawl's closed complete since (it
# joins analytics_store_daily). ROLL_MARGIN back for the writes that had begun but not committed
# then; a day touched only in the margin is rewritten if its events or crawled stores are not those
# rolled (a daily refresh right after the crawls finds the previous day's closes in its margin).
# everything: no market roll yet (rebuild every day); from_day NULL otherwise: nothing changed
FROM_DAY = """
WITH r AS (SELECT (SELECT rolled_at FROM market_roll_state) AS rolled_at),
touched AS (
    SELECT (e.occurred_at AT TIME ZONE 'UTC')::date AS day, e.recorded_at >= r.rolled_at AS surely
      FROM product_events e, r WHERE e.recorded_at >= r.rolled_at - %(margin)s
    UNION ALL
    SELECT (c.started_at AT TIME ZONE 'UTC')::date, c.finished_at >= r.rolled_at
      FROM crawl_runs c, r WHERE c.status = 'complete' AND NOT c.empty AND c.finished_at >= r.rolled_at - %(margin)s),
days AS (
    SELECT day, bool_or(surely) AS surely, day::timestamp AT TIME ZONE 'UTC' AS since,
           (day + 1)::timestamp AT TIME ZONE 'UTC' AS until
      FROM touched GROUP BY day),
changed AS (
    SELECT d.day FROM days d
     WHERE d.surely
        OR (SELECT count(*) FROM product_events e WHERE e.occurred_at >= d.since AND e.occurred_at < d.until)
           <> (SELECT coalesce(sum(listed + price_changed + specials_started + specials_ended + out_of_stock
                                   + back_in_stock), 0) FROM market_state_daily s WHERE s.day = d.day)
        OR (SELECT count(DISTINCT c.dispensary_id) FROM crawl_runs c
             WHERE c.status = 'complete' AND NOT c.empty AND c.started_at >= d.since AND c.started_at < d.until)
           <> (SELECT coalesce(sum(stores_crawled), 0) FROM market_state_daily s WHERE s.day = d.day))
SELECT r.rolled_at IS NULL AS everything,
       least((SELECT market_from FROM analytics_roll_state), (SELECT min(day) FROM changed)) AS from_day
  FROM r
"""
ROLL_MARGIN = timedelta(hours=1)  # as the product roll's (migrations/012_analytics_roll.sql)
MARK = """
INSERT INTO market_roll_state (rolled_upto, rolled_at) VALUES ((SELECT rolled_upto FROM analytics_roll_state), now())
ON CONFLICT (only_row) DO UPDATE SET rolled_upto = EXCLUDED.rolled_upto, rolled_at = EXCLUDED.rolled_at
"""
TAKEN = "UPDATE analytics_roll_state SET market_from = NULL"  # the days written are rolled now
DELETE = ("market_state_daily", "market_brand_daily", "market_category_daily", "market_size_daily", "market_movers")

# the product-days of complete-crawled stores, with what the market groups them by (their SKUs'
# prices: market_skus). Its texts compare bytewise (COLLATE "C"): the groupings sort them, several times faster than
# by the database's locale; the tables' keys only need equality.
SEEN = """
CREATE TEMP TABLE market_seen ON COMMIT DROP AS
SELECT p.day, coalesce(d.state, '') COLLATE "C" AS state, coalesce(d.city, '') COLLATE "C" AS city,
       p.dispensary_id, d.platform COLLATE "C" AS platform, sp.canonical_brand_id, sp.canonical_product_id,
       coalesce(sp.category, '') COLLATE "C" AS category,
       p.price_close, coalesce(p.special_close, false) AS on_special,
       -- the options of a weighed category's product (the others have no per-gram size: SKUS)
       CASE WHEN sp.price_rec > 0 AND (sp.category IS NULL OR sp.category = ANY(%(weighed)s)) THEN sp.options END
           AS options,
       sp.price_rec AS price_now
  FROM analytics_product_daily p
  JOIN analytics_store_daily a ON a.dispensary_id = p.dispensary_id AND a.day = p.day
  JOIN store_products sp ON sp.id = p.store_product_id
  JOIN dispensaries d ON d.id = p.dispensary_id
 WHERE p.day >= coalesce(%(from)s::date, '-infinity')
   AND (%(states)s::text[] IS NULL OR coalesce(d.state, '') = ANY(%(states)s))
"""

# Each size its own SKU (migrations/041_sizes_as_skus.sql): every weighed option of the day's
# product-days, priced per gram (store_products.options[].unit_price_basis 'g': identity.unit_prices
# sizes only a weighed category's grams; an implausible one has no unit price and is left out).
# The snapshots keep the product's price (its cheapest option's), so an option's price on a day
# is that day's closing price times the option's current price over the cheapest's: the cheapest
# option's own closing price, the others' as they stand to it now (docs/analytics.md, "Sizes as SKUs").
SKUS = """
CREATE TEMP TABLE market_skus ON COMMIT DROP AS
SELECT s.state, s.city, s.day, s.category, s.dispensary_id, s.platform, o.grams, o.price,
       o.price / o.grams AS price_per_g
  FROM market_seen s
 CROSS JOIN LATERAL (
       SELECT round((e->>'size_value')::numeric, 3) AS grams,
              round(s.price_close * (e->>'price_rec')::numeric / s.price_now, 2) AS price
         FROM jsonb_array_elements(s.options) e
        WHERE e->>'unit_price_basis' = 'g' AND (e->>'size_value')::numeric > 0) o
 WHERE s.options IS NOT NULL AND s.price_close IS NOT NULL
"""

STATES = f"""
INSERT INTO market_state_daily
WITH crawled_by_platform AS (
    SELECT coalesce(d.state, '') AS state, a.day, d.platform, count(*) AS stores
      FROM analytics_store_daily a JOIN dispensaries d ON d.id = a.dispensary_id
     WHERE a.day >= coalesce(%(from)s::date, '-infinity') AND a.crawls > a.empty_crawls
       AND (%(states)s::text[] IS NULL OR coalesce(d.state, '') = ANY(%(states)s))
     GROUP BY 1, 2, 3),
crawled AS (
    SELECT state, day, sum(stores)::integer AS stores_crawled, jsonb_object_agg(platform, stores) AS by_platform
      FROM crawled_by_platform GROUP BY 1, 2),
seen AS (SELECT state, day, count(*) AS products_seen FROM market_seen GROUP BY 1, 2),
ev AS (
    SELECT coalesce(d.state, '') AS state, (e.occurred_at AT TIME ZONE 'UTC')::date AS day,
           count(*) FILTER (WHERE e.type = 'listed') AS listed,
           count(*) FILTER (WHERE e.type = 'price_changed') AS price_changed,
           count(*) FILTER (WHERE e.type = 'price_changed' AND {PLAUSIBLE_MOVE} AND e.price_rec < e.price_rec_old)
               AS price_drops,
           count(*) FILTER (WHERE e.type = 'price_changed' AND {PLAUSIBLE_MOVE} AND e.price_rec > e.price_rec_old)
               AS price_rises,
           count(*) FILTER (WHERE e.type = 'special_started') AS specials_started,
           count(*) FILTER (WHERE e.type = 'special_ended') AS specials_ended,
           count(*) FILTER (WHERE e.type = 'out_of_stock') AS out_of_stock,
           count(*) FILTER (WHERE e.type = 'back_in_stock') AS back_in_stock,
           count(*) FILTER (WHERE e.type = 'price_changed' AND e.price_rec IS DISTINCT FROM e.price_rec_old
                            AND NOT coalesce({PLAUSIBLE_MOVE}, false)) AS price_changes_implausible
      FROM product_events e JOIN dispensaries d ON d.id = e.dispensary_id
     WHERE e.occurred_at >= coalesce(%(from)s::date::timestamp AT TIME ZONE 'UTC', '-infinity')
       AND (%(states)s::text[] IS NULL OR coalesce(d.state, '') = ANY(%(states)s))
     GROUP BY 1, 2)
SELECT c.state, c.day, c.stores_crawled, coalesce(s.products_seen, 0),
       coalesce(ev.listed, 0), coalesce(ev.price_changed, 0), coalesce(ev.price_drops, 0),
       coalesce(ev.price_rises, 0), coalesce(ev.specials_started, 0), coalesce(ev.specials_ended, 0),
       coalesce(ev.out_of_stock, 0), coalesce(ev.back_in_stock, 0), coalesce(ev.price_changes_implausible, 0),
       c.by_platform
  FROM crawled c
  LEFT JOIN seen s ON s.state = c.state AND s.day = c.day
  LEFT JOIN ev ON ev.state = c.state AND ev.day = c.day
"""

# stores per platform: a store is of one platform, so its stores add up to the brand's stores
BRANDS = """
INSERT INTO market_brand_daily
WITH by_platform AS (
    SELECT state, day, canonical_brand_id, jsonb_object_agg(platform, stores) AS stores_by_platform
      FROM (SELECT state, day, canonical_brand_id, platform, count(DISTINCT dispensary_id) AS stores
              FROM market_seen WHERE canonical_brand_id IS NOT NULL GROUP BY 1, 2, 3, 4) p
     GROUP BY 1, 2, 3)
SELECT s.state, s.day, s.canonical_brand_id, count(DISTINCT s.dispensary_id), c.stores_crawled,
       count(DISTINCT s.canonical_product_id), count(*),
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY s.price_close))::numeric(12, 2), b.stores_by_platform
  FROM market_seen s JOIN market_state_daily c ON c.state = s.state AND c.day = s.day
  JOIN by_platform b ON b.state = s.state AND b.day = s.day AND b.canonical_brand_id = s.canonical_brand_id
 WHERE s.canonical_brand_id IS NOT NULL
 GROUP BY s.state, s.day, s.canonical_brand_id, c.stores_crawled, b.stores_by_platform
"""

# the state's figures (city '') and each named city's
CATEGORIES = """
INSERT INTO market_category_daily (state, city, day, category, stores, products, on_special, price_per_g_p25,
                                   price_per_g_median, price_per_g_p75, stores_by_platform, skus_weighed,
                                   price_per_g_mean)
WITH by_platform AS (
    SELECT state, city, day, category, jsonb_object_agg(platform, stores) AS stores_by_platform
      FROM (SELECT state, CASE WHEN grouping(city) = 1 THEN '' ELSE city END AS city, grouping(city) AS whole,
                   day, category, platform, count(DISTINCT dispensary_id) AS stores
              FROM market_seen
             GROUP BY GROUPING SETS ((state, day, category, platform), (state, day, category, city, platform))) p
     WHERE whole = 1 OR city <> ''
     GROUP BY 1, 2, 3, 4),
per_g AS (  -- over every weighed SKU (market_skus), equivalized to the gram
    SELECT state, CASE WHEN grouping(city) = 1 THEN '' ELSE city END AS city, grouping(city) AS whole,
           day, category, count(*) AS skus, avg(price_per_g)::numeric(16, 4) AS mean,
           (percentile_cont(0.25) WITHIN GROUP (ORDER BY price_per_g))::numeric(16, 4) AS p25,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_per_g))::numeric(16, 4) AS p50,
           (percentile_cont(0.75) WITHIN GROUP (ORDER BY price_per_g))::numeric(16, 4) AS p75
      FROM market_skus
     GROUP BY GROUPING SETS ((state, day, category), (state, day, category, city)))
SELECT g.state, g.city, g.day, g.category, stores, products, on_special, w.p25, w.p50, w.p75, b.stores_by_platform,
       coalesce(w.skus, 0), w.mean
  FROM (SELECT state, CASE WHEN grouping(city) = 1 THEN '' ELSE city END AS city, grouping(city) AS whole,
               day, category, count(DISTINCT dispensary_id) AS stores, count(*) AS products,
               count(*) FILTER (WHERE on_special) AS on_special
          FROM market_seen
         GROUP BY GROUPING SETS ((state, day, category), (state, day, category, city))) g
  JOIN by_platform b ON b.state = g.state AND b.city = g.city AND b.day = g.day AND b.category = g.category
  LEFT JOIN per_g w ON w.state = g.state AND w.city = g.city AND w.day = g.day AND w.category = g.category
                   AND w.whole = g.whole
 WHERE g.whole = 1 OR g.city <> ''
"""

# each weighed size of a category, the state's (market_skus); its stores per platform as the others'
SIZES = """
INSERT INTO market_size_daily
WITH by_platform AS (
    SELECT state, day, category, grams, jsonb_object_agg(platform, stores) AS stores_by_platform
      FROM (SELECT state, day, category, grams, platform, count(DISTINCT dispensary_id) AS stores
              FROM market_skus GROUP BY 1, 2, 3, 4, 5) p
     GROUP BY 1, 2, 3, 4),
figures AS (
    SELECT state, day, category, grams, count(DISTINCT dispensary_id) AS stores, count(*) AS skus,
           avg(price)::numeric(12, 2) AS mean,
           (percentile_cont(0.25) WITHIN GROUP (ORDER BY price))::numeric(12, 2) AS p25,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY price))::numeric(12, 2) AS p50,
           (percentile_cont(0.75) WITHIN GROUP (ORDER BY price))::numeric(12, 2) AS p75,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_per_g))::numeric(16, 4) AS per_g
      FROM market_skus GROUP BY 1, 2, 3, 4)
SELECT f.state, f.day, f.category, f.grams, f.stores, f.skus, f.mean, f.p25, f.p50, f.p75, f.per_g, b.stores_by_platform
  FROM figures f
  JOIN by_platform b ON b.state = f.state AND b.day = f.day AND b.category = f.category AND b.grams = f.grams
"""

MOVERS = f"""
INSERT INTO market_movers
SELECT state, day, kind, rank, id, crawl_run_id, dispensary_id, store_product_id, price_rec_old, price_rec, pct
  FROM (SELECT coalesce(d.state, '') AS state, (e.occurred_at AT TIME ZONE 'UTC')::date AS day,
               CASE WHEN e.price_rec < e.price_rec_old THEN 'drop' ELSE 'rise' END AS kind,
               row_number() OVER (PARTITION BY coalesce(d.state, ''), (e.occurred_at AT TIME ZONE 'UTC')::date,
                                               e.price_rec < e.price_rec_old
                                  ORDER BY abs(e.price_rec - e.price_rec_old) / e.price_rec_old DESC, e.id) AS rank,
               e.id, e.crawl_run_id, e.dispensary_id, e.store_product_id, e.price_rec_old, e.price_rec,
               round((e.price_rec - e.price_rec_old) / e.price_rec_old * 100, 2) AS pct
          FROM product_events e JOIN dispensaries d ON d.id = e.dispensary_id
         WHERE e.occurred_at >= coalesce(%(from)s::date::timestamp AT TIME ZONE 'UTC', '-infinity')
           AND e.type = 'price_changed' AND (%(states)s::text[] IS NULL OR coalesce(d.state, '') = ANY(%(states)s))
           AND e.price_rec <> e.price_rec_old AND {PLAUSIBLE_MOVE}) m
 WHERE rank <= %(movers)s
"""


# A canonical product is product × size for prices: each option of a store product is a SKU,
# named by its size in grams ('3.5g') when weighed, else by the option's own name ('N/A', '10pk').
# `factor` is the option's price over the store product's (its cheapest option's: the price the
# snapshots keep), so a day's closing price times it is the option's price that day; `per` what one
# unit holds (its grams, a pack's pieces, its THC / 100 mg: price / unit price). Over `sp` (a
# store_products row): GET /api/products/{id} reads it too. Sizes compare bytewise (COLLATE "C", as
# market_seen's texts): the roll sorts them, the table's key only needs equality.
SKUS_OF = """
SELECT CASE WHEN e->>'size_unit' = 'g' AND (e->>'size_value')::numeric > 0
            THEN trim_scale(round((e->>'size_value')::numeric, 3))::text || 'g' ELSE coalesce(e->>'option', '') END
           COLLATE "C" AS size,
       CASE WHEN e->>'size_unit' = 'g' AND (e->>'size_value')::numeric > 0
            THEN round((e->>'size_value')::numeric, 3) END AS grams,
       (e->>'price_rec')::numeric AS price, (e->>'unit_price')::numeric AS unit_price,
       e->>'unit_price_basis' AS basis,
       (e->>'price_rec')::numeric / sp.price_rec AS factor,
       round((e->>'price_rec')::numeric / nullif((e->>'unit_price')::numeric, 0), 3) AS per
  FROM jsonb_array_elements(sp.options) e
 WHERE (e->>'price_rec')::numeric > 0 AND sp.price_rec > 0
"""

# A canonical product's days across stores (migration 041, GET /api/products/{id}/history): the
# product-days of stores crawled completely that day, as the market counts them, of the products
# in this part's share (canonical_product_id % n = k: a product's figures are over every state).
PRODUCT_DAYS = f"""
WITH listed AS MATERIALIZED (
    SELECT sp.canonical_product_id, p.day, sp.dispensary_id, p.snapshots, p.price_close, sp.price_rec, sp.options
      FROM analytics_product_daily p
      JOIN analytics_store_daily a ON a.dispensary_id = p.dispensary_id AND a.day = p.day AND a.crawls > a.empty_crawls
      JOIN store_products sp ON sp.id = p.store_product_id
     WHERE p.day >= coalesce(%(from)s::date, '-infinity') AND sp.canonical_product_id IS NOT NULL
       AND (%(n)s::int IS NULL OR sp.canonical_product_id %% %(n)s = %(k)s)),
days AS (
    INSERT INTO product_listed_daily
    SELECT canonical_product_id, day, count(DISTINCT dispensary_id), count(*), sum(snapshots)
      FROM listed GROUP BY 1, 2),
skus AS MATERIALIZED (  -- the options' expressions once, then sorted as plain columns
    SELECT sp.canonical_product_id, sp.day, sp.dispensary_id, k.size, k.grams, k.basis, k.per,
           round(sp.price_close * k.factor, 2) AS price
      FROM listed sp CROSS JOIN LATERAL ({SKUS_OF}) k
     WHERE sp.price_close IS NOT NULL)
-- the median unit price is the median price over what a unit holds, when every store's SKU holds
-- the same (one sort a group: the median's)
INSERT INTO product_size_daily
SELECT canonical_product_id, day, size, grams, count(DISTINCT dispensary_id), min(price),
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY price))::numeric(12, 2), max(price),
       CASE WHEN min(per) = max(per)
            THEN ((percentile_cont(0.5) WITHIN GROUP (ORDER BY price)) / min(per))::numeric(16, 4) END,
       CASE WHEN min(basis) = max(basis) THEN min(basis) END
  FROM skus GROUP BY 1, 2, 3, 4
"""
PRODUCT_TABLES = ("product_listed_daily", "product_size_daily")

# every state a part may have to rewrite: the stores' (weighed by their count, which the work
# follows) and those of the rows it deletes (a state no store is in any more)
STATES_OF = """
SELECT state, sum(stores)::int FROM (
    SELECT coalesce(state, '') AS state, count(*) AS stores FROM dispensaries GROUP BY 1
    UNION ALL SELECT state, 0 FROM market_state_daily WHERE day >= coalesce(%(from)s::date, '-infinity')
    UNION ALL SELECT state, 0 FROM market_brand_daily WHERE day >= coalesce(%(from)s::date, '-infinity')
    UNION ALL SELECT state, 0 FROM market_category_daily WHERE day >= coalesce(%(from)s::date, '-infinity')
    UNION ALL SELECT state, 0 FROM market_size_daily WHERE day >= coalesce(%(from)s::date, '-infinity')
    UNION ALL SELECT state, 0 FROM market_movers WHERE day >= coalesce(%(from)s::date, '-infinity')) s
 GROUP BY state
"""


async def _changed(conn: psycopg.AsyncConnection, movers_per_day: int) -> dict[str, Any] | None:
    """The parameters of a rewrite from the earliest day changed (every state), None: none changed."""
    row = await (await conn.execute(FROM_DAY, {"margin": ROLL_MARGIN})).fetchone()
    assert row is not None  # a SELECT over one row returns it
    everything, from_day = row
    if not everything and from_day is None:
        return None
    return {
        "from": None if everything else from_day,
        "movers": movers_per_day,
        "states": None,
        "weighed": sorted(WEIGHED_CATEGORIES),
    }


async def _rewrite(conn: psycopg.AsyncConnection, params: dict[str, Any]) -> int:
    """Rewrite the days from params["from"] of the states params["states"] (None: all); the rows written."""
    for table in DELETE:  # constant names, never input
        await conn.execute(
            f"DELETE FROM {table} WHERE day >= coalesce(%(from)s::date, '-infinity')"
            " AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s))",
            params,
        )
    await conn.execute(SEEN, params)
    await conn.execute(SKUS)
    written = 0
    for statement in (STATES, BRANDS, CATEGORIES, SIZES, MOVERS):
        written += (await conn.execute(statement, params)).rowcount
    await conn.execute("DROP TABLE market_skus, market_seen")
    return written


async def _rewrite_products(
    conn: psycopg.AsyncConnection, params: dict[str, Any], share: tuple[int, int] | None
) -> int:
    """Rewrite the canonical products' days from params["from"], of the products `share` = (n, k)
    names (canonical_product_id % n = k; None: all); the rows written."""
    by = {**params, "n": share[0] if share else None, "k": share[1] if share else None}
    for table in PRODUCT_TABLES:  # constant names, never input
        await conn.execute(
            f"DELETE FROM {table} WHERE day >= coalesce(%(from)s::date, '-infinity')"
            " AND (%(n)s::int IS NULL OR canonical_product_id %% %(n)s = %(k)s)",
            by,
        )
    cur = await conn.execute(PRODUCT_DAYS, by)
    return cur.rowcount


async def roll(conn: psycopg.AsyncConnection, movers_per_day: int = MOVERS_PER_DAY) -> int:
    """Rewrite the market tables from the earliest day changed since the last roll; the rows written.

    Runs in the caller's transaction (refresh.refresh_view opens one per step)."""
    await conn.execute("LOCK TABLE market_state_daily IN SHARE ROW EXCLUSIVE MODE")  # one roll at a time
    # no product roll meanwhile: the days it writes would be taken (TAKEN) but not read
    await conn.execute("LOCK TABLE analytics_product_daily IN SHARE MODE")
    params = await _changed(conn, movers_per_day)
    written = 0 if params is None else await _rewrite(conn, params) + await _rewrite_products(conn, params, None)
    await conn.execute(MARK)
    await conn.execute(TAKEN)
    return written


async def _part(url: str, work_mem: str, params: dict[str, Any]) -> int:
    async with parts.own_transaction(url, work_mem) as conn:
        return await _rewrite(conn, params)


async def _products_part(url: str, work_mem: str, params: dict[str, Any], share: tuple[int, int]) -> int:
    async with parts.own_transaction(url, work_mem) as conn:
        return await _rewrite_products(conn, params, share)


async def roll_in_parts(
    conn: psycopg.AsyncConnection, work_mem: str, parts_at_most: int, url: str, movers_per_day: int = MOVERS_PER_DAY
) -> int:
    """roll() with the states split into up to `parts_at_most` parts of about equal stores, each
    rewritten in its own transaction on a connection of its own, all at once (every figure is a
    state's: the parts' union is the one-part roll). `conn` (autocommit) holds the roll's own
    transaction meanwhile: its lock keeps product rolls out until the mark is written, and the mark
    is written, there, only once every part committed (a failed or killed part leaves the days to
    the next roll, which rewrites them all again). One roll at a time: the refresh's lock."""
    async with parts.transaction(conn, work_mem):
        await conn.execute("LOCK TABLE analytics_product_daily IN SHARE MODE")
        params = await _changed(conn, movers_per_day)
        written = 0
        if params is not None:
            weights: dict[str, int] = dict(await (await conn.execute(STATES_OF, params)).fetchall())
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(_part(url, work_mem, {**params, "states": share}))
                    for share in parts.split(weights, parts_at_most)
                ]
            # then the canonical products' days, split by product (each over every state)
            async with asyncio.TaskGroup() as group:
                tasks += [
                    group.create_task(_products_part(url, work_mem, params, (parts_at_most, k)))
                    for k in range(max(1, parts_at_most))
                ]
            written = sum(t.result() for t in tasks)
        await conn.execute(MARK)
        await conn.execute(TAKEN)
    return written
