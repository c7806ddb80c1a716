-- A leaner snapshot row (docs/analytics.md, "Snapshot storage"): the snapshot table grows by every
-- product of every store at every crawl, so each byte of a row counts 24 million times at scale.
--   * the product is named by store_products.id (8 bytes) instead of dispensary_id and
--     provider_product_id (~33 bytes, and again in the index); a product's row is deleted only
--     with its store, and its snapshots with it (delete_store_snapshots)
--   * stock_status is dropped: it is is_in_stock spelled out (store_products_stock_status pairs them)
--   * potency units are one byte ("char" codes p/m/g) instead of 'percent'/'mg'/'mg_per_g'
--   * one btree on store_product_id alone: equal keys deduplicate into posting lists (a few bytes
--     per snapshot instead of ~60); a product's history sorts its few rows by time after the scan
--   * fixed-width columns first, so no alignment padding
-- Everything the old rows held reads back from the view store_product_snapshots (same columns,
-- same types), which this migration puts where the table was; writers insert into product_snapshots.

CREATE TABLE product_snapshots (
    store_product_id    bigint      NOT NULL,
    captured_at         timestamptz NOT NULL DEFAULT now(),
    crawl_run_id        bigint,
    quantity_available  integer,
    is_on_special       boolean     NOT NULL DEFAULT false,
    is_in_stock         boolean     NOT NULL DEFAULT true,
    thc_unit            "char",
    cbd_unit            "char",
    price_rec           numeric(12, 2),
    price_med           numeric(12, 2),
    price_rec_special   numeric(12, 2),
    price_med_special   numeric(12, 2),
    thc_value           numeric(12, 3),
    cbd_value           numeric(12, 3),
    specials            jsonb,
    CONSTRAINT product_snapshots_thc_unit CHECK (thc_unit IN ('p', 'm', 'g')),
    CONSTRAINT product_snapshots_cbd_unit CHECK (cbd_unit IN ('p', 'm', 'g'))
) PARTITION BY RANGE (captured_at);
CREATE INDEX product_snapshots_product_idx ON product_snapshots (store_product_id);
-- rows arrive in time order: a block-range index finds the recent ones (the analytics roll) in
-- a few pages per partition
CREATE INDEX product_snapshots_time_idx ON product_snapshots USING brin (captured_at);

-- The unit codes, both ways; an unknown unit is refused (NULL code → the CHECK would pass, so raise)
CREATE FUNCTION snapshot_unit_code(unit text) RETURNS "char" LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE unit WHEN 'percent' THEN 'p'::"char" WHEN 'mg' THEN 'm'::"char"
                     WHEN 'mg_per_g' THEN 'g'::"char" END
$$;
CREATE FUNCTION snapshot_unit(code "char") RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE code WHEN 'p' THEN 'percent' WHEN 'm' THEN 'mg' WHEN 'g' THEN 'mg_per_g' END
$$;

-- Monthly partitions, as before (002_product_snapshots.sql), now of product_snapshots.
CREATE OR REPLACE FUNCTION ensure_snapshot_partitions(p_from date DEFAULT current_date, p_months integer DEFAULT 3)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    month_start date := date_trunc('month', p_from)::date;
    created     integer := 0;
    part        text;
BEGIN
    FOR i IN 0 .. p_months - 1 LOOP
        part := format('product_snapshots_%s', to_char(month_start, 'YYYY_MM'));
        IF to_regclass(part) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE IF NOT EXISTS %I PARTITION OF product_snapshots FOR VALUES FROM (%L) TO (%L)',
                part, month_start, (month_start + interval '1 month')::date);
            created := created + 1;
        END IF;
        month_start := (month_start + interval '1 month')::date;
    END LOOP;
    RETURN created;
END $$;

-- Carry the old rows over: partitions for every month they cover, then one INSERT … SELECT.
DO $$
DECLARE
    bounds record;
    bad    bigint;
BEGIN
    SELECT count(*) INTO bad FROM store_product_snapshots
     WHERE is_in_stock IS DISTINCT FROM (stock_status = 'in_stock')
        OR (thc_unit IS NOT NULL AND snapshot_unit_code(thc_unit) IS NULL)
        OR (cbd_unit IS NOT NULL AND snapshot_unit_code(cbd_unit) IS NULL);
    IF bad > 0 THEN
        RAISE EXCEPTION '% snapshot(s) whose stock_status disagrees with is_in_stock or with an unknown unit: '
                        'fix them before migrating, nothing was changed', bad;
    END IF;
    SELECT min(captured_at) AS lo, max(captured_at) AS hi INTO bounds FROM store_product_snapshots;
    IF bounds.lo IS NOT NULL THEN
        PERFORM ensure_snapshot_partitions(bounds.lo::date,
            ((extract(year FROM age(date_trunc('month', bounds.hi), date_trunc('month', bounds.lo))) * 12
             + extract(month FROM age(date_trunc('month', bounds.hi), date_trunc('month', bounds.lo))))::integer + 1));
    END IF;
END $$;
SELECT ensure_snapshot_partitions((current_date - interval '1 month')::date, 5);

-- Snapshots of products that no longer exist (their store was deleted, which deletes its
-- products) have nothing to name them by; they were unreachable already and are not carried.
INSERT INTO product_snapshots (store_product_id, captured_at, crawl_run_id, quantity_available,
                               is_on_special, is_in_stock, thc_unit, cbd_unit, price_rec, price_med,
                               price_rec_special, price_med_special, thc_value, cbd_value, specials)
SELECT sp.id, s.captured_at, s.crawl_run_id, s.quantity_available, s.is_on_special, s.is_in_stock,
       snapshot_unit_code(s.thc_unit), snapshot_unit_code(s.cbd_unit), s.price_rec, s.price_med,
       s.price_rec_special, s.price_med_special, s.thc_value, s.cbd_value, s.specials
  FROM store_product_snapshots s
  JOIN store_products sp
    ON sp.dispensary_id = s.dispensary_id AND sp.provider = 'dutchie'
   AND sp.provider_product_id = s.provider_product_id
 ORDER BY sp.id, s.captured_at;

-- The views read the new table (same columns, so the analytics views built on them stand). A
-- LEFT JOIN on the primary key: a query that needs no product column skips the join altogether.
CREATE OR REPLACE VIEW snapshot_history AS
SELECT s.store_product_id,
       sp.dispensary_id,
       sp.provider_product_id,
       s.crawl_run_id,
       s.captured_at,
       s.price_rec,
       s.price_med,
       s.price_rec_special,
       s.price_med_special,
       s.is_on_special,
       s.specials,
       s.is_in_stock,
       CASE WHEN s.is_in_stock THEN 'in_stock' ELSE 'oos' END AS stock_status,
       s.quantity_available,
       s.thc_value,
       snapshot_unit(s.thc_unit) AS thc_unit,
       s.cbd_value,
       snapshot_unit(s.cbd_unit) AS cbd_unit
  FROM product_snapshots s
  LEFT JOIN store_products sp ON sp.id = s.store_product_id;

DROP TABLE store_product_snapshots;

-- The old name, for readers: exactly the old columns.
CREATE VIEW store_product_snapshots AS
SELECT dispensary_id, provider_product_id, crawl_run_id, captured_at, price_rec, price_med,
       price_rec_special, price_med_special, is_on_special, specials, is_in_stock, stock_status,
       quantity_available, thc_value, thc_unit, cbd_value, cbd_unit
  FROM snapshot_history;

-- A store's deletion deletes its products (ON DELETE CASCADE); their snapshots go with them.
-- (A foreign key from the snapshots would check every inserted row; a statement trigger on the
-- rare delete costs nothing at ingest.)
CREATE FUNCTION delete_store_snapshots() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM product_snapshots s USING deleted_products d WHERE s.store_product_id = d.id;
    RETURN NULL;
END $$;
CREATE TRIGGER store_products_delete_snapshots AFTER DELETE ON store_products
    REFERENCING OLD TABLE AS deleted_products FOR EACH STATEMENT EXECUTE FUNCTION delete_store_snapshots();
