"""The SQL of a store's close (units/store_transaction.py runs it): the seed's out-of-stock rules, the
OOS guard and the product events of a complete crawl, in one statement; an incomplete crawl's
figures. Both leave a run that is no longer 'running' as it is (closed already: its lease expired
and the queue failed it, or the crawl stopped): a close runs once.
"""

OOS_AFTER_MISSES = 3

# One statement per store (one round trip, atomic). The seed's three updates, folded together:
# products in the feed get their misses reset and are back in stock; the others get one more
# miss (up to 3), and those reaching 3 are marked 'oos' in the same update. The ids seen in the
# feed travel as one JSON array: one string parameter, exact for any id.
# The OOS guard (README, "Crawl correctness"): of the products that were in stock before this crawl
# started (rows it inserted are newer than its run), how many did it see? Below OOS_GUARD_MIN_SHARE
# of them the crawl is an incident, not evidence: no misses, and the run is flagged suspect. A store
# with nothing in stock yet (its first crawl) is not guarded; a share of 0 turns the guard off.
# The guard lets go (migrations/013_oos_guard_expiry.sql): a suspect crawl still counts, per product,
# the suspect crawls in a row that missed it (suspect_misses), and numbers itself in its store's
# streak of suspect crawls (suspect_streak, from the previous complete run that saw a menu). The
# %(limit)s-th suspect crawl in a row confirms the collapse: the misses of the whole streak count (a
# product missing from all three reaches 3 and is 'oos'), the streak ends, and the next crawl is
# judged against the menu that is left. A crawl that is not suspect ends a streak too: a product it
# sees is back with no miss (a collapse of one or two crawls that recovers marks nothing), and a
# product it misses as well carries the streak's suspect misses into its count (a product that
# really left during a short collapse is 'oos' at its third miss in a row, as the seed would have it).
# An empty menu (migrations/025_empty_menus.sql: complete, not one product seen) is no evidence at
# all: it counts no miss, touches no product's stock or suspect misses, is skipped by the streak,
# writes no product event, and records the store's state instead: dispensaries.menu_empty_since
# (set by the first empty crawl, cleared by the next crawl that sees a product) and one
# store_events row when the menu empties and one when it returns.
# Events (migrations/014_product_events.sql, docs/analytics.md "Events"): the same statement writes
# one product_events row per change, judged against the state the product had at the last crawl
# that wrote events (product_event_state, which only this statement writes: no lock taken on
# store_products rows that the image pipeline updates; the writer's upsert has overwritten those
# rows by now). A crawl that is not suspect writes them all; a suspect one only what it concludes,
# the out_of_stock of a confirmed collapse, and leaves the other changes for the next crawl to
# report. ON CONFLICT: a run's events exist once, whatever retries its close.
# A store's products are those of its platform (`provider` is the store's `dispensaries.platform`,
# read in store_was).
CLOSE_COMPLETE = """
WITH seen AS MATERIALIZED (SELECT jsonb_array_elements_text(%(seen)s::jsonb) AS id),
store_was AS MATERIALIZED (SELECT menu_empty_since, platform FROM dispensaries WHERE id = %(d)s),
guard AS MATERIALIZED (
    SELECT count(*) AS in_stock,
           count(*) FILTER (WHERE provider_product_id IN (SELECT id FROM seen)) AS seen_in_stock
      FROM store_products
     WHERE dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was) AND stock_status = 'in_stock'
       AND first_seen_at < coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())),
previous AS MATERIALIZED (  -- the store's last complete crawl before this one that saw a menu
    SELECT suspect, suspect_streak FROM crawl_runs
     WHERE dispensary_id = %(d)s AND status = 'complete' AND NOT empty AND id <> %(run)s
       AND started_at <= coalesce((SELECT started_at FROM crawl_runs WHERE id = %(run)s), now())
     ORDER BY started_at DESC LIMIT 1),
judged AS MATERIALIZED (
    SELECT NOT %(empty)s AND %(min_share)s::float8 > 0 AND in_stock > 0
           AND seen_in_stock < %(min_share)s::float8 * in_stock AS suspect, %(empty)s::boolean AS empty,
           in_stock, seen_in_stock,
           -- a run closed already (failed by the queue, or by a stop) is not this close's to judge
           EXISTS (SELECT 1 FROM crawl_runs WHERE id = %(run)s AND status = 'running') AS live
      FROM guard),
verdict AS MATERIALIZED (
    SELECT j.*, s.streak, coalesce(s.streak >= %(limit)s, false) AS confirmed,
           NOT j.empty AND (NOT j.suspect OR coalesce(s.streak >= %(limit)s, false)) AS counts,
           %(events)s AND NOT j.suspect AND NOT j.empty AND j.live AS writes_events,
           %(events)s AND j.live AS writes_oos
      FROM judged j
     CROSS JOIN LATERAL (
            SELECT CASE WHEN j.suspect THEN 1 + coalesce(
                       (SELECT p.suspect_streak FROM previous p
                         WHERE p.suspect AND p.suspect_streak BETWEEN 1 AND %(limit)s - 1), 0) END AS streak) s),
reset AS (
    UPDATE store_products
       SET consecutive_misses = 0, suspect_misses = 0, last_seen_at = now(), is_in_stock = true,
           stock_status = 'in_stock'
     WHERE dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was)
       AND provider_product_id IN (SELECT id FROM seen)
       AND (consecutive_misses <> 0 OR suspect_misses <> 0 OR stock_status <> 'in_stock')
       AND (SELECT live FROM verdict)
    RETURNING 1),
changed AS MATERIALIZED (  -- seen products whose state differs from the last event-writing crawl's
    SELECT sp.id, sp.price_rec, sp.price_med, sp.price_rec_special, sp.price_med_special, sp.is_on_special,
           es.price_rec AS old_rec, es.price_med AS old_med, es.is_on_special AS old_special,
           es.oos_since AS old_oos_since
      FROM store_products sp
      LEFT JOIN product_event_state es ON es.store_product_id = sp.id
     WHERE sp.dispensary_id = %(d)s AND sp.provider = (SELECT platform FROM store_was)
       AND sp.provider_product_id IN (SELECT id FROM seen)
       AND (SELECT writes_events FROM verdict)
       AND (es.is_on_special IS NULL OR es.oos_since IS NOT NULL OR es.is_on_special <> sp.is_on_special
            OR es.price_rec IS DISTINCT FROM sp.price_rec OR es.price_med IS DISTINCT FROM sp.price_med)),
moved_on AS (
    INSERT INTO product_event_state AS es (store_product_id, price_rec, price_med, is_on_special, oos_since)
    SELECT id, price_rec, price_med, is_on_special, NULL FROM changed
    ON CONFLICT (store_product_id) DO UPDATE
       SET price_rec = EXCLUDED.price_rec, price_med = EXCLUDED.price_med, is_on_special = EXCLUDED.is_on_special,
           oos_since = NULL
    RETURNING 1),
missed AS (
    UPDATE store_products
       SET consecutive_misses = CASE WHEN NOT v.counts THEN consecutive_misses
               ELSE least(%(limit)s, consecutive_misses + 1 + suspect_misses) END,
           suspect_misses = CASE WHEN v.counts THEN 0 ELSE suspect_misses + 1 END,
           stock_status = CASE WHEN v.counts AND consecutive_misses + 1 + suspect_misses >= %(limit)s THEN 'oos'
               ELSE stock_status END,
           is_in_stock = CASE WHEN v.counts AND consecutive_misses + 1 + suspect_misses >= %(limit)s THEN false
               ELSE is_in_stock END,
           updated_at = now()
      FROM verdict v
     WHERE v.live AND NOT v.empty AND dispensary_id = %(d)s AND provider = (SELECT platform FROM store_was)
       AND provider_product_id NOT IN (SELECT id FROM seen) AND consecutive_misses < %(limit)s
    RETURNING store_products.id, store_products.consecutive_misses, v.counts AS counted,
              store_products.price_rec, store_products.price_med, store_products.price_rec_special,
              store_products.price_med_special),
went_oos AS MATERIALIZED (  -- marked now (a missed row had fewer misses), unless an interval is open
    -- already (an incomplete crawl, which writes no event, saw the product in between)
    SELECT m.* FROM missed m LEFT JOIN product_event_state es ON es.store_product_id = m.id
     WHERE m.counted AND m.consecutive_misses >= %(limit)s AND (SELECT writes_oos FROM verdict)
       AND es.oos_since IS NULL),
oos_opened AS (
    INSERT INTO product_event_state AS es (store_product_id, oos_since)
    SELECT id, now() FROM went_oos
    ON CONFLICT (store_product_id) DO UPDATE SET oos_since = EXCLUDED.oos_since
    RETURNING 1),
events AS (
    INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec_old,
                                price_med_old, price_rec, price_med, price_rec_special, price_med_special)
    SELECT cr.started_at, cr.id, %(d)s, e.id, e.type, e.rec_old, e.med_old, e.price_rec, e.price_med,
           e.price_rec_special, e.price_med_special
      FROM crawl_runs cr
     CROSS JOIN (
            SELECT r.id, t.type, CASE WHEN t.type = 'price_changed' THEN r.old_rec END AS rec_old,
                   CASE WHEN t.type = 'price_changed' THEN r.old_med END AS med_old,
                   r.price_rec, r.price_med, r.price_rec_special, r.price_med_special
              FROM changed r
             CROSS JOIN LATERAL (VALUES
                    ('listed', r.old_special IS NULL),
                    ('back_in_stock', r.old_oos_since IS NOT NULL),
                    ('price_changed', r.old_special IS NOT NULL
                        AND (r.old_rec IS DISTINCT FROM r.price_rec OR r.old_med IS DISTINCT FROM r.price_med)),
                    ('special_started', r.old_special IS NOT NULL AND r.is_on_special AND NOT r.old_special),
                    ('special_ended', r.old_special IS NOT NULL AND NOT r.is_on_special AND r.old_special)
                   ) AS t(type, happened)
             WHERE t.happened
            UNION ALL
            SELECT m.id, 'out_of_stock', NULL, NULL, m.price_rec, m.price_med, m.price_rec_special,
                   m.price_med_special
              FROM went_oos m) e
     WHERE cr.id = %(run)s
    ON CONFLICT ON CONSTRAINT product_events_once DO NOTHING
    RETURNING 1),
store AS (  -- an empty menu is the store's state from its first empty crawl until a menu returns
    UPDATE dispensaries
       SET last_crawl_at = now(), updated_at = now(),
           menu_empty_since = CASE WHEN %(empty)s
               THEN coalesce(menu_empty_since, (SELECT started_at FROM crawl_runs WHERE id = %(run)s)) END
     WHERE id = %(d)s AND (SELECT live FROM verdict) RETURNING 1),
store_event AS (  -- one when the menu empties, one when it returns: never one per empty crawl
    INSERT INTO store_events (occurred_at, crawl_run_id, dispensary_id, type, products)
    SELECT cr.started_at, cr.id, %(d)s, CASE WHEN v.empty THEN 'menu_emptied' ELSE 'menu_returned' END,
           CASE WHEN v.empty THEN v.in_stock ELSE %(seen_n)s END
      FROM crawl_runs cr CROSS JOIN verdict v
     WHERE cr.id = %(run)s AND v.live
       AND v.empty = ((SELECT menu_empty_since FROM store_was) IS NULL)
    ON CONFLICT ON CONSTRAINT store_events_once DO NOTHING
    RETURNING type),
run AS (
    UPDATE crawl_runs
       SET status = 'complete', finished_at = now(),
           duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
           pages_fetched = %(pages)s, products_seen = %(seen_n)s, products_new = %(new)s,
           products_missed = (SELECT count(*) FROM missed WHERE counted),
           products_marked_oos = (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
           errors = %(errors)s, error = NULL,
           suspect = v.suspect, suspect_streak = v.streak, empty = v.empty,
           suspect_reason = CASE WHEN v.suspect THEN
               'saw ' || v.seen_in_stock || ' of the ' || v.in_stock || ' products in stock before this crawl '
               || '(below OOS_GUARD_MIN_SHARE = ' || %(min_share)s::float8 || '): '
               || CASE WHEN v.confirmed THEN
                      'suspect crawl ' || v.streak || ' in a row, which confirms the collapse: the misses of the '
                      || v.streak || ' crawls count, '
                      || (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s)
                      || ' products marked out of stock; the next crawl is judged against this menu'
                  ELSE 'no product counted missing (suspect crawl ' || v.streak || ' of the ' || %(limit)s
                      || ' in a row that confirm a collapse)' END
           END
      FROM verdict v
     WHERE id = %(run)s AND v.live
    RETURNING 1)
SELECT (SELECT count(*) FROM missed WHERE counted),
       (SELECT count(*) FROM missed WHERE counted AND consecutive_misses >= %(limit)s),
       (SELECT count(*) FROM reset), (SELECT count(*) FROM store), (SELECT count(*) FROM run),
       v.suspect, v.seen_in_stock, v.in_stock, v.streak, v.confirmed, (SELECT count(*) FROM events),
       (SELECT count(*) FROM moved_on) + (SELECT count(*) FROM oos_opened),
       v.empty, (SELECT type FROM store_event),
       coalesce((SELECT menu_empty_since FROM store_was),
                CASE WHEN v.empty THEN (SELECT started_at FROM crawl_runs WHERE id = %(run)s) END)
  FROM verdict v
"""
CLOSE_INCOMPLETE = """
UPDATE crawl_runs
   SET status = 'incomplete', finished_at = now(),
       duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
       pages_fetched = %(pages)s, products_seen = %(seen_n)s, products_new = %(new)s,
       errors = %(errors)s, error = %(error)s
 WHERE id = %(run)s AND status = 'running'  -- a run already closed (failed: its lease expired) stays so
"""
