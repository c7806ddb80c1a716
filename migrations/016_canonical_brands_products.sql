-- One brand, one product across stores (docs/analytics.md, "One brand, one product").
--
-- brands: one row per brand as the menus name it: by Dutchie's brandId (key 'd:<brandId>') or,
-- for a product without one, by its normalized name (key 'n:<name>'). canonical_brand_id says
-- which brand it is the same as (NULL: itself): set when the row is created from an operator's
-- alias (brand_aliases) or else the first brand seen with the same normalized name, and moved by
-- `scrapy brands alias`. The canonical brand of a row is coalesce(canonical_brand_id, id).
CREATE TABLE brands (
    id                  bigserial PRIMARY KEY,
    key                 text        NOT NULL UNIQUE,
    provider_brand_id   text,                       -- Dutchie's brandId, when the key is one
    name                text,                       -- the name first seen with it, as sent
    normalized_name     text,
    canonical_brand_id  bigint      REFERENCES brands (id),
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX brands_normalized_name_idx ON brands (normalized_name);
CREATE INDEX brands_canonical_idx ON brands (canonical_brand_id) WHERE canonical_brand_id IS NOT NULL;

-- operator aliases: a normalized name that is another brand (`scrapy brands alias NAME CANONICAL`)
CREATE TABLE brand_aliases (
    alias               text        PRIMARY KEY,    -- a normalized name
    brand_id            bigint      NOT NULL REFERENCES brands (id),
    created_at          timestamptz NOT NULL DEFAULT now()
);

-- canonical_products: the same product across stores. key: 'e:<enterpriseProductId>' when Dutchie
-- sends one, else 'b<canonical brand id>|<category>|<normalized name>|<sizes>'; a product with
-- neither a brand nor an enterprise id is a product of its own ('s:<store product>').
CREATE TABLE canonical_products (
    id                      bigserial PRIMARY KEY,
    key                     text        NOT NULL UNIQUE,
    canonical_brand_id      bigint      REFERENCES brands (id),
    category                text,
    name                    text,                   -- the name first seen with it
    name_key                text,
    size_key                text,
    enterprise_product_id   text,
    created_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX canonical_products_brand_idx ON canonical_products (canonical_brand_id);

-- Each store product links to them; set by the product writer in the statement that writes the
-- row (no foreign keys: the ids come from that same statement, and a check per row would cost the
-- hot path). Rows written before this migration link at their next crawl.
ALTER TABLE store_products
    ADD COLUMN brand_ref_id          bigint,   -- brands.id of the product's brand as sent
    ADD COLUMN canonical_brand_id    bigint,   -- its canonical brand
    ADD COLUMN canonical_product_id  bigint,
    ADD COLUMN enterprise_product_id text;
CREATE INDEX store_products_canonical_product_idx ON store_products (canonical_product_id);
CREATE INDEX store_products_canonical_brand_idx ON store_products (canonical_brand_id);
