-- A brand's own figures without reading its store products per request (issue 32; docs/analytics.md,
-- "Finding a brand"). GET /api/brands/{id} and the brand's dashboard page grouped the brand's store
-- products per request, twice (by state, by category): 13,000 rows for a large brand at 2,000
-- stores, each on its own heap page of a 525 MB table (a brand's products are spread over every
-- store), 30 ms warm and 230 ms cold per read. A covering index would not help: every crawl
-- rewrites its products' rows (last_seen_at), so the visibility map is mostly clear and an
-- index-only scan still visits the heap.
--
-- 1. market_brands_now (GET /api/brands: per brand and state, state NULL for all states) gains what
--    GET /api/brands/{id} shows per state beside its figures: the stores per platform and the median
--    price per gram over weighed products. Same rows and the same four figures as before
--    (migrations/031_empty_menus_now.sql): only the brand's in-stock store products in stores whose
--    menu is not empty. Computed from one read of the shelf kept in memory (the refresh runs with
--    ANALYTICS_REFRESH_WORK_MEM): the distinct stores and products are counted by hashing them
--    first, not by `count(DISTINCT …)`, which sorts every group; the states are grouped in the "C"
--    collation (two ASCII letters: the same groups, compared bytewise). Measured on the benchmark
--    database (800,000 store products, benchmarks/analyst.py): 2.1–2.4 s of backend CPU a
--    refresh against 1.6–1.8 s for the view it replaces.
DROP MATERIALIZED VIEW market_brands_now;
CREATE MATERIALIZED VIEW market_brands_now AS
WITH carried AS MATERIALIZED (
    SELECT sp.canonical_brand_id AS brand_id, coalesce(d.state, '') COLLATE "C" AS state, d.platform,
           sp.dispensary_id, sp.canonical_product_id, sp.price_rec, sp.unit_price, sp.unit_price_basis
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.stock_status = 'in_stock' AND sp.canonical_brand_id IS NOT NULL AND d.menu_empty_since IS NULL),
figures AS (
    SELECT brand_id, state, count(*)::integer AS store_products,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec))::float8 AS median_price,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price) FILTER (WHERE unit_price_basis = 'g'))::float8
               AS median_price_per_g
      FROM carried GROUP BY GROUPING SETS ((brand_id, state), (brand_id))),
-- a store has one state and one platform: its row per brand counts it once in each grouping
per_store AS (SELECT brand_id, state, platform, dispensary_id FROM carried GROUP BY 1, 2, 3, 4),
platforms AS (
    SELECT brand_id, state, platform, count(*) AS stores
      FROM per_store GROUP BY GROUPING SETS ((brand_id, state, platform), (brand_id, platform))),
stores AS (
    SELECT brand_id, state, sum(stores)::integer AS stores, jsonb_object_agg(platform, stores) AS stores_by_platform
      FROM platforms GROUP BY brand_id, state),
per_product AS (  -- count(DISTINCT) leaves out NULL: a store product not linked to a canonical one
    SELECT brand_id, state, canonical_product_id FROM carried WHERE canonical_product_id IS NOT NULL
     GROUP BY GROUPING SETS ((brand_id, state, canonical_product_id), (brand_id, canonical_product_id))),
products AS (SELECT brand_id, state, count(*)::integer AS products FROM per_product GROUP BY brand_id, state)
SELECT f.brand_id, f.state::text COLLATE "default" AS state,  -- NULL: all states
       s.stores, coalesce(p.products, 0) AS products, f.store_products, f.median_price,
       s.stores_by_platform, f.median_price_per_g
  FROM figures f
  JOIN stores s ON s.brand_id = f.brand_id AND s.state IS NOT DISTINCT FROM f.state
  LEFT JOIN products p ON p.brand_id = f.brand_id AND p.state IS NOT DISTINCT FROM f.state
WITH DATA;
CREATE UNIQUE INDEX market_brands_now_key ON market_brands_now (brand_id, state) NULLS NOT DISTINCT;
CREATE INDEX market_brands_now_rank ON market_brands_now (state, stores DESC);

-- 2. brand_categories_now: per canonical brand and category ('' for none), over the same store
--    products: the canonical products and stores, the median price and unit price, and the unit's
--    basis when the category has one (NULL when it mixes them). Refreshed with the others.
CREATE MATERIALIZED VIEW brand_categories_now AS
WITH carried AS MATERIALIZED (
    SELECT sp.canonical_brand_id AS brand_id, coalesce(sp.category, '') COLLATE "C" AS category,
           sp.dispensary_id, sp.canonical_product_id, sp.price_rec, sp.unit_price, sp.unit_price_basis
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.stock_status = 'in_stock' AND sp.canonical_brand_id IS NOT NULL AND d.menu_empty_since IS NULL),
figures AS (
    SELECT brand_id, category, (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec))::float8 AS median_price,
           (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price))::float8 AS median_unit_price,
           CASE WHEN min(unit_price_basis) = max(unit_price_basis) THEN min(unit_price_basis) END AS unit_price_basis
      FROM carried GROUP BY brand_id, category),
stores AS (
    SELECT brand_id, category, count(*)::integer AS stores
      FROM (SELECT brand_id, category FROM carried GROUP BY brand_id, category, dispensary_id) s
     GROUP BY brand_id, category),
products AS (
    SELECT brand_id, category, count(*)::integer AS products
      FROM (SELECT brand_id, category FROM carried WHERE canonical_product_id IS NOT NULL
             GROUP BY brand_id, category, canonical_product_id) p
     GROUP BY brand_id, category)
SELECT f.brand_id, f.category::text COLLATE "default" AS category, coalesce(p.products, 0) AS products, s.stores,
       f.median_price, f.median_unit_price, f.unit_price_basis
  FROM figures f
  JOIN stores s ON s.brand_id = f.brand_id AND s.category = f.category
  LEFT JOIN products p ON p.brand_id = f.brand_id AND p.category = f.category
WITH DATA;
CREATE UNIQUE INDEX brand_categories_now_key ON brand_categories_now (brand_id, category);

-- 3. A brand's latest events (GET /api/brands/{id}/market, the brand's page). No index led from a
--    brand to its events: a brand of more than a few hundred store products read the market's
--    newest events back, joining each to its store product, until 50 were its own. A brand with
--    few events among them read the whole window (50,000 events, 200,000 buffers: 100–350 ms at
--    2,000 stores). Each event now keeps the canonical brand its store product had when it was
--    written (set by the trigger below, whatever writes it: the crawl's close, a test, a benchmark;
--    one primary-key lookup, some 10 µs an event).
--    A later alias merges brands (cannaspider/analytics/canonical.py) without rewriting events:
--    the reader asks for the brand's ids, its own and those merged into it (brands.canonical_brand_id),
--    and keeps the events whose product is the brand's now.
ALTER TABLE product_events ADD COLUMN canonical_brand_id bigint;

CREATE FUNCTION product_events_brand() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.canonical_brand_id IS NULL THEN
        SELECT sp.canonical_brand_id INTO NEW.canonical_brand_id FROM store_products sp WHERE sp.id = NEW.store_product_id;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER product_events_brand BEFORE INSERT ON product_events
    FOR EACH ROW EXECUTE FUNCTION product_events_brand();

CREATE INDEX product_events_brand_idx ON product_events (canonical_brand_id, id) WHERE canonical_brand_id IS NOT NULL;

-- The events written before: a brand's list reads the market's newest 50,000 at most
-- (cannaspider/web/brands.py, EVENTS_WINDOW); the newest 200,000 are given their brand, older ones
-- keep NULL (rewriting a month of events is not worth it for a list that never reaches them).
UPDATE product_events e SET canonical_brand_id = sp.canonical_brand_id
  FROM store_products sp
 WHERE sp.id = e.store_product_id AND sp.canonical_brand_id IS NOT NULL
   AND e.id > (SELECT coalesce(max(id), 0) FROM product_events) - 200000;
