-- The market roll rewrites the days the product roll actually wrote (docs/analytics.md, "Market
-- analytics"). It rewrote every day from an hour before the newest snapshot the product roll had
-- rolled when the market roll last ran: a refresh run once a day, after the day's crawls, found
-- that on the day before and rewrote two days (1.6 million product-days at 2,000 stores) for one
-- day of news. Now the product roll keeps the earliest day it wrote (market_from, the earliest
-- over every roll since the market roll last took it); the market roll starts there, or earlier
-- where events were recorded or crawls closed since it last ran for an earlier day
-- (cannaspider/analytics/market.py), and clears it in its own transaction.
--
-- The function is 012's but for market_from.

ALTER TABLE analytics_roll_state ADD COLUMN market_from date;  -- NULL: no day written since the market roll
-- a product roll after the last market roll began (that step failed, or a manual roll): what the
-- market roll would have rewritten next by the old rule, so that nothing rolled before this
-- migration is left out; otherwise the market roll has taken all the product roll wrote
UPDATE analytics_roll_state a
   SET market_from = (SELECT coalesce(((m.rolled_upto - interval '1 hour') AT TIME ZONE 'UTC')::date, '-infinity')
                        FROM market_roll_state m WHERE m.rolled_at < a.rolled_at);

CREATE OR REPLACE FUNCTION analytics_roll_product_daily() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    roll_margin CONSTANT interval := interval '1 hour';
    scan_from   timestamptz;
    upto        timestamptz;
    written     bigint;
    first_written date;  -- the earliest day this roll wrote (NULL: none)
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
    SELECT count(*), min(day), (SELECT max(last_captured_at) FROM counted) INTO written, first_written, upto
      FROM merged;

    INSERT INTO analytics_roll_state (rolled_at, rolled_upto, market_from) VALUES (now(), upto, first_written)
    ON CONFLICT (only_row) DO UPDATE
        SET rolled_at = EXCLUDED.rolled_at,
            rolled_upto = greatest(analytics_roll_state.rolled_upto, EXCLUDED.rolled_upto),
            -- until the market roll takes it, the earliest of every roll's since
            market_from = least(analytics_roll_state.market_from, EXCLUDED.market_from);
    RETURN written;
END $$;
