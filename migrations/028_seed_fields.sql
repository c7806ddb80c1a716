-- Every product field the seed names is kept (docs/dutchie.md, "Products"; docs/architecture.md,
-- "Item schema"): Dutchie's Status of a product on its row and on each snapshot, and the brand's
-- description on the brand. (rawOptions is kept in each option of store_products.options, as
-- `raw_option`: no column.) Nullable columns without a default: no table is rewritten.
ALTER TABLE store_products ADD COLUMN status text;
-- a short text per snapshot, NULL when the payload sent none; the partitions take it from the parent
ALTER TABLE product_snapshots ADD COLUMN status text;
ALTER TABLE brands ADD COLUMN description text;  -- brand.description, the latest sent

-- the snapshot's status for readers of the history (its columns as before, status appended)
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
       snapshot_unit(s.cbd_unit) AS cbd_unit,
       s.status
  FROM product_snapshots s
  LEFT JOIN store_products sp ON sp.id = s.store_product_id;
