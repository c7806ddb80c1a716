-- What changed (docs/analytics.md, "Events"): one row per change a complete crawl saw, written by
-- the statement that closes the crawl (pipelines/crawl_completion.py, CLOSE_COMPLETE).
--
-- A change is judged against the product's state as of the last crawl that wrote its events, kept
-- in product_event_state: the product writer overwrites prices and stock as soon as any crawl,
-- complete or not, sees the product, so its row alone cannot say what changed. Only the close of a
-- crawl that writes events moves this state on, so a change first seen by an incomplete crawl is
-- reported by the next complete one, never lost and never twice. A table of its own, not columns
-- of store_products: the close would otherwise update every newly listed product's row while the
-- image pipeline updates the same rows (local_image_path) in another order, and deadlock.
CREATE TABLE product_event_state (
    store_product_id bigint PRIMARY KEY REFERENCES store_products (id) ON DELETE CASCADE,
    price_rec        numeric(12, 2),
    price_med        numeric(12, 2),
    is_on_special    boolean,      -- NULL: not listed yet (no event-writing crawl saw it)
    oos_since        timestamptz   -- set with its out_of_stock event, cleared with back_in_stock
);
-- the products known before events existed are listed already, as they are now
INSERT INTO product_event_state (store_product_id, price_rec, price_med, is_on_special, oos_since)
SELECT id, price_rec, price_med, is_on_special, CASE WHEN stock_status = 'oos' THEN updated_at END
  FROM store_products;

CREATE TABLE product_events (
    occurred_at       timestamptz NOT NULL,  -- the start of the crawl that saw it (crawl_runs.started_at)
    id                bigint      GENERATED ALWAYS AS IDENTITY,
    crawl_run_id      bigint      NOT NULL,
    dispensary_id     bigint      NOT NULL,
    store_product_id  bigint      NOT NULL,
    type              text        NOT NULL,
    price_rec_old     numeric(12, 2),  -- price_changed only: the prices before
    price_med_old     numeric(12, 2),
    price_rec         numeric(12, 2),  -- the product's prices at the event (last seen, for out_of_stock)
    price_med         numeric(12, 2),
    price_rec_special numeric(12, 2),
    price_med_special numeric(12, 2),
    CONSTRAINT product_events_type CHECK (type IN ('listed', 'price_changed', 'special_started', 'special_ended',
                                                   'out_of_stock', 'back_in_stock')),
    -- a crawl's events share its start time, so this is unique on (run, product, type): a close
    -- run twice writes nothing twice
    CONSTRAINT product_events_once UNIQUE (crawl_run_id, store_product_id, type, occurred_at)
) PARTITION BY RANGE (occurred_at);
CREATE INDEX product_events_id_idx ON product_events (id);  -- keyset pages (GET /api/events)
CREATE INDEX product_events_product_idx ON product_events (store_product_id);  -- a product's history
CREATE INDEX product_events_store_idx ON product_events (dispensary_id, id);
CREATE INDEX product_events_time_idx ON product_events USING brin (occurred_at);

-- Months of events come with the months of snapshots: wherever snapshot partitions are made
-- (migrations, `scrapy db partitions`, a crawl's start), event partitions are made too.
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
        part := format('product_events_%s', to_char(month_start, 'YYYY_MM'));
        IF to_regclass(part) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE IF NOT EXISTS %I PARTITION OF product_events FOR VALUES FROM (%L) TO (%L)',
                part, month_start, (month_start + interval '1 month')::date);
        END IF;
        month_start := (month_start + interval '1 month')::date;
    END LOOP;
    RETURN created;
END $$;
-- every month that has snapshots (or crawl runs) gets its month of events
DO $$
DECLARE
    lo date := least((SELECT min(started_at) FROM crawl_runs)::date, (current_date - interval '1 month')::date);
BEGIN
    PERFORM ensure_snapshot_partitions(lo, ((extract(year FROM age(date_trunc('month', current_date), date_trunc('month', lo))) * 12
        + extract(month FROM age(date_trunc('month', current_date), date_trunc('month', lo))))::integer + 5));
END $$;
