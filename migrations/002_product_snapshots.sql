-- One row per product per crawl. The biggest table by far, so: monthly range partitions on
-- captured_at (old months drop with DETACH/DROP, no vacuum storm) and a single lean index.

CREATE TABLE store_product_snapshots (
    dispensary_id       bigint      NOT NULL,
    provider_product_id text        NOT NULL,
    crawl_run_id        bigint,
    captured_at         timestamptz NOT NULL DEFAULT now(),
    price_rec           numeric(12, 2),
    price_med           numeric(12, 2),
    price_rec_special   numeric(12, 2),
    price_med_special   numeric(12, 2),
    is_on_special       boolean     NOT NULL DEFAULT false,
    specials            jsonb,
    is_in_stock         boolean     NOT NULL,
    stock_status        text        NOT NULL,
    quantity_available  integer,
    thc_value           numeric(12, 3),
    thc_unit            text,
    cbd_value           numeric(12, 3),
    cbd_unit            text
) PARTITION BY RANGE (captured_at);

CREATE INDEX store_product_snapshots_product_time_idx
    ON store_product_snapshots (dispensary_id, provider_product_id, captured_at);

-- Creates the monthly partitions covering [month of p_from, + p_months). Idempotent; run by
-- migrations, by every crawl at start, and by `scrapy db partitions` for months ahead.
CREATE FUNCTION ensure_snapshot_partitions(p_from date DEFAULT current_date, p_months integer DEFAULT 3)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    month_start date := date_trunc('month', p_from)::date;
    created     integer := 0;
    part        text;
BEGIN
    FOR i IN 0 .. p_months - 1 LOOP
        part := format('store_product_snapshots_%s', to_char(month_start, 'YYYY_MM'));
        IF to_regclass(part) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE IF NOT EXISTS %I PARTITION OF store_product_snapshots FOR VALUES FROM (%L) TO (%L)',
                part, month_start, (month_start + interval '1 month')::date);
            created := created + 1;
        END IF;
        month_start := (month_start + interval '1 month')::date;
    END LOOP;
    RETURN created;
END $$;

SELECT ensure_snapshot_partitions((current_date - interval '1 month')::date, 5);
