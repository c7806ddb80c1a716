"""One store_product_snapshots row per product per crawl, COPYed straight into the partitioned
table (PostgreSQL routes each row to its month)."""

from __future__ import annotations

from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import BatchWriterPipeline, to_json

COLUMNS = (
    "dispensary_id", "provider_product_id", "crawl_run_id", "price_rec", "price_med", "price_rec_special",
    "price_med_special", "is_on_special", "specials", "is_in_stock", "stock_status", "quantity_available",
    "thc_value", "thc_unit", "cbd_value", "cbd_unit",
)


class SnapshotWriterPipeline(BatchWriterPipeline):
    item_class = StoreProduct

    def row(self, p: StoreProduct) -> tuple:
        return (
            p.dispensary_id, p.provider_product_id, p.crawl_run_id, p.price_rec, p.price_med,
            p.price_rec_special, p.price_med_special, p.is_on_special, to_json(p.specials) if p.specials else None,
            True, "in_stock", p.quantity_available, p.thc.value, p.thc.unit, p.cbd.value, p.cbd.unit,
        )

    def run_key(self, row: tuple) -> tuple:
        return (row[0], row[2])

    async def write(self, conn, rows: list[tuple]) -> int:
        async with conn.transaction(), conn.cursor() as cur:
            async with cur.copy(f"COPY store_product_snapshots ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    await copy.write_row(row)
        return len(rows)

    def after_write(self, written: int) -> None:
        self.crawler.stats.inc_value("cannaspider/snapshots_written", written)
