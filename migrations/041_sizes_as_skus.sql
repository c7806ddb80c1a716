-- Each size its own SKU (issue 32, 1; docs/analytics.md, "Sizes as SKUs"). Every option of a
-- store product carries its own unit price (store_products.options[].unit_price, _special, _basis:
-- cannaspider/identity.py, unit_prices), and the market roll (cannaspider/analytics/market.py)
-- prices every weighed option, not only the cheapest:
--
-- 1. market_category_daily's price per gram is over every weighed SKU (option) of the category,
--    equivalized to the gram (a 3.5 g at $35 and a 28 g at $200 are $10 and $7.14 a gram), with
--    its mean beside the quartiles and the count of SKUs priced;
-- 2. market_size_daily: per state, day, category and size in grams, the stores selling that size,
--    the SKUs, and the size's price: mean, quartiles and median, and its median per gram.
ALTER TABLE market_category_daily
    ADD COLUMN skus_weighed     integer NOT NULL DEFAULT 0,  -- weighed options priced (price_per_g_*'s rows)
    ADD COLUMN price_per_g_mean numeric(16, 4);

CREATE TABLE market_size_daily (
    state               text          NOT NULL,  -- '' when the store's state is unknown
    day                 date          NOT NULL,
    category            text          NOT NULL,  -- '' when the menu gives none
    grams               numeric(10, 3) NOT NULL, -- the option's size (an eighth: 3.5)
    stores              integer       NOT NULL,  -- stores selling the size that day
    skus                integer       NOT NULL,  -- store products' options of that size seen that day
    price_mean          numeric(12, 2) NOT NULL,
    price_p25           numeric(12, 2) NOT NULL,
    price_median        numeric(12, 2) NOT NULL,
    price_p75           numeric(12, 2) NOT NULL,
    price_per_g_median  numeric(16, 4) NOT NULL,
    stores_by_platform  jsonb         NOT NULL DEFAULT '{}',  -- its stores per platform (migration 034)
    PRIMARY KEY (state, day, category, grams)
);

-- 3. A canonical product across stores per day (GET /api/products/{id}/history), rolled with the
--    market tables over the same days: the stores whose complete crawl listed it, and per size (a
--    weighed option by its grams, '3.5g', any other by its name, 'N/A') the stores listing that size
--    and its lowest, median and highest price that day, with the median unit price. Keyed by the
--    product: a product's days are one index range, whatever the stores that sell it.
CREATE TABLE product_listed_daily (
    canonical_product_id  bigint  NOT NULL,
    day                   date    NOT NULL,
    stores                integer NOT NULL,  -- stores whose complete crawl that day listed it
    store_products        integer NOT NULL,  -- their listings (analytics_product_daily rows)
    snapshots             integer NOT NULL,  -- the snapshots behind those rows
    PRIMARY KEY (canonical_product_id, day)
);
CREATE TABLE product_size_daily (
    canonical_product_id  bigint         NOT NULL,
    day                   date           NOT NULL,
    size                  text           NOT NULL,
    grams                 numeric(10, 3),            -- NULL: not weighed
    stores                integer        NOT NULL,
    price_min             numeric(12, 2) NOT NULL,
    price_median          numeric(12, 2) NOT NULL,
    price_max             numeric(12, 2) NOT NULL,
    unit_price_median     numeric(16, 4),
    unit_price_basis      text,                      -- NULL when its stores price it on different bases
    PRIMARY KEY (canonical_product_id, day, size)
);

-- the rolled days are rebuilt at the next refresh, with every size priced
DELETE FROM market_roll_state;
