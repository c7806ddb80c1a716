-- The product roll in parts (docs/analytics.md, "Rolling in parts"). One INSERT … SELECT runs on
-- one core (PostgreSQL does not parallelise a query that writes), and the daily roll of 2,000
-- stores is one such statement: 37–45 s of CPU on one core of two. Now the roll's body is
-- analytics_roll_product_part(scan_from, part, parts): the products whose id is `part` modulo
-- `parts`, each part in its own transaction on its own connection (cannaspider/analytics/
-- refresh.py runs ANALYTICS_ROLL_PARTS of them at once). Every figure of a product comes from
-- that product's own snapshots, so the parts share nothing and their union is the one-part roll.
--
-- A refresh killed between its parts leaves some parts committed, the others not. What keeps it
-- right: each product's rows and where it was left (analytics_product_days.last_captured_at)
-- commit together, and the next roll reads only what is newer per product; the roll's own mark
-- (analytics_roll_state.rolled_upto, where the next roll starts reading) advances only after
-- every part committed (analytics_roll_done), so a part not committed is read again from where
-- it was. A rebuild (no mark) first clears the mark in its own transaction: a rebuild cut short
-- is a rebuild again. Each part lowers market_from (migrations/023_market_from.sql) in its own
-- transaction, so the market roll rewrites what a committed part wrote even if the rest failed.
--
-- analytics_roll_product_daily() stays: one part, in the caller's transaction, as before.

-- Where the roll starts reading: an hour (the roll's margin, see 012) before the newest
-- snapshot rolled; NULL: from the beginning (never rolled, or the tables were emptied).
-- Clears the mark when it says NULL, so that a rebuild cut short is taken up as a rebuild.
CREATE FUNCTION analytics_roll_begin() RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    scan_from timestamptz;
BEGIN
    SELECT rolled_upto - interval '1 hour' INTO scan_from FROM analytics_roll_state;
    IF scan_from IS NOT NULL AND NOT EXISTS (SELECT FROM analytics_product_days) THEN
        scan_from := NULL;
    END IF;
    IF scan_from IS NULL THEN
        UPDATE analytics_roll_state SET rolled_upto = NULL;
    END IF;
    RETURN scan_from;
END $$;

-- Every part committed: the next roll reads from `upto` (the newest snapshot the parts rolled).
CREATE FUNCTION analytics_roll_done(upto timestamptz) RETURNS void LANGUAGE sql AS $$
    INSERT INTO analytics_roll_state (rolled_at, rolled_upto) VALUES (now(), upto)
    ON CONFLICT (only_row) DO UPDATE
        SET rolled_at = EXCLUDED.rolled_at,
            rolled_upto = greatest(analytics_roll_state.rolled_upto, EXCLUDED.rolled_upto)
$$;

-- The roll of 012/023 over the products with store_product_id % parts = part, from scan_from
-- (NULL: this part's rows are deleted and rebuilt from the whole history). Returns the rows it
-- (re)wrote, the earliest day it wrote and its newest snapshot rolled; lowers market_from.
CREATE FUNCTION analytics_roll_product_part(
    scan_from timestamptz, part integer, parts integer,
    OUT written bigint, OUT first_written date, OUT upto timestamptz
) LANGUAGE plpgsql AS $$
BEGIN
    IF parts < 1 OR part < 0 OR part >= parts THEN
        RAISE EXCEPTION 'part % of % parts: want 0 <= part < parts', part, parts;
    END IF;
    -- before any read: a one-part roll (SHARE ROW EXCLUSIVE) or the market roll (SHARE) waits for
    -- this part to commit, and this part's reads come after theirs committed
    LOCK TABLE analytics_product_daily IN ROW EXCLUSIVE MODE;
    IF scan_from IS NULL THEN
        scan_from := '-infinity';
        DELETE FROM analytics_product_daily WHERE store_product_id % parts = part;
        DELETE FROM analytics_product_days WHERE store_product_id % parts = part;
    END IF;

    WITH s AS (
        -- the snapshots of this part's products not rolled yet, each with where its product was left
        SELECT h.store_product_id, h.captured_at, h.price_rec, h.is_on_special,
               (h.captured_at AT TIME ZONE 'UTC')::date AS day,
               d.price_close AS seed_price, d.special_close AS seed_special
          FROM snapshot_history h
          LEFT JOIN analytics_product_days d ON d.store_product_id = h.store_product_id
         WHERE h.captured_at >= scan_from
           AND h.store_product_id % parts = part
           AND (d.last_captured_at IS NULL OR h.captured_at > d.last_captured_at)),
    -- one sort, by product then time (ordered by day first so that grouping by day reuses it);
    -- the day's first and last rows are told by lag/lead of the day
    w AS (
        SELECT s.*,
               lag(price_rec) OVER w      AS prev_price,
               lag(is_on_special) OVER w  AS prev_special,
               lag(day) OVER w            AS prev_day,
               lead(day) OVER w           AS next_day,
               row_number() OVER w        AS rn
          FROM s
        WINDOW w AS (PARTITION BY store_product_id ORDER BY day, captured_at)),
    steps AS (
        SELECT store_product_id, day, captured_at, price_rec, is_on_special, prev_day, next_day,
               CASE WHEN rn = 1 THEN seed_price ELSE prev_price END     AS prev_price,
               CASE WHEN rn = 1 THEN seed_special ELSE prev_special END AS prev_special
          FROM w),
    -- each (product, day) of the new snapshots; a day the last roll already began is merged below
    -- (its first snapshot was rolled then: the first of these is not the day's open)
    daily AS (
        SELECT store_product_id, day,
               count(*)                                                        AS snapshots,
               min(price_rec) FILTER (WHERE prev_day IS DISTINCT FROM day)     AS price_open,
               min(price_rec) FILTER (WHERE next_day IS DISTINCT FROM day)     AS price_close,
               min(price_rec)                                                  AS price_min,
               max(price_rec)                                                  AS price_max,
               count(*) FILTER (WHERE price_rec > prev_price)                  AS price_ups,
               count(*) FILTER (WHERE price_rec < prev_price)                  AS price_downs,
               count(*) FILTER (WHERE is_on_special AND NOT prev_special)      AS specials_started,
               count(*) FILTER (WHERE prev_special AND NOT is_on_special)      AS specials_ended,
               bool_or(is_on_special) FILTER (WHERE next_day IS DISTINCT FROM day) AS special_close,
               max(captured_at)                                                AS last_captured_at
          FROM steps
         GROUP BY store_product_id, day),
    merged AS (
        INSERT INTO analytics_product_daily AS t
        SELECT d.store_product_id, d.day, p.dispensary_id, p.provider_product_id, d.snapshots, d.price_open,
               d.price_close, d.price_min, d.price_max, d.price_ups, d.price_downs, d.specials_started,
               d.specials_ended, d.special_close
          FROM daily d
          JOIN store_products p ON p.id = d.store_product_id
        ON CONFLICT (store_product_id, day) DO UPDATE SET
            snapshots        = t.snapshots + EXCLUDED.snapshots,
            price_close      = EXCLUDED.price_close,
            price_min        = least(t.price_min, EXCLUDED.price_min),
            price_max        = greatest(t.price_max, EXCLUDED.price_max),
            price_ups        = t.price_ups + EXCLUDED.price_ups,
            price_downs      = t.price_downs + EXCLUDED.price_downs,
            specials_started = t.specials_started + EXCLUDED.specials_started,
            specials_ended   = t.specials_ended + EXCLUDED.specials_ended,
            special_close    = EXCLUDED.special_close
        RETURNING store_product_id, dispensary_id, provider_product_id, day, xmax = 0 AS inserted),
    -- where each product is left: its last new snapshot (the close of its last new day)
    left_at AS (
        SELECT DISTINCT ON (store_product_id) store_product_id, last_captured_at, price_close, special_close
          FROM daily
         ORDER BY store_product_id, day DESC),
    counted AS (
        INSERT INTO analytics_product_days AS t
        SELECT m.store_product_id, m.dispensary_id, m.provider_product_id, count(*) FILTER (WHERE m.inserted),
               min(m.day), max(m.day), l.last_captured_at, l.price_close, l.special_close
          FROM merged m
          JOIN left_at l USING (store_product_id)
         GROUP BY m.store_product_id, m.dispensary_id, m.provider_product_id, l.last_captured_at, l.price_close,
                  l.special_close
        ON CONFLICT (store_product_id) DO UPDATE SET
            days_in_stock    = t.days_in_stock + EXCLUDED.days_in_stock,
            first_day        = least(t.first_day, EXCLUDED.first_day),
            last_day         = greatest(t.last_day, EXCLUDED.last_day),
            last_captured_at = EXCLUDED.last_captured_at,
            price_close      = EXCLUDED.price_close,
            special_close    = EXCLUDED.special_close
        RETURNING t.last_captured_at)
    SELECT count(*), min(day), (SELECT max(last_captured_at) FROM counted) INTO written, first_written, upto
      FROM merged;

    IF first_written IS NOT NULL THEN
        -- with this part's rows (the market roll must rewrite them even if another part fails);
        -- a first roll has no row yet: its mark stays NULL until analytics_roll_done
        INSERT INTO analytics_roll_state (rolled_at, market_from) VALUES (now(), first_written)
        ON CONFLICT (only_row) DO UPDATE
            SET market_from = least(analytics_roll_state.market_from, EXCLUDED.market_from);
    END IF;
END $$;

-- The whole roll as one part, in the caller's transaction (a manual call, a one-part refresh).
CREATE OR REPLACE FUNCTION analytics_roll_product_daily() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    rolled record;
BEGIN
    -- one roll at a time (the analytics refresh holds its own lock; this guards a manual call)
    LOCK TABLE analytics_product_daily IN SHARE ROW EXCLUSIVE MODE;
    SELECT * INTO rolled FROM analytics_roll_product_part(analytics_roll_begin(), 0, 1);
    PERFORM analytics_roll_done(rolled.upto);
    RETURN rolled.written;
END $$;
