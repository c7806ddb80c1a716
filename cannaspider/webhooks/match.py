"""Matching subscriptions against what happened: one alert_deliveries row per subscription and
event (key `e:<event id>`) or availability change (key `a:<state>:<day>:<brand id>`), once.

Events are read by when they were written (product_events.recorded_at, the start of the close
transaction that wrote them; migrations/022), not by when they occurred (their crawl's start, which
may be hours before its close): those written from a look-back (ALERTS_MATCH_LOOKBACK_S) before the
previous pass began, and not before a look-back before the subscription was made. The look-back
covers a close that began before the previous pass and committed after it; what a pass sees again
it does not deliver twice (the unique key). The first pass reads only the look-back: a new system
does not replay its history.

Availability changes are the market roll's days since then (market_brand_daily, the change
against compare_days before, as GET /api/market computes it): one delivery per state, day and
brand whose change reached the subscription's min_change, a brand that no store carries any more
included (availability 0 on a day its state was crawled). A roll that rewrites a day may move
its figure; the delivery already made stands.

A price_changed event whose move is implausible (analytics/plausible.py: $30 → $0.01, a ×1000
jump) is a wrong price, not a drop: it fires no alert (the market roll counts it,
market_state_daily.price_changes_implausible), with or without --min-drop.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cannaspider.analytics.plausible import price_move_plausible_sql

MARKET_COMPARE_DAYS = 28  # the 4-week change (docs/analytics.md, "Market analytics")

SINCE = """
SELECT coalesce((SELECT matched_at FROM alert_match_state), now()) - make_interval(secs => %(lookback)s), now()
"""
MARK = """
INSERT INTO alert_match_state (matched_at) VALUES (%(now)s)
ON CONFLICT (only_row) DO UPDATE SET matched_at = EXCLUDED.matched_at
"""

BRAND_MATCHES = """
(s.brand_key IS NULL OR sp.canonical_brand_id IN (
    SELECT coalesce(b.canonical_brand_id, b.id) FROM brands b WHERE b.normalized_name = s.brand_key
    UNION SELECT a.brand_id FROM brand_aliases a WHERE a.alias = s.brand_key))
"""

# a price_changed event fires unless its recreational price moved implausibly (a price_changed of
# the medical price alone, or to or from no price, has no such move to judge)
PLAUSIBLE_MOVE = (
    "(e.type <> 'price_changed' OR e.price_rec_old IS NULL OR e.price_rec IS NULL"
    f" OR {price_move_plausible_sql('e.price_rec_old', 'e.price_rec')})"
)

EVENTS = f"""
INSERT INTO alert_deliveries (subscription_id, key, payload)
SELECT s.id, 'e:' || e.id,
       jsonb_build_object(
           'type', e.type, 'event_id', e.id, 'occurred_at', e.occurred_at, 'crawl_run_id', e.crawl_run_id,
           'dispensary_id', e.dispensary_id, 'store', d.name, 'state', d.state, 'city', d.city,
           'provider_product_id', sp.provider_product_id, 'product', coalesce(sp.name, sp.name_raw),
           'brand', sp.brand_name_raw, 'brand_id', sp.canonical_brand_id, 'category', sp.category,
           'price_rec_old', e.price_rec_old, 'price_rec', e.price_rec, 'price_med_old', e.price_med_old,
           'price_med', e.price_med, 'price_rec_special', e.price_rec_special,
           'change_pct', CASE WHEN e.price_rec_old > 0
                              THEN round((e.price_rec - e.price_rec_old) / e.price_rec_old * 100, 2) END)
  FROM product_events e
  JOIN dispensaries d ON d.id = e.dispensary_id
  JOIN store_products sp ON sp.id = e.store_product_id
  JOIN alert_subscriptions s
    ON s.enabled AND e.type = ANY (s.types)
   AND e.recorded_at >= s.created_at - make_interval(secs => %(lookback)s)
   AND (s.state IS NULL OR d.state = s.state)
   AND (s.dispensary_id IS NULL OR e.dispensary_id = s.dispensary_id)
   AND (s.min_drop_pct IS NULL
        OR (e.price_rec_old > 0 AND (e.price_rec_old - e.price_rec) / e.price_rec_old * 100 >= s.min_drop_pct))
   AND {BRAND_MATCHES}
 WHERE e.recorded_at >= %(since)s AND {PLAUSIBLE_MOVE}
ON CONFLICT (subscription_id, key) DO NOTHING
"""

# each brand carried on the day or on the day compare_days before it, in a state crawled on both
# days: a brand no store carries any more has no row of its day, and its availability is 0
AVAILABILITY = """
INSERT INTO alert_deliveries (subscription_id, key, payload)
SELECT s.id, 'a:' || c.state || ':' || c.day || ':' || c.canonical_brand_id,
       jsonb_build_object(
           'type', 'availability_changed', 'state', c.state, 'day', c.day, 'compared_with', c.then_day,
           'brand_id', c.canonical_brand_id, 'brand', b.name, 'stores', c.stores, 'stores_crawled', c.crawled,
           'stores_then', c.stores_then, 'stores_crawled_then', c.crawled_then,
           'availability', round(c.avail, 4), 'availability_then', round(c.avail_then, 4),
           'change', round(c.avail - c.avail_then, 4))
  FROM (SELECT k.state, k.day, k.day - %(compare)s AS then_day, k.canonical_brand_id,
               coalesce(n.stores, 0) AS stores, sn.stores_crawled AS crawled,
               coalesce(t.stores, 0) AS stores_then, st.stores_crawled AS crawled_then,
               coalesce(n.stores, 0)::numeric / sn.stores_crawled AS avail,
               coalesce(t.stores, 0)::numeric / st.stores_crawled AS avail_then
          FROM (SELECT state, day, canonical_brand_id FROM market_brand_daily
                 WHERE day >= (%(since)s AT TIME ZONE 'UTC')::date
                UNION
                SELECT state, day + %(compare)s, canonical_brand_id FROM market_brand_daily
                 WHERE day >= (%(since)s AT TIME ZONE 'UTC')::date - %(compare)s) k
          JOIN market_state_daily sn ON sn.state = k.state AND sn.day = k.day
          JOIN market_state_daily st ON st.state = k.state AND st.day = k.day - %(compare)s
          LEFT JOIN market_brand_daily n
            ON n.state = k.state AND n.day = k.day AND n.canonical_brand_id = k.canonical_brand_id
          LEFT JOIN market_brand_daily t
            ON t.state = k.state AND t.day = k.day - %(compare)s AND t.canonical_brand_id = k.canonical_brand_id) c
  LEFT JOIN brands b ON b.id = c.canonical_brand_id
  JOIN alert_subscriptions s
    ON s.enabled AND 'availability_changed' = ANY (s.types) AND abs(c.avail - c.avail_then) >= s.min_change
   AND (s.state IS NULL OR c.state = s.state)
   AND (s.brand_key IS NULL OR c.canonical_brand_id IN (
        SELECT coalesce(b2.canonical_brand_id, b2.id) FROM brands b2 WHERE b2.normalized_name = s.brand_key
        UNION SELECT a.brand_id FROM brand_aliases a WHERE a.alias = s.brand_key))
ON CONFLICT (subscription_id, key) DO NOTHING
"""


async def match(conn: psycopg.AsyncConnection[Any], lookback_s: float) -> int:
    """One pass: the deliveries it created. One transaction (`conn` in autocommit outside it)."""
    async with conn.transaction():
        # two passes at once would only find each other's rows taken (ON CONFLICT): one at a time anyway
        await conn.execute("LOCK TABLE alert_match_state IN SHARE ROW EXCLUSIVE MODE")
        row = await (await conn.execute(SINCE, {"lookback": lookback_s})).fetchone()
        assert row is not None  # a SELECT without FROM returns its row
        params = {"since": row[0], "now": row[1], "lookback": lookback_s, "compare": MARKET_COMPARE_DAYS}
        created = (await conn.execute(EVENTS, params)).rowcount
        created += (await conn.execute(AVAILABILITY, params)).rowcount
        await conn.execute(MARK, params)
    return created
