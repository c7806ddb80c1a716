-- Empty menus in the market "now" (issue #28, 1 and 16; docs/analytics.md, "Market analytics").
-- 025_empty_menus.sql keeps an empty menu's products as they were (an empty answer is a broken
-- query, an API change or a menu gone dark, never a sell-out) and leaves a store out of the daily
-- rolls' denominator on a day all of whose crawls were empty. But the views of the market *now*
-- read store_products' current stock: a store whose menu is empty (dispensaries.menu_empty_since
-- set) still counted, with every product it had before its menu went dark, as a store carrying
-- them (market_brands_now: GET /api/brands; analytics_brand_category_state). While the state
-- lasts the store says nothing about what it carries or not: it is left out of both until its
-- menu returns (the next refresh after it counts the store again).
DROP MATERIALIZED VIEW market_brands_now;
CREATE MATERIALIZED VIEW market_brands_now AS
SELECT sp.canonical_brand_id AS brand_id, coalesce(d.state, '') AS state,  -- NULL: all states
       count(DISTINCT sp.dispensary_id)::integer AS stores,
       count(DISTINCT sp.canonical_product_id)::integer AS products,
       count(*)::integer AS store_products,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.price_rec))::float8 AS median_price
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
 WHERE sp.stock_status = 'in_stock' AND sp.canonical_brand_id IS NOT NULL AND d.menu_empty_since IS NULL
 GROUP BY GROUPING SETS ((sp.canonical_brand_id, coalesce(d.state, '')), (sp.canonical_brand_id))
WITH DATA;
CREATE UNIQUE INDEX market_brands_now_key ON market_brands_now (brand_id, state) NULLS NOT DISTINCT;
CREATE INDEX market_brands_now_rank ON market_brands_now (state, stores DESC);

DROP MATERIALIZED VIEW analytics_brand_category_state;
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
 WHERE d.menu_empty_since IS NULL
 GROUP BY 1, 2, 3
WITH DATA;
CREATE UNIQUE INDEX analytics_brand_category_state_key
    ON analytics_brand_category_state (state, brand, category);

-- Implausible price moves (issue #28, 16; cannaspider/analytics/plausible.py): a $30 → $0.01 or a
-- ×1000 jump is a wrong price, not a drop or a rise. The market roll counts such price_changed
-- events here instead of among price_drops / price_rises, and never ranks them as movers
-- (price_changed still counts every price_changed event of the day).
ALTER TABLE market_state_daily ADD COLUMN price_changes_implausible integer NOT NULL DEFAULT 0;
-- derived data: the next refresh rebuilds every day by the new rules (market.py, "everything")
DELETE FROM market_roll_state;
