"""Reading the cold tier back (docs/history.md): a product's snapshots for the history API, a
month's (or the part of it in a range) for `scrapy export snapshots`, in the rows and types the
PostgreSQL queries give.

A product's read is the hot path (GET …/history, the dashboard's product page): each archived
month's file is sorted by product, so its row groups' min/max statistics of store_product_id name
the one or two groups that hold the product, and only those are decoded (pyarrow). The statistics
are read once per file and kept (a file never changes once listed; a new one has a new size or
mtime). A month's export is a scan: DuckDB reads the whole file, joins the products and sorts.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from psycopg import AsyncConnection, Connection

from cannaspider.history.archive import duck

# the history API's columns (dashboard_queries.HISTORY), from the lean row
PRODUCT_COLUMNS = (
    "captured_at",
    "crawl_run_id",
    "price_rec",
    "price_rec_special",
    "price_med",
    "is_on_special",
    "is_in_stock",
    "quantity_available",
)
LISTED = "SELECT month, store, file FROM history_archive ORDER BY month"
PRODUCT_IDS = "SELECT id FROM store_products WHERE dispensary_id = %s AND provider_product_id = %s"


@dataclass(frozen=True)
class _Index:
    """A file's footer and its row groups' store_product_id bounds (empty: unusable)."""

    metadata: pq.FileMetaData
    lows: list[int]
    highs: list[int]


_indexes: dict[tuple[str, int, int], _Index] = {}
_lock = threading.Lock()
# a year's months read side by side: pyarrow decodes without the GIL
_READERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cold-history")


def _index(path: Path) -> _Index:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    found = _indexes.get(key)
    if found is not None:
        return found
    metadata = pq.read_metadata(path)
    column = metadata.schema.names.index("store_product_id")
    lows: list[int] = []
    highs: list[int] = []
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            break
        lows.append(int(stats.min))
        highs.append(int(stats.max))
    if len(lows) < metadata.num_row_groups or lows != sorted(lows) or highs != sorted(highs):
        lows, highs = [], []  # not a file of ours as written (sorted, with statistics): read it whole
    index = _Index(metadata, lows, highs)
    with _lock:
        _indexes[key] = index
    return index


def _product_rows(path: Path, ids: list[int], columns: tuple[str, ...]) -> pa.Table | None:
    """The rows of products `ids` in one file (None: none of its row groups holds one)."""
    index = _index(path)
    if index.lows:
        # the file is sorted by product: both bounds rise with the group, so bisection finds the
        # groups whose range holds a product (a year of thousands of groups a month, in microseconds)
        groups = sorted(
            {i for p in ids for i in range(bisect.bisect_left(index.highs, p), bisect.bisect_right(index.lows, p))}
        )
    else:
        groups = list(range(index.metadata.num_row_groups))
    if not groups:
        return None
    # one group is a few hundred kilobytes decoded: pyarrow's own threads and read-ahead cost more
    # than they save, the files are read side by side instead (_READERS)
    table = pq.ParquetFile(path, metadata=index.metadata, pre_buffer=False).read_row_groups(
        groups, columns=["store_product_id", *columns], use_threads=False
    )
    mask = pc.is_in(table["store_product_id"], value_set=pa.array(ids, pa.int64()))
    return table.filter(mask).select(list(columns))


def product_table(files: list[Path], ids: list[int], columns: tuple[str, ...] = PRODUCT_COLUMNS) -> pa.Table:
    """The rows of products `ids` in `files`, ordered by time."""
    found = [t for t in _READERS.map(lambda path: _product_rows(path, ids, columns), files) if t is not None]
    if not found:
        return pa.table({c: pa.array([], pa.null()) for c in columns}).select(list(columns))
    return pa.concat_tables(found).sort_by("captured_at")


def history_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The history API's rows (dashboard_queries.HISTORY: prices as float8, stock_status derived)."""
    if table.num_rows == 0:
        return []
    columns: dict[str, list[Any]] = {}
    for name in table.column_names:
        column = table[name]
        if pa.types.is_decimal(column.type):
            # through the decimal's text, as PostgreSQL's numeric::float8 (correctly rounded); a
            # Decimal object per value costs ten times more
            columns[name] = [None if v is None else float(v) for v in pc.cast(column, pa.string()).to_pylist()]
        else:
            columns[name] = column.to_pylist()
    columns["stock_status"] = ["in_stock" if v else "oos" for v in columns["is_in_stock"]]
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]


async def cold_history(
    conn: AsyncConnection[Any], dispensary_id: int, provider_product_id: str, limit: int
) -> list[dict[str, Any]]:
    """A product's archived snapshots, oldest first, at most `limit` (the API's query reads the
    hot ones after these: every archived month is older than every partition)."""
    listed = await (await conn.execute(LISTED)).fetchall()
    if not listed:
        return []
    ids = [row[0] for row in await (await conn.execute(PRODUCT_IDS, (dispensary_id, provider_product_id))).fetchall()]
    if not ids:
        return []
    files = [Path(store) / file for _, store, file in listed]
    table = await asyncio.to_thread(product_table, files, ids)
    return history_rows(table.slice(0, limit))


def month_file(conn: Connection[Any], month: date) -> Path | None:
    """The archived file of `month`, or None when the month is in PostgreSQL."""
    row = conn.execute("SELECT store, file FROM history_archive WHERE month = %s", (month,)).fetchone()
    return Path(row[0]) / row[1] if row else None


PRODUCTS = "SELECT id, dispensary_id, provider_product_id FROM store_products"
PRODUCTS_SCHEMA = pa.schema([("id", pa.int64()), ("dispensary_id", pa.int64()), ("provider_product_id", pa.string())])


def fetch_arrow(conn: Connection[Any], query: str, schema: pa.Schema, chunk: int) -> pa.Table:
    """A query's rows as an Arrow table of `schema`, fetched `chunk` rows at a time (a fleet's
    millions of products never sit in memory as Python tuples)."""
    batches = []
    with conn.cursor(name="history_products") as cur:
        cur.itersize = chunk
        cur.execute(query)
        while rows := cur.fetchmany(chunk):
            columns = zip(*rows, strict=True)
            arrays = [pa.array(c, t) for c, t in zip(columns, schema.types, strict=True)]
            batches.append(pa.record_batch(arrays, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def month_rows(
    conn: Connection[Any],
    path: Path,
    names: list[str],
    chunk: int,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    products: pa.Table | None = None,
) -> Iterator[pa.RecordBatch]:
    """An archived month's rows in the export's columns and order (cannaspider/analytics/exports.py:
    snapshot_history's columns, by time then product), as Arrow batches of `chunk` rows, those
    captured in [start, end) when given.
    `products` is store_products' rows the snapshots are joined to by `id` (its other columns are
    the export's columns of that name: the store, the brand, …); by default its ids, stores and
    provider ids. A product deleted since (its store was deleted) is left out, as its snapshots in
    PostgreSQL were deleted with it."""
    if products is None:
        products = fetch_arrow(conn, PRODUCTS, PRODUCTS_SCHEMA, chunk)
    derived = {
        "stock_status": "CASE WHEN s.is_in_stock THEN 'in_stock' ELSE 'oos' END",
        **{n: f"CAST(s.{n} AS DOUBLE)" for n in names if n.startswith("price_") or n.endswith("_value")},
        **{n: f"p.{n}" for n in products.column_names if n != "id"},
    }
    select = ", ".join(f"{derived.get(n, 's.' + n)} AS {n}" for n in names)
    window = [b for b in (start, end) if b is not None]
    where = " AND ".join(
        cond for cond, bound in (("s.captured_at >= ?", start), ("s.captured_at < ?", end)) if bound is not None
    )
    with duck() as db:
        db.register("products", products)
        result = db.execute(
            f"SELECT {select} FROM read_parquet(?) s JOIN products p ON p.id = s.store_product_id"
            + (f" WHERE {where}" if where else "")
            + " ORDER BY s.captured_at, s.store_product_id",
            [str(path), *window],
        )
        batches = result.to_arrow_reader(chunk)
        assert batches is not None  # a query's result (None: a statement without rows)
        yield from batches
