"""Upserts StoreProduct into store_products: COPY a batch into a temporary table, then one
INSERT … ON CONFLICT. A product in the feed is in stock with zero misses (it came back)."""

from __future__ import annotations

from collections import Counter

import orjson

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, to_json


def options_json(options) -> str:
    """The options column: one per product, so orjson straight from the dataclasses (prices as
    numbers, not strings)."""
    return orjson.dumps(options, default=float).decode()


COLUMNS = (
    "seq", "dispensary_id", "provider", "provider_product_id", "name_raw", "name", "brand_name_raw", "brand_id",
    "category", "subcategory", "strain_type", "price_rec", "price_med", "price_rec_special",
    "price_med_special", "is_on_special", "options", "thc_value", "thc_unit", "cbd_value", "cbd_unit",
    "cannabinoids", "specials", "effects", "image_url", "images", "quantity_available",
    "provider_created_at", "provider_updated_at", "last_crawl_run_id",
)
TARGET = COLUMNS[1:]
UPDATABLE = [c for c in TARGET if c not in ("dispensary_id", "provider", "provider_product_id")]

STAGE = f"""
CREATE TEMP TABLE store_products_in (
    seq bigint, {", ".join(f"{c} text" for c in TARGET)}
) ON COMMIT DROP
"""
UPSERT = f"""
INSERT INTO store_products AS sp ({", ".join(TARGET)}, is_in_stock, stock_status, consecutive_misses,
                                  last_seen_at, updated_at)
SELECT DISTINCT ON (dispensary_id::bigint, provider, provider_product_id)
       dispensary_id::bigint, provider, provider_product_id, name_raw, name, brand_name_raw, brand_id,
       category, subcategory, strain_type, price_rec::numeric, price_med::numeric, price_rec_special::numeric,
       price_med_special::numeric, is_on_special::boolean, options::jsonb, thc_value::numeric, thc_unit,
       cbd_value::numeric, cbd_unit, cannabinoids::jsonb, specials::jsonb, effects::jsonb, image_url,
       images::jsonb, quantity_available::integer, provider_created_at::timestamptz,
       provider_updated_at::timestamptz, last_crawl_run_id::bigint, true, 'in_stock', 0, now(), now()
  FROM store_products_in
 ORDER BY dispensary_id::bigint, provider, provider_product_id, seq DESC
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
        self.seq += 1
        return (
            self.seq, p.dispensary_id, p.provider, p.provider_product_id, p.name_raw, p.name, p.brand_name_raw,
            p.brand_id, p.category, p.subcategory, p.strain_type, p.price_rec, p.price_med,
            p.price_rec_special, p.price_med_special, p.is_on_special, options_json(p.options),
            p.thc.value, p.thc.unit, p.cbd.value, p.cbd.unit, to_json(p.cannabinoids) if p.cannabinoids else "[]",
            to_json(p.specials) if p.specials else "[]", to_json(p.effects) if p.effects else "{}", p.image_url,
            to_json(p.images) if p.images else "[]",
            p.quantity_available, p.provider_created_at, p.provider_updated_at, p.crawl_run_id,
        )

    def run_key(self, row: tuple) -> tuple:
        return (row[1], row[-1])

    def after_buffered(self, item: StoreProduct) -> None:
        self.store.account((item.dispensary_id, item.crawl_run_id))

    async def write(self, conn, rows: list[tuple]) -> tuple[Counter, Counter]:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(STAGE)
            async with cur.copy(f"COPY store_products_in ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    await copy.write_row(row)
            await cur.execute(UPSERT)
            inserted = Counter((d, r) for new, d, r in await cur.fetchall() if new)
        return Counter(self.run_key(row) for row in rows), inserted

    def after_write(self, result: tuple[Counter, Counter]) -> None:
        written, inserted = result
        for run_key, n in written.items():
            self.store.written(run_key, n, inserted.get(run_key, 0))
        self.crawler.stats.inc_value("cannaspider/products_written", sum(written.values()))
