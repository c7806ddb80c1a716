-- The analyst's specials and brands (issue 32, points 2 and 3; docs/analytics.md, "Specials" and
-- "Finding a brand").
--
-- 1. A canonical brand's name as an operator sets it (`scrapy brands rename`): shown instead of
--    `name`, the spelling first seen, which stays what the menus sent. NULL: `name` is shown.
ALTER TABLE brands ADD COLUMN display_name text;

-- 2. Brand search (`GET /api/brands?q=`): the query is folded by the normalizer as the stored keys
--    are (case, accents, punctuation, a company's suffix: cannaspider/identity.py), then found
--    anywhere inside a brand's key or an alias by a trigram index (pg_trgm is a trusted extension:
--    the database's owner may create it). Keys hold every script; trigrams of any letters work.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX brands_normalized_name_trgm_idx ON brands USING gin (normalized_name gin_trgm_ops);
CREATE INDEX brand_aliases_alias_trgm_idx ON brand_aliases USING gin (alias gin_trgm_ops);

-- 3. The specials running now (`GET /api/specials`): the products on special, by store. A seventh of
--    a menu at most is on special, so the index is small; a store's or the whole market's deals
--    are read in store order from it.
CREATE INDEX store_products_on_special_idx ON store_products (dispensary_id) WHERE is_on_special;

-- 4. A brand's availability over time (its dashboard page, GET /api/brands/{id}/market): its rows of
--    market_brand_daily, whose key leads with the state and day.
CREATE INDEX market_brand_daily_brand_idx ON market_brand_daily (canonical_brand_id, state, day);

-- 5. Refreshed with the analytics refresh, CONCURRENTLY (cannaspider/analytics/refresh.py), as
--    market_brands_now is: per request, the whole market's products on special (a seventh of 800,000
--    at 2,000 stores) or a brand's 13,000 store products and their days took hundreds of ms.
--
--    specials_category_now: the products on special now (in stock, menu not empty) per state
--    (NULL: every state) and category (NULL: every category), with the median list and discounted
--    price and, where the category has one basis, per unit. GET /api/specials reads it unless a
--    store or brand narrows the question (then it computes the same from the rows, which are few).
CREATE MATERIALIZED VIEW specials_category_now AS
WITH on_special AS (
    SELECT coalesce(d.state, '') AS state, coalesce(sp.category, '') AS category, sp.dispensary_id, sp.price_rec,
           sp.price_rec_special, sp.unit_price, sp.unit_price_special, sp.unit_price_basis
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.is_on_special AND sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL)
SELECT state, category, count(*) AS products, count(DISTINCT dispensary_id) AS stores,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec))::float8 AS list_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY price_rec_special))::float8 AS special_price,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY 1 - price_rec_special / price_rec)
            FILTER (WHERE price_rec > 0))::float8 AS discount,
       CASE WHEN count(DISTINCT unit_price_basis) = 1 THEN min(unit_price_basis) END AS unit_price_basis,
       CASE WHEN count(DISTINCT unit_price_basis) = 1
            THEN (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price))::float8 END AS list_unit_price,
       CASE WHEN count(DISTINCT unit_price_basis) = 1
            THEN (percentile_cont(0.5) WITHIN GROUP (ORDER BY unit_price_special))::float8 END AS special_unit_price
  FROM on_special
 GROUP BY GROUPING SETS ((state, category), (category), (state), ())
HAVING count(*) > 0;  -- nothing on special: no row, not a total of zero
CREATE UNIQUE INDEX specials_category_now_key ON specials_category_now (state, category) NULLS NOT DISTINCT;

--    brand_shelf_now: share of shelf, the store products in stock now (menu not empty) per state,
--    category and canonical brand; brand_id 0 is every brand's (the whole shelf, unbranded included).
--    One hash aggregation of the shelf per store first (a few products a store, brand and category),
--    then the small sums: counting distinct stores over the whole shelf sorted it twice (20 s).
CREATE MATERIALIZED VIEW brand_shelf_now AS
WITH per_store AS (
    SELECT coalesce(d.state, '') COLLATE "C" AS state, coalesce(sp.category, '') COLLATE "C" AS category,
           coalesce(sp.canonical_brand_id, 0) AS brand_id, sp.dispensary_id, count(*) AS products
      FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
     WHERE sp.stock_status = 'in_stock' AND d.menu_empty_since IS NULL
     GROUP BY 1, 2, 3, 4)
SELECT state, category, brand_id, sum(products)::bigint AS products, count(*) AS stores
  FROM per_store WHERE brand_id <> 0 GROUP BY 1, 2, 3
UNION ALL
SELECT state, category, 0, sum(products)::bigint, count(DISTINCT dispensary_id) FROM per_store GROUP BY 1, 2;
CREATE UNIQUE INDEX brand_shelf_now_key ON brand_shelf_now (brand_id, state, category);

-- 6. Where a brand is sold in a state (GET /api/brands/{id}/stores?state=): its store products of
--    each of the state's stores, without reading its whole market (13,000 rows at 2,000 stores).
CREATE INDEX store_products_brand_store_idx ON store_products (canonical_brand_id, dispensary_id);
