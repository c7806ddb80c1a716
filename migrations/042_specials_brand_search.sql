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
