-- Market analytics (docs/analytics.md, "Market analytics"): per state and UTC day, which share of
-- the state's crawled stores carried each canonical brand, what a gram cost per category, what
-- the day's events were and the largest price moves. Rolled forward by the analytics refresh
-- (cannaspider/analytics/market.py, after analytics_product_daily and analytics_store_daily,
-- which it reads): the days from the last one it wrote are rewritten, the rest stand. Built from
-- rolled tables (one row per product per day, not per snapshot) and the events of those days,
-- so a refresh reads each snapshot once (in the product roll) and each event about once.
-- Derived data: emptying the tables makes the next refresh rebuild them from the whole history.

-- the state's day: stores with a complete crawl (the availability's denominator), and its events
CREATE TABLE market_state_daily (
    state             text    NOT NULL,  -- '' when the store's state is unknown
    day               date    NOT NULL,
    stores_crawled    integer NOT NULL,  -- stores with at least one complete crawl that day
    products_seen     integer NOT NULL,  -- store products in the feed of those stores' crawls
    listed            integer NOT NULL,  -- product_events of that day, by type
    price_changed     integer NOT NULL,
    price_drops       integer NOT NULL,  -- of them, price_rec went down / up
    price_rises       integer NOT NULL,
    specials_started  integer NOT NULL,
    specials_ended    integer NOT NULL,
    out_of_stock      integer NOT NULL,
    back_in_stock     integer NOT NULL,
    PRIMARY KEY (state, day)
);

-- availability: a brand is carried by a store on a day when one of the store's products of that
-- brand was in the feed of one of its complete crawls that day; stores / stores_crawled
CREATE TABLE market_brand_daily (
    state               text    NOT NULL,
    day                 date    NOT NULL,
    canonical_brand_id  bigint  NOT NULL,
    stores              integer NOT NULL,  -- stores carrying it
    stores_crawled      integer NOT NULL,  -- market_state_daily.stores_crawled (denormalized)
    products            integer NOT NULL,  -- its canonical products seen
    store_products      integer NOT NULL,
    median_price        numeric(12, 2),    -- over its store products' closing price_rec that day
    PRIMARY KEY (state, day, canonical_brand_id)
);

-- price per gram and specials per category, for the state (city '') and each of its cities
CREATE TABLE market_category_daily (
    state               text    NOT NULL,
    city                text    NOT NULL,  -- '' for the whole state
    day                 date    NOT NULL,
    category            text    NOT NULL,  -- '' when the menu gives none
    stores              integer NOT NULL,
    products            integer NOT NULL,  -- store products seen
    on_special          integer NOT NULL,  -- of them, on special at the day's last snapshot
    price_per_g_p25     numeric(16, 4),    -- over the weighed ones (unit_price_basis 'g')
    price_per_g_median  numeric(16, 4),
    price_per_g_p75     numeric(16, 4),
    PRIMARY KEY (state, day, category, city)
);

-- the day's largest price moves per state: kind 'drop' or 'rise', rank 1 = largest (by percent)
CREATE TABLE market_movers (
    state             text          NOT NULL,
    day               date          NOT NULL,
    kind              text          NOT NULL CHECK (kind IN ('drop', 'rise')),
    rank              integer       NOT NULL,
    event_id          bigint        NOT NULL,  -- product_events.id: the move's evidence
    crawl_run_id      bigint        NOT NULL,
    dispensary_id     bigint        NOT NULL,
    store_product_id  bigint        NOT NULL,
    price_old         numeric(12, 2) NOT NULL,
    price_new         numeric(12, 2) NOT NULL,
    change_pct        numeric        NOT NULL,  -- (new - old) / old × 100, rounded to 0.01
    PRIMARY KEY (state, day, kind, rank)
);

-- how far the product roll had got when the market roll last ran (analytics_roll_state.rolled_upto,
-- the newest snapshot rolled): the product roll since then can only have touched the days from an
-- hour before it (its own margin), so the next market roll rewrites those days and after
CREATE TABLE market_roll_state (
    only_row     boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    rolled_upto  timestamptz,              -- NULL: nothing was rolled yet
    rolled_at    timestamptz NOT NULL      -- when (for an operator)
);

-- Canonical brands now, per state and over all states (state NULL): what GET /api/brands lists.
-- Computed over every store product in stock at each refresh (refreshed CONCURRENTLY, like
-- analytics_brand_category_state): computing it per request sorted the whole store_products
-- table three times (2.6 s at 200 stores × 400 products under load; the target is 50 ms at 2,000).
CREATE MATERIALIZED VIEW market_brands_now AS
SELECT sp.canonical_brand_id AS brand_id, coalesce(d.state, '') AS state,  -- NULL: all states
       count(DISTINCT sp.dispensary_id)::integer AS stores,
       count(DISTINCT sp.canonical_product_id)::integer AS products,
       count(*)::integer AS store_products,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec))::float8 AS median_price
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.stock_status = 'in_stock' AND sp.canonical_brand_id IS NOT NULL
 GROUP BY GROUPING SETS ((sp.canonical_brand_id, coalesce(d.state, '')), (sp.canonical_brand_id))
WITH DATA;
-- CONCURRENTLY needs a unique index on plain columns: '' for "all states" would collide with an
-- unknown state, so the all-states rows keep state NULL and the index treats NULLs as equal
CREATE UNIQUE INDEX market_brands_now_key ON market_brands_now (brand_id, state) NULLS NOT DISTINCT;
CREATE INDEX market_brands_now_rank ON market_brands_now (state, stores DESC);
