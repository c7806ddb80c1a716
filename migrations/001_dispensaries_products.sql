-- Stores, what discovery saw, current product state, and one record per crawl run.
-- Column names follow the seed: other tools query them.

CREATE TABLE dispensaries (
    id                      bigserial PRIMARY KEY,
    platform                text        NOT NULL DEFAULT 'dutchie',
    platform_dispensary_id  text,
    name                    text        NOT NULL,
    slug                    text,
    menu_url                text,
    address                 text,
    city                    text,
    state                   text,
    zip                     text,
    lat                     double precision,
    lng                     double precision,
    timezone                text,
    phone                   text,
    is_recreational         boolean,
    is_medical              boolean,
    crawl_enabled           boolean     NOT NULL DEFAULT true,
    last_crawl_at           timestamptz,
    -- why entry-point discovery could not resolve this store (NULL once resolved)
    resolution_error        text,
    resolved_at             timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX dispensaries_platform_id_key
    ON dispensaries (platform, platform_dispensary_id) WHERE platform_dispensary_id IS NOT NULL;
CREATE INDEX dispensaries_state_idx ON dispensaries (state) WHERE crawl_enabled;

CREATE TABLE dutchie_discovery_locations (
    id                      bigserial PRIMARY KEY,
    platform_dispensary_id  text        NOT NULL UNIQUE,
    name                    text,
    slug                    text,
    city                    text,
    state                   text,
    menu_url                text,
    raw                     jsonb       NOT NULL,
    dispensary_id           bigint      REFERENCES dispensaries (id) ON DELETE SET NULL,
    first_seen_at           timestamptz NOT NULL DEFAULT now(),
    last_seen_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE crawl_runs (
    id                  bigserial PRIMARY KEY,
    dispensary_id       bigint      REFERENCES dispensaries (id) ON DELETE CASCADE,
    task_id             bigint,
    role                text        NOT NULL,
    status              text        NOT NULL DEFAULT 'running'
                        CHECK (status IN ('running', 'complete', 'incomplete', 'failed')),
    started_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    duration_ms         integer,
    pages_fetched       integer     NOT NULL DEFAULT 0,
    products_seen       integer     NOT NULL DEFAULT 0,
    products_new        integer     NOT NULL DEFAULT 0,
    products_missed     integer     NOT NULL DEFAULT 0,
    products_marked_oos integer     NOT NULL DEFAULT 0,
    errors              integer     NOT NULL DEFAULT 0,
    error               text
);
CREATE INDEX crawl_runs_dispensary_idx ON crawl_runs (dispensary_id, started_at DESC);

CREATE TABLE store_products (
    id                      bigserial PRIMARY KEY,
    dispensary_id           bigint      NOT NULL REFERENCES dispensaries (id) ON DELETE CASCADE,
    provider                text        NOT NULL DEFAULT 'dutchie',
    provider_product_id     text        NOT NULL,
    name_raw                text        NOT NULL,
    name                    text,       -- name_raw without HTML tags and entities
    brand_name_raw          text,
    brand_id                text,
    category                text,
    subcategory             text,
    strain_type             text,
    price_rec               numeric(12, 2),
    price_med               numeric(12, 2),
    price_rec_special       numeric(12, 2),
    price_med_special       numeric(12, 2),
    is_on_special           boolean     NOT NULL DEFAULT false,
    options                 jsonb       NOT NULL DEFAULT '[]',
    -- potency: a value and its unit, never % mixed with mg
    thc_value               numeric(12, 3),
    thc_unit                text,
    cbd_value               numeric(12, 3),
    cbd_unit                text,
    cannabinoids            jsonb       NOT NULL DEFAULT '[]',
    specials                jsonb       NOT NULL DEFAULT '[]',
    effects                 jsonb       NOT NULL DEFAULT '{}',
    image_url               text,
    images                  jsonb       NOT NULL DEFAULT '[]',
    local_image_path        text,
    quantity_available      integer,
    is_in_stock             boolean     NOT NULL DEFAULT true,
    stock_status            text        NOT NULL DEFAULT 'in_stock',
    consecutive_misses      integer     NOT NULL DEFAULT 0,
    provider_created_at     timestamptz,
    provider_updated_at     timestamptz,
    first_seen_at           timestamptz NOT NULL DEFAULT now(),
    last_seen_at            timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    last_crawl_run_id       bigint,
    CONSTRAINT store_products_identity UNIQUE (dispensary_id, provider, provider_product_id),
    CONSTRAINT store_products_thc_unit CHECK (thc_unit IN ('percent', 'mg', 'mg_per_g')),
    CONSTRAINT store_products_cbd_unit CHECK (cbd_unit IN ('percent', 'mg', 'mg_per_g')),
    CONSTRAINT store_products_stock_status CHECK (stock_status IN ('in_stock', 'oos'))
);
CREATE INDEX store_products_oos_idx ON store_products (dispensary_id) WHERE stock_status = 'oos';
