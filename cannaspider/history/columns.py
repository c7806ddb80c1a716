"""The columns of the snapshot history as files hold them: the monthly export's
(`scrapy export snapshots`, the view snapshot_history's columns) and the cold tier's (the lean
row of product_snapshots, one Parquet column each)."""

from __future__ import annotations

import pyarrow as pa

TIME = pa.timestamp("us", tz="UTC")

# a month of snapshots as the view snapshot_history gives them (docs/analytics.md, "Snapshot storage")
SNAPSHOT_COLUMNS = {
    "store_product_id": ("store_product_id", pa.int64()),
    "dispensary_id": ("dispensary_id", pa.int64()),
    "provider_product_id": ("provider_product_id", pa.string()),
    "crawl_run_id": ("crawl_run_id", pa.int64()),
    "captured_at": ("captured_at", TIME),
    "price_rec": ("price_rec::float8", pa.float64()),
    "price_med": ("price_med::float8", pa.float64()),
    "price_rec_special": ("price_rec_special::float8", pa.float64()),
    "price_med_special": ("price_med_special::float8", pa.float64()),
    "is_on_special": ("is_on_special", pa.bool_()),
    "specials": ("specials::text", pa.string()),  # JSON text, as in CSV
    "is_in_stock": ("is_in_stock", pa.bool_()),
    "stock_status": ("stock_status", pa.string()),
    "quantity_available": ("quantity_available", pa.int32()),
    "thc_value": ("thc_value::float8", pa.float64()),
    "thc_unit": ("thc_unit", pa.string()),
    "cbd_value": ("cbd_value::float8", pa.float64()),
    "cbd_unit": ("cbd_unit", pa.string()),
    "status": ("status", pa.string()),  # Dutchie's Status of the product (migrations/028_seed_fields.sql)
}

# The cold tier's row: product_snapshots' own columns, nothing derived (stock_status is
# is_in_stock spelled out, the store and the product id are store_products', which stays in
# PostgreSQL). (name, PostgreSQL's text of it for the checksum, DuckDB's type.) Prices keep their
# exact decimals, units their names (the view's), specials the jsonb's text: a month restored is
# the month archived, value for value.
ARCHIVE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("store_product_id", "store_product_id::text", "BIGINT"),
    ("captured_at", "(extract(epoch FROM captured_at) * 1000000)::bigint::text", "TIMESTAMPTZ"),
    ("crawl_run_id", "crawl_run_id::text", "BIGINT"),
    ("quantity_available", "quantity_available::text", "INTEGER"),
    ("is_on_special", "is_on_special::text", "BOOLEAN"),
    ("is_in_stock", "is_in_stock::text", "BOOLEAN"),
    ("thc_unit", "snapshot_unit(thc_unit)", "VARCHAR"),
    ("cbd_unit", "snapshot_unit(cbd_unit)", "VARCHAR"),
    ("price_rec", "price_rec::text", "DECIMAL(12,2)"),
    ("price_med", "price_med::text", "DECIMAL(12,2)"),
    ("price_rec_special", "price_rec_special::text", "DECIMAL(12,2)"),
    ("price_med_special", "price_med_special::text", "DECIMAL(12,2)"),
    ("thc_value", "thc_value::text", "DECIMAL(12,3)"),
    ("cbd_value", "cbd_value::text", "DECIMAL(12,3)"),
    ("specials", "specials::text", "VARCHAR"),
    ("status", "status", "VARCHAR"),
)
# the export's rows read back from the cold tier: the columns snapshot_history derives
UNIT_CODES = {"percent": "p", "mg": "m", "mg_per_g": "g"}
# the order the history queries read a month in: one product's rows lie together, by time
SORT_KEY = ("store_product_id", "captured_at")
