-- Analytics (docs/analytics.md): the views an analyst asks for first, refreshed by the
-- analytics_refresh spider so that readers never wait: materialized views refreshed CONCURRENTLY
-- (each has the unique index on plain columns that requires), and analytics_product_daily with
-- analytics_product_days, tables rolled forward day by day. Days are UTC calendar days.

-- What the snapshots say, one row per product per crawl, with the product's identity and the
-- values decoded: the views read snapshots through it, so the snapshot table's layout can change
-- (011_lean_snapshots.sql) without touching them.
CREATE VIEW snapshot_history AS
SELECT sp.id                AS store_product_id,
       s.dispensary_id,
       s.provider_product_id,
       s.crawl_run_id,
       s.captured_at,
       s.price_rec,
       s.price_med,
       s.price_rec_special,
       s.price_med_special,
       s.is_on_special,
       s.specials,
       s.is_in_stock,
       s.stock_status,
       s.quantity_available,
       s.thc_value,
       s.thc_unit,
       s.cbd_value,
       s.cbd_unit
  FROM store_product_snapshots s
  JOIN store_products sp
    ON sp.dispensary_id = s.dispensary_id AND sp.provider = 'dutchie'
   AND sp.provider_product_id = s.provider_product_id;

-- Price and stock per brand × category × state, over the products' current rows. Prices are the
-- recreational price of the products in stock; '' stands for a brand or category the menu left out.
CREATE MATERIALIZED VIEW analytics_brand_category_state AS
SELECT coalesce(d.state, '')            AS state,
       coalesce(p.brand_name_raw, '')   AS brand,
       coalesce(p.category, '')         AS category,
       count(*)                         AS products,
       count(*) FILTER (WHERE p.stock_status = 'in_stock') AS products_in_stock,
       count(DISTINCT p.dispensary_id)  AS stores,
       min(p.price_rec) FILTER (WHERE p.stock_status = 'in_stock') AS price_min,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY p.price_rec)
            FILTER (WHERE p.stock_status = 'in_stock'))::numeric(12, 2) AS price_median,
       max(p.price_rec) FILTER (WHERE p.stock_status = 'in_stock') AS price_max
  FROM store_products p
  JOIN dispensaries d ON d.id = p.dispensary_id
 GROUP BY 1, 2, 3
WITH DATA;
CREATE UNIQUE INDEX analytics_brand_category_state_key
    ON analytics_brand_category_state (state, brand, category);

-- One row per product per day it was seen: its recreational price at the day's first and last
-- snapshot, and how it moved between consecutive snapshots (the first snapshot of a day compares
-- with the last one before it, so a change overnight counts on the day it was seen).
-- Not a materialized view: recomputing it reads the whole snapshot history (the biggest table by
-- far), so it is rolled forward instead. analytics_roll_product_daily() recomputes only the days
-- from the one the last roll reached to now (that day was partial; the day starts 10 minutes
-- before the last roll, so rows of a write that committed just after it are not missed), seeding
-- each product's first comparison with its last close before them; the rest of the table stands. One transaction:
-- readers see the old rows until it commits, and never wait.
CREATE TABLE analytics_product_daily (
    store_product_id     bigint        NOT NULL,
    day                  date          NOT NULL,
    dispensary_id        bigint        NOT NULL,
    provider_product_id  text          NOT NULL,
    snapshots            integer       NOT NULL,
    price_open           numeric(12, 2),
    price_close          numeric(12, 2),
    price_min            numeric(12, 2),
    price_max            numeric(12, 2),
    price_ups            integer       NOT NULL,
    price_downs          integer       NOT NULL,
    specials_started     integer       NOT NULL,
    specials_ended       integer       NOT NULL,
    special_close        boolean,      -- on special at the day's last snapshot (seeds the next day)
    PRIMARY KEY (store_product_id, day)
);
CREATE INDEX analytics_product_daily_day_idx ON analytics_product_daily (day);

-- Days in stock per product, kept by the same roll: the days a crawl saw it (in a store's feed
-- means in stock), its first and last such day. Read it through analytics_product_days_in_stock.
CREATE TABLE analytics_product_days (
    store_product_id     bigint  PRIMARY KEY,
    dispensary_id        bigint  NOT NULL,
    provider_product_id  text    NOT NULL,
    days_in_stock        integer NOT NULL,
    first_day            date    NOT NULL,
    last_day             date    NOT NULL
);

-- When the last roll ran (one row)
CREATE TABLE analytics_roll_state (
    only_row   boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    rolled_at  timestamptz NOT NULL
);

CREATE FUNCTION analytics_roll_product_daily() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    from_day date;
    written  bigint;
BEGIN
    -- one roll at a time (the analytics refresh holds its own lock; this guards a manual call)
    LOCK TABLE analytics_product_daily IN SHARE ROW EXCLUSIVE MODE;
    -- the last day written, or the day the last roll reached, whichever is earlier (a snapshot
    -- captured before the last roll can only belong to a day from then on)
    -- (nothing written yet: from the beginning)
    SELECT CASE WHEN max(day) IS NOT NULL THEN
               least(max(day), (SELECT ((rolled_at - interval '10 minutes') AT TIME ZONE 'UTC')::date
                                  FROM analytics_roll_state)) END
      INTO from_day FROM analytics_product_daily;
    INSERT INTO analytics_roll_state (rolled_at) VALUES (now())
    ON CONFLICT (only_row) DO UPDATE SET rolled_at = EXCLUDED.rolled_at;
    IF from_day IS NULL THEN
        DELETE FROM analytics_product_days;
    END IF;
    -- the days rewritten leave the products' day counts, and come back below
    WITH gone AS (
        DELETE FROM analytics_product_daily WHERE day >= coalesce(from_day, '-infinity') RETURNING store_product_id),
    n AS (SELECT store_product_id, count(*) AS days FROM gone GROUP BY 1)
    UPDATE analytics_product_days t SET days_in_stock = t.days_in_stock - n.days
      FROM n WHERE t.store_product_id = n.store_product_id;
    INSERT INTO analytics_product_daily
    WITH s AS (
        SELECT store_product_id, captured_at, price_rec, is_on_special,
               (captured_at AT TIME ZONE 'UTC')::date AS day
          FROM snapshot_history
         WHERE captured_at >= coalesce(from_day::timestamp AT TIME ZONE 'UTC', '-infinity')),
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
        SELECT w.store_product_id, w.day, w.price_rec, w.is_on_special, w.prev_day, w.next_day,
               CASE WHEN w.rn = 1 THEN seed.price_close ELSE w.prev_price END     AS prev_price,
               CASE WHEN w.rn = 1 THEN seed.special_close ELSE w.prev_special END AS prev_special
          FROM w
          LEFT JOIN LATERAL (
                SELECT r.price_close, r.special_close FROM analytics_product_daily r
                 WHERE w.rn = 1 AND r.store_product_id = w.store_product_id AND r.day < from_day
                 ORDER BY r.day DESC LIMIT 1) seed ON true),
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
               bool_or(is_on_special) FILTER (WHERE next_day IS DISTINCT FROM day) AS special_close
          FROM steps
         GROUP BY store_product_id, day)
    SELECT d.store_product_id, d.day, p.dispensary_id, p.provider_product_id, d.snapshots, d.price_open,
           d.price_close, d.price_min, d.price_max, d.price_ups, d.price_downs, d.specials_started,
           d.specials_ended, d.special_close
      FROM daily d
      JOIN store_products p ON p.id = d.store_product_id;
    GET DIAGNOSTICS written = ROW_COUNT;
    INSERT INTO analytics_product_days AS t
    SELECT store_product_id, dispensary_id, provider_product_id, count(*), min(day), max(day)
      FROM analytics_product_daily
     WHERE day >= coalesce(from_day, '-infinity')
     GROUP BY store_product_id, dispensary_id, provider_product_id
    ON CONFLICT (store_product_id) DO UPDATE SET
        days_in_stock = t.days_in_stock + EXCLUDED.days_in_stock,
        first_day = least(t.first_day, EXCLUDED.first_day),
        last_day = greatest(t.last_day, EXCLUDED.last_day);
    RETURN written;
END $$;

-- A store's deletion deletes its products; their daily rows go with them.
CREATE FUNCTION analytics_forget_products() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM analytics_product_daily a USING forgotten_products f WHERE a.store_product_id = f.id;
    DELETE FROM analytics_product_days a USING forgotten_products f WHERE a.store_product_id = f.id;
    RETURN NULL;
END $$;
CREATE TRIGGER store_products_forget_analytics AFTER DELETE ON store_products
    REFERENCING OLD TABLE AS forgotten_products FOR EACH STATEMENT EXECUTE FUNCTION analytics_forget_products();

-- One row per store per day with a complete crawl, from the crawls' own counts: products in the
-- store's feed (in stock) at its last complete crawl of the day, and the products that went out
-- of stock that day (a product reaching its third consecutive miss: crawl_runs.products_marked_oos).
CREATE MATERIALIZED VIEW analytics_store_daily AS
SELECT dispensary_id,
       (started_at AT TIME ZONE 'UTC')::date                              AS day,
       count(*)                                                           AS crawls,
       (array_agg(products_seen ORDER BY started_at DESC))[1]             AS products_in_stock,
       max(products_seen)                                                 AS products_in_stock_max,
       min(products_seen)                                                 AS products_in_stock_min,
       sum(products_new)::integer                                         AS products_new,
       sum(products_missed)::integer                                      AS products_missed,
       sum(products_marked_oos)::integer                                  AS oos_events,
       count(*) FILTER (WHERE suspect)                                    AS suspect_crawls
  FROM crawl_runs
 WHERE status = 'complete' AND dispensary_id IS NOT NULL
 GROUP BY 1, 2
WITH DATA;
CREATE UNIQUE INDEX analytics_store_daily_key ON analytics_store_daily (dispensary_id, day);

-- Days in stock per product, with its current stock status (analytics_product_days, rolled with
-- analytics_product_daily: a materialized view of it would re-aggregate every day ever rolled).
CREATE VIEW analytics_product_days_in_stock AS
SELECT d.store_product_id,
       d.dispensary_id,
       d.provider_product_id,
       d.days_in_stock,
       d.first_day,
       d.last_day,
       d.last_day - d.first_day + 1 AS days_tracked,
       p.stock_status               AS stock_status_now
  FROM analytics_product_days d
  JOIN store_products p ON p.id = d.store_product_id;

-- How long each refresh took (the analytics_refresh spider writes one row per view per run).
-- method: 'concurrently' (REFRESH … CONCURRENTLY), 'plain' (the first refresh of an empty view),
-- 'incremental' (analytics_product_daily rolled forward; row_count = the rows it rewrote)
CREATE TABLE analytics_refreshes (
    id            bigserial   PRIMARY KEY,
    view_name     text        NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    duration_ms   integer     NOT NULL,
    row_count     bigint,
    method        text        NOT NULL CHECK (method IN ('concurrently', 'plain', 'incremental'))
);
CREATE INDEX analytics_refreshes_view_idx ON analytics_refreshes (view_name, started_at DESC);
