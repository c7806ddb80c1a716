-- The analytics roll reads each snapshot once (docs/analytics.md, "analytics_product_daily").
-- 010's roll rewrote the last day it had written and every day after: a refresh late in the day
-- read that whole day again, up to two days of snapshots (9.3 million rows at 2,000 stores) for
-- one day of news. Now each product carries where the roll left it (analytics_product_days:
-- its last snapshot rolled, and that snapshot's price and special), and a roll reads only the
-- snapshots after it, merging them into the day rows they belong to.
--
-- A product's snapshots come from its store's crawls, one after the other, so they reach the
-- table in time order; a write transaction stamps its rows with its start time (now()), so rows
-- can commit a little after later-stamped rows of other products. The roll therefore looks back
-- ROLL_MARGIN before the newest snapshot it rolled last time and keeps, per product, only what
-- is newer than that product's own last rolled snapshot: nothing is counted twice, and a write
-- that commits up to an hour late is still counted.
--
-- The rolled tables are derived data: this migration empties them and the next analytics
-- refresh rebuilds them from the whole history (as a first refresh does).

TRUNCATE analytics_product_daily, analytics_product_days, analytics_roll_state;

ALTER TABLE analytics_product_days
    ADD COLUMN last_captured_at timestamptz NOT NULL,  -- the product's last snapshot rolled
    ADD COLUMN price_close      numeric(12, 2),        -- its price, and
    ADD COLUMN special_close    boolean;               -- its special: the next roll compares with them
-- every roll updates a row per product it saw: room on the page makes those updates HOT (no new
-- index entry)
ALTER TABLE analytics_product_days SET (fillfactor = 70);

ALTER TABLE analytics_roll_state ADD COLUMN rolled_upto timestamptz;  -- the newest snapshot rolled

CREATE OR REPLACE FUNCTION analytics_roll_product_daily() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    roll_margin CONSTANT interval := interval '1 hour';
    scan_from   timestamptz;
    upto        timestamptz;
    written     bigint;
BEGIN
    -- one roll at a time (the analytics refresh holds its own lock; this guards a manual call)
    LOCK TABLE analytics_product_daily IN SHARE ROW EXCLUSIVE MODE;
    SELECT rolled_upto - roll_margin INTO scan_from FROM analytics_roll_state;
    IF scan_from IS NULL OR NOT EXISTS (SELECT FROM analytics_product_days) THEN
        -- the first roll (or the tables were emptied): from the beginning
        scan_from := '-infinity';
        DELETE FROM analytics_product_daily;
        DELETE FROM analytics_product_days;
    END IF;

    WITH s AS (
        -- the snapshots not rolled yet, each with where its product was left
        SELECT h.store_product_id, h.captured_at, h.price_rec, h.is_on_special,
               (h.captured_at AT TIME ZONE 'UTC')::date AS day,
               d.price_close AS seed_price, d.special_close AS seed_special
          FROM snapshot_history h
          LEFT JOIN analytics_product_days d ON d.store_product_id = h.store_product_id
         WHERE h.captured_at >= scan_from
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
    SELECT (SELECT count(*) FROM merged), (SELECT max(last_captured_at) FROM counted) INTO written, upto;

    INSERT INTO analytics_roll_state (rolled_at, rolled_upto) VALUES (now(), upto)
    ON CONFLICT (only_row) DO UPDATE
        SET rolled_at = EXCLUDED.rolled_at,
            rolled_upto = greatest(analytics_roll_state.rolled_upto, EXCLUDED.rolled_upto);
    RETURN written;
END $$;
