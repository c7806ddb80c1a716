-- One market across platforms (docs/analytics.md, "Across platforms"; issue 30, deliverable 3).
--
-- 1. A brand id is its platform's: Dutchie's brandId keys 'd:<id>', any other platform's
--    '<platform>:<id>' (cannaspider/pipelines/product_writer.py). Before, Jane's product_brand_id
--    keyed 'd:<id>' too, so a Jane brand id equal to a Dutchie brandId would have been that brand.
--    A brand row keyed 'd:' that only Jane's products name is re-keyed as Jane's.
UPDATE brands b SET key = 'jane:' || b.provider_brand_id
 WHERE b.key LIKE 'd:%' AND b.provider_brand_id IS NOT NULL
   AND EXISTS (SELECT 1 FROM store_products sp WHERE sp.brand_ref_id = b.id AND sp.provider = 'jane')
   AND NOT EXISTS (SELECT 1 FROM store_products sp WHERE sp.brand_ref_id = b.id AND sp.provider <> 'jane')
   AND NOT EXISTS (SELECT 1 FROM brands o WHERE o.key = 'jane:' || b.provider_brand_id);

-- 2. A brand's key drops a company's legal suffix (cannaspider/identity.py, brand_key_name:
--    'Mohave Cannabis Co.' and 'Mohave Cannabis Company' are 'mohave cannabis'). The stored keys
--    are folded the same way, and so are the operator's aliases (normalized names too).
UPDATE brands SET normalized_name = f.folded
  FROM (SELECT id, regexp_replace(normalized_name,
                                  '( (co|company|inc|incorporated|llc|ltd|corp|corporation))+$', '') AS folded
          FROM brands WHERE normalized_name ~ ' ') f
 WHERE brands.id = f.id AND f.folded <> '' AND f.folded <> brands.normalized_name;
UPDATE brand_aliases a SET alias = f.folded
  FROM (SELECT alias, regexp_replace(alias, '( (co|company|inc|incorporated|llc|ltd|corp|corporation))+$', '') AS folded
          FROM brand_aliases WHERE alias ~ ' ') f
 WHERE a.alias = f.alias AND f.folded <> '' AND f.folded <> a.alias
   AND NOT EXISTS (SELECT 1 FROM brand_aliases o WHERE o.alias = f.folded);

--    Canonical brands that now share a key become the first one's (by id), as the product writer
--    would have made them; their store products and canonical products follow at their store's
--    next crawl (the writer links each row it writes from the brands table), `scrapy brands alias`
--    moves them at once.
WITH roots AS (
    SELECT id, normalized_name,
           first_value(id) OVER (PARTITION BY normalized_name ORDER BY id) AS first_root
      FROM brands WHERE canonical_brand_id IS NULL AND normalized_name IS NOT NULL),
moved AS (SELECT id AS old_root, first_root FROM roots WHERE id <> first_root)
UPDATE brands b SET canonical_brand_id = m.first_root
  FROM moved m
 WHERE b.id = m.old_root OR b.canonical_brand_id = m.old_root;
UPDATE brand_aliases a SET brand_id = b.canonical_brand_id
  FROM brands b WHERE b.id = a.brand_id AND b.canonical_brand_id IS NOT NULL;

-- 3. Each market figure's stores per platform ({"dutchie": 8, "jane": 4}): the stores crawled of
--    the state's day, the stores carrying a brand, the stores of a category's figures. Written by
--    the market roll (cannaspider/analytics/market.py); rows rolled before it say '{}' until their
--    day is rolled again (emptying market_roll_state rebuilds every day).
ALTER TABLE market_state_daily ADD COLUMN stores_by_platform jsonb NOT NULL DEFAULT '{}';
ALTER TABLE market_brand_daily ADD COLUMN stores_by_platform jsonb NOT NULL DEFAULT '{}';
ALTER TABLE market_category_daily ADD COLUMN stores_by_platform jsonb NOT NULL DEFAULT '{}';
-- the rolled days are rebuilt at the next refresh, so every figure carries its platforms
DELETE FROM market_roll_state;

-- 4. A product is found by its enterprise id, else by its canonical brand, category, name key and
--    size key, whatever its key (cannaspider/pipelines/product_writer.py): Jane sends no
--    enterprise id, so a product Dutchie keyed 'e:<id>' is found by what both platforms send.
CREATE INDEX canonical_products_enterprise_idx ON canonical_products (enterprise_product_id)
    WHERE enterprise_product_id IS NOT NULL;
CREATE INDEX canonical_products_attrs_idx ON canonical_products (canonical_brand_id, name_key, size_key);
