-- Empty menus (README "Crawl correctness", issue #28): a complete crawl whose menu is well formed
-- but empty (`products: []`, `totalCount: 0`) is the shape of a broken query (the seed's
-- `Status: null`), of an API change or of a store whose online menu went dark, never of a store
-- that sold everything at once, and an API change empties every store at the same crawl. So such
-- a crawl counts no product misses (cannaspider/db/store_close.py, CLOSE_COMPLETE):
--   * crawl_runs.empty: the crawl was complete and saw no product (status stays 'complete'; an
--     incomplete crawl is never empty). It counts no miss, leaves stock, suspect_misses and the
--     OOS guard's streak as they were (the streak skips empty runs), and writes no product event;
--   * dispensaries.menu_empty_since: the start of the first empty crawl of the store's current
--     run of them; NULL again at the first complete crawl that sees a product, which marks nothing
--     by itself (the products it misses are judged as by any crawl: the guard, the streak);
--   * store_events: one row when a store's menu empties ('menu_emptied', with the products left in
--     stock as they were) and one when it returns ('menu_returned', with the products it saw).
-- The market roll leaves a store out of availability's denominator on a day all of whose complete
-- crawls were empty (analytics_store_daily.empty_crawls = crawls).
ALTER TABLE crawl_runs ADD COLUMN empty boolean NOT NULL DEFAULT false;
ALTER TABLE dispensaries ADD COLUMN menu_empty_since timestamptz;
-- the complete crawls that saw nothing before this migration were empty menus too
UPDATE crawl_runs SET empty = true WHERE status = 'complete' AND products_seen = 0;

CREATE TABLE store_events (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at    timestamptz NOT NULL,  -- the start of the crawl that saw it (crawl_runs.started_at)
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    crawl_run_id   bigint      NOT NULL,
    dispensary_id  bigint      NOT NULL REFERENCES dispensaries (id) ON DELETE CASCADE,
    type           text        NOT NULL CHECK (type IN ('menu_emptied', 'menu_returned')),
    -- menu_emptied: the store's products in stock, whose stock is left as it was; menu_returned:
    -- the products in the menu that returned
    products       integer     NOT NULL,
    CONSTRAINT store_events_once UNIQUE (crawl_run_id, type)  -- a close run twice writes it once
);
CREATE INDEX store_events_store_idx ON store_events (dispensary_id, id);

-- analytics_store_daily (010) with its day's empty crawls
DROP MATERIALIZED VIEW analytics_store_daily;
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
       count(*) FILTER (WHERE suspect)                                    AS suspect_crawls,
       count(*) FILTER (WHERE empty)                                      AS empty_crawls
  FROM crawl_runs
 WHERE status = 'complete' AND dispensary_id IS NOT NULL
 GROUP BY 1, 2
WITH DATA;
CREATE UNIQUE INDEX analytics_store_daily_key ON analytics_store_daily (dispensary_id, day);
