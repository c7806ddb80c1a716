"""Writes StoreProduct, a batch per statement: the store_products upsert and the crawl's
store_product_snapshots rows, from one JSON document that PostgreSQL unpacks once
(jsonb_array_elements). One statement is one transaction: a product's current row and its
point-in-time snapshot are committed together or not at all. A product in the feed is in stock
with zero misses (it came back).

A row the database refuses for its values (see batch_writer.py) is lost, and only that row: the
product was in the store's feed, so it is in the crawl's seen ids and never counted missing, and
the crawl stays complete (else a store with one permanently bad product would never be judged
for out-of-stock again). The run records how many rows were refused (crawl_runs.errors), and the
crawl's stats how many items went to the feed without being stored (`cannaspider/items_not_stored`:
the feed is what the crawl saw, see README "Feeds and the item schema")."""

from __future__ import annotations

from collections import Counter

import orjson

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, json_columns

# (column, SQL type) in row order; jsonb columns carry nested JSON as is
COLUMNS = (
    ("seq", "bigint"),
    ("dispensary_id", "bigint"),
    ("provider", "text"),
    ("provider_product_id", "text"),
    ("name_raw", "text"),
    ("name", "text"),
    ("brand_name_raw", "text"),
    ("brand_id", "text"),
    ("category", "text"),
    ("subcategory", "text"),
    ("strain_type", "text"),
    ("price_rec", "numeric"),
    ("price_med", "numeric"),
    ("price_rec_special", "numeric"),
    ("price_med_special", "numeric"),
    ("is_on_special", "boolean"),
    ("options", "jsonb"),
    ("thc_value", "numeric"),
    ("thc_unit", "text"),
    ("cbd_value", "numeric"),
    ("cbd_unit", "text"),
    ("cannabinoids", "jsonb"),
    ("specials", "jsonb"),
    ("effects", "jsonb"),
    ("image_url", "text"),
    ("images", "jsonb"),
    ("quantity_available", "integer"),
    ("provider_created_at", "timestamptz"),
    ("provider_updated_at", "timestamptz"),
    ("last_crawl_run_id", "bigint"),
)
TARGET = [name for name, _ in COLUMNS[1:]]
UPDATABLE = [c for c in TARGET if c not in ("dispensary_id", "provider", "provider_product_id")]
# a snapshot: what the product looked like in this crawl (in the feed, so in stock), in the lean
# layout of migrations/011_lean_snapshots.sql: the product by its store_products id, units as codes
SNAPSHOT = {
    "store_product_id": "u.id",
    "crawl_run_id": "b.last_crawl_run_id",
    "price_rec": "b.price_rec",
    "price_med": "b.price_med",
    "price_rec_special": "b.price_rec_special",
    "price_med_special": "b.price_med_special",
    "is_on_special": "b.is_on_special",
    "specials": "nullif(b.specials, '[]'::jsonb)",
    "is_in_stock": "true",
    "quantity_available": "b.quantity_available",
    "thc_value": "b.thc_value",
    "thc_unit": "snapshot_unit_code(b.thc_unit)",
    "cbd_value": "b.cbd_value",
    "cbd_unit": "snapshot_unit_code(b.cbd_unit)",
}

# Data-modifying CTEs all run, each seeing the batch once. Two crawls of one store in the same
# batch send a product twice: both are snapshots, the later one is the product row (seq).
WRITE = f"""
WITH batch AS MATERIALIZED (
    SELECT {json_columns(COLUMNS)} FROM jsonb_array_elements(%t) AS r),
upserted AS (
    INSERT INTO store_products AS sp ({", ".join(TARGET)}, is_in_stock, stock_status, consecutive_misses,
                                      last_seen_at, updated_at)
    SELECT DISTINCT ON (dispensary_id, provider, provider_product_id)
           {", ".join(TARGET)}, true, 'in_stock', 0, now(), now()
      FROM batch
     ORDER BY dispensary_id, provider, provider_product_id, seq DESC
    ON CONFLICT (dispensary_id, provider, provider_product_id) DO UPDATE SET
        {", ".join(f"{c} = EXCLUDED.{c}" for c in UPDATABLE)},
        is_in_stock = true, stock_status = 'in_stock', consecutive_misses = 0,
        last_seen_at = now(), updated_at = now()
    RETURNING (xmax = 0) AS inserted, id, dispensary_id, provider, provider_product_id, last_crawl_run_id),
snapshots AS (  -- every batch row, named by its product's id (two crawls' rows share the one id)
    INSERT INTO product_snapshots ({", ".join(SNAPSHOT)})
    SELECT {", ".join(SNAPSHOT.values())}
      FROM batch b JOIN upserted u USING (dispensary_id, provider, provider_product_id))
SELECT dispensary_id, last_crawl_run_id, count(*) FROM upserted WHERE inserted
 GROUP BY dispensary_id, last_crawl_run_id
"""


class ProductWriterPipeline(BatchWriterPipeline):
    item_class = StoreProduct
    seq = 0

    def row(self, p: StoreProduct) -> tuple:
        self.seq += 1
        return (
            self.seq,
            p.dispensary_id,
            p.provider,
            p.provider_product_id,
            p.name_raw,
            p.name,
            p.brand_name_raw,
            p.brand_id,
            p.category,
            p.subcategory,
            p.strain_type,
            p.price_rec,
            p.price_med,
            p.price_rec_special,
            p.price_med_special,
            p.is_on_special,
            p.options,
            p.thc.value,
            p.thc.unit,
            p.cbd.value,
            p.cbd.unit,
            p.cannabinoids,
            p.specials,
            p.effects,
            p.image_url,
            p.images,
            p.quantity_available,
            p.provider_created_at,
            p.provider_updated_at,
            p.crawl_run_id,
        )

    def after_buffered(self, item: StoreProduct) -> None:
        self.store.account((item.dispensary_id, item.crawl_run_id))

    async def write(self, conn, batch) -> dict:
        # new rows per store and crawl; rows settled are counted from the batch's keys (after_write)
        cur = await conn.execute(WRITE, (batch,))
        return {(d, r): n for d, r, n in await cur.fetchall()}

    def after_refused(self, keys: list[tuple], *, bad_rows: bool = False) -> None:
        # settled, if not stored: the store's completion need not wait out its timeout for them
        for run_key, n in Counter(keys).items():
            self.store.written(run_key, n, 0)
            if bad_rows:
                self.store.ledgers[run_key].refused += n
        self.crawler.stats.inc_value("cannaspider/items_not_stored", len(keys))  # they went on to the feed

    def after_unencodable(self, key: tuple, item, exc: Exception) -> None:
        super().after_unencodable(key, item, exc)
        # dropped (it could not go to a feed either); accounted and settled so completion goes on
        self.store.account(key)
        self.store.written(key, 1, 0)
        self.store.ledgers[key].refused += 1

    def after_lost_at_close(self, rows: int) -> None:
        self.crawler.stats.inc_value("cannaspider/items_not_stored", rows)

    def describe_item(self, item: StoreProduct) -> str:
        return f"dispensary {item.dispensary_id} product {item.provider_product_id!r}"

    def describe_row(self, row: bytes) -> str:
        values = orjson.loads(row)
        return f"dispensary {values[1]} product {values[3]!r}"

    def after_write(self, keys: list[tuple], inserted: dict) -> None:
        for run_key, n in Counter(keys).items():
            self.store.written(run_key, n, inserted.get(run_key, 0))
        self.crawler.stats.inc_value("cannaspider/products_written", len(keys))
        self.crawler.stats.inc_value("cannaspider/snapshots_written", len(keys))
