"""One store_product_snapshots row per product per crawl, a batch per INSERT from one JSON
document into the partitioned table (PostgreSQL routes each row to its month)."""

from __future__ import annotations

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, batch_json, json_columns

COLUMNS = (
    ("dispensary_id", "bigint"), ("provider_product_id", "text"), ("crawl_run_id", "bigint"),
    ("price_rec", "numeric"), ("price_med", "numeric"), ("price_rec_special", "numeric"),
    ("price_med_special", "numeric"), ("is_on_special", "boolean"), ("specials", "jsonb"),
    ("is_in_stock", "boolean"), ("stock_status", "text"), ("quantity_available", "integer"),
    ("thc_value", "numeric"), ("thc_unit", "text"), ("cbd_value", "numeric"), ("cbd_unit", "text"),
)
INSERT = f"""
INSERT INTO store_product_snapshots ({", ".join(name for name, _ in COLUMNS)})
SELECT {json_columns(COLUMNS)} FROM jsonb_array_elements(%s::jsonb) AS r
"""


class SnapshotWriterPipeline(BatchWriterPipeline):
    item_class = StoreProduct

    def row(self, p: StoreProduct) -> tuple:
        return (
            p.dispensary_id, p.provider_product_id, p.crawl_run_id, p.price_rec, p.price_med,
            p.price_rec_special, p.price_med_special, p.is_on_special, p.specials or None,
            True, "in_stock", p.quantity_available, p.thc.value, p.thc.unit, p.cbd.value, p.cbd.unit,
        )

    def run_key(self, row: tuple) -> tuple:
        return (row[0], row[2])

    async def write(self, conn, rows: list[tuple]) -> int:
        await conn.execute(INSERT, (batch_json(rows),))
        return len(rows)

    def after_write(self, written: int) -> None:
        self.crawler.stats.inc_value("cannaspider/snapshots_written", written)
