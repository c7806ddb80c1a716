"""Upserts StoreProduct into store_products, a batch per statement: the batch travels as one JSON
document (orjson, in C) that PostgreSQL unpacks with jsonb_array_elements, then one INSERT … ON
CONFLICT. A product in the feed is in stock with zero misses (it came back)."""

from __future__ import annotations

from collections import Counter

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, batch_json, json_columns

# (column, SQL type) in row order; jsonb columns carry nested JSON as is
COLUMNS = (
    ("seq", "bigint"), ("dispensary_id", "bigint"), ("provider", "text"), ("provider_product_id", "text"),
    ("name_raw", "text"), ("name", "text"), ("brand_name_raw", "text"), ("brand_id", "text"),
    ("category", "text"), ("subcategory", "text"), ("strain_type", "text"), ("price_rec", "numeric"),
    ("price_med", "numeric"), ("price_rec_special", "numeric"), ("price_med_special", "numeric"),
    ("is_on_special", "boolean"), ("options", "jsonb"), ("thc_value", "numeric"), ("thc_unit", "text"),
    ("cbd_value", "numeric"), ("cbd_unit", "text"), ("cannabinoids", "jsonb"), ("specials", "jsonb"),
    ("effects", "jsonb"), ("image_url", "text"), ("images", "jsonb"), ("quantity_available", "integer"),
    ("provider_created_at", "timestamptz"), ("provider_updated_at", "timestamptz"), ("last_crawl_run_id", "bigint"),
)
TARGET = [name for name, _ in COLUMNS[1:]]
UPDATABLE = [c for c in TARGET if c not in ("dispensary_id", "provider", "provider_product_id")]

UPSERT = f"""
INSERT INTO store_products AS sp ({", ".join(TARGET)}, is_in_stock, stock_status, consecutive_misses,
                                  last_seen_at, updated_at)
SELECT DISTINCT ON (dispensary_id, provider, provider_product_id)
       {", ".join(TARGET)}, true, 'in_stock', 0, now(), now()
  FROM (SELECT {json_columns(COLUMNS)} FROM jsonb_array_elements(%s::jsonb) AS r) AS batch
 ORDER BY dispensary_id, provider, provider_product_id, seq DESC
ON CONFLICT (dispensary_id, provider, provider_product_id) DO UPDATE SET
    {", ".join(f"{c} = EXCLUDED.{c}" for c in UPDATABLE)},
    is_in_stock = true, stock_status = 'in_stock', consecutive_misses = 0,
    last_seen_at = now(), updated_at = now()
RETURNING (xmax = 0) AS inserted, dispensary_id, last_crawl_run_id
"""


class ProductWriterPipeline(BatchWriterPipeline):
    item_class = StoreProduct
    seq = 0

    def row(self, p: StoreProduct) -> tuple:
        # references only: the whole batch is encoded at once when it is written
        self.seq += 1
        return (
            self.seq, p.dispensary_id, p.provider, p.provider_product_id, p.name_raw, p.name, p.brand_name_raw,
            p.brand_id, p.category, p.subcategory, p.strain_type, p.price_rec, p.price_med,
            p.price_rec_special, p.price_med_special, p.is_on_special, p.options,
            p.thc.value, p.thc.unit, p.cbd.value, p.cbd.unit, p.cannabinoids, p.specials, p.effects, p.image_url,
            p.images, p.quantity_available, p.provider_created_at, p.provider_updated_at, p.crawl_run_id,
        )

    def run_key(self, row: tuple) -> tuple:
        return (row[1], row[-1])

    def after_buffered(self, item: StoreProduct) -> None:
        self.store.account((item.dispensary_id, item.crawl_run_id))

    async def write(self, conn, rows: list[tuple]) -> tuple[Counter, Counter]:
        cur = await conn.execute(UPSERT, (batch_json(rows),))
        inserted = Counter((d, r) for new, d, r in await cur.fetchall() if new)
        return Counter(self.run_key(row) for row in rows), inserted

    def after_refused(self, rows: list[tuple]) -> None:
        # settled, if not stored: the store's completion need not wait out its timeout for them
        for run_key, n in Counter(self.run_key(row) for row in rows).items():
            self.store.written(run_key, n, 0)

    def after_write(self, result: tuple[Counter, Counter]) -> None:
        written, inserted = result
        for run_key, n in written.items():
            self.store.written(run_key, n, inserted.get(run_key, 0))
        self.crawler.stats.inc_value("cannaspider/products_written", sum(written.values()))
