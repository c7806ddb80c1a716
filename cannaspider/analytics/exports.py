"""The files `scrapy export` writes (cannaspider/commands/export.py; docs/analytics.md, "Exports"):
the history and the menus with the names beside the ids, as .jsonl, .csv or .parquet.

Rows stream from a server-side cursor (or, for an archived month, from its Parquet file) into a
`.partial` file beside the target, renamed over it when complete: a failed export leaves no half
file. Input or output the export cannot use is an ExportError, one line for the operator.

A module of its own, apart from the command's: it loads pyarrow and the history's cold tier
(DuckDB), and Scrapy imports every command module on each start of `scrapy`.
"""

from __future__ import annotations

import argparse
import csv
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, TypeAlias

import orjson
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq

from cannaspider.analytics import events as ev
from cannaspider.history.archive import add_months, archived, partitions
from cannaspider.history.columns import SNAPSHOT_COLUMNS, TIME
from cannaspider.history.reader import fetch_arrow, month_rows
from cannaspider.spreadsheet import FORMULA_LEADERS, text_cell

FORMATS = (".jsonl", ".csv", ".parquet")
CHUNK = 10_000  # rows a fetch and a Parquet row group: a month of snapshots never sits in memory

# The product's sizes as its menu names its options ('1g, 3.5g, 7g'; null when it has none): the
# snapshot's and the event's prices are the lowest option's (docs/analytics.md, "Unit prices").
SIZE = "nullif(array_to_string(ARRAY(SELECT o ->> 'option' FROM jsonb_array_elements(sp.options) o), ', '), '')"
# (name, SQL over store_products sp and dispensaries d, type): what a spreadsheet would join for
PRODUCT_LABELS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("store", "d.name", pa.string()),
    ("state", "d.state", pa.string()),
    ("city", "d.city", pa.string()),
    ("platform", "d.platform", pa.string()),
    ("product", "coalesce(sp.name, sp.name_raw)", pa.string()),
    ("brand", "sp.brand_name_raw", pa.string()),
    ("category", "sp.category", pa.string()),
    ("size", SIZE, pa.string()),
)


def select_list(labels: tuple[tuple[str, str, pa.DataType], ...]) -> str:
    return ", ".join(f"{expr} AS {name}" for name, expr, _ in labels)


LABELS = f"""
SELECT sp.id AS label_id, {select_list(PRODUCT_LABELS)}
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
"""

# events: the API's columns, with the product's size after its category
EVENT_COLUMNS = tuple(
    c for name, expr in ev.COLUMNS for c in ((name, expr), *((("size", SIZE),) if name == "category" else ()))
)
EVENT_TYPES = {
    "id": pa.int64(),
    "occurred_at": TIME,
    "type": pa.string(),
    "crawl_run_id": pa.int64(),
    "dispensary_id": pa.int64(),
    "store": pa.string(),
    "state": pa.string(),
    "city": pa.string(),
    "platform": pa.string(),
    "provider_product_id": pa.string(),
    "product": pa.string(),
    "brand": pa.string(),
    "category": pa.string(),
    "size": pa.string(),
    "canonical_product_id": pa.int64(),
    "canonical_brand_id": pa.int64(),
    **{name: pa.float64() for name, _ in ev.COLUMNS if name.startswith("price_")},
}
assert list(EVENT_TYPES) == [name for name, _ in EVENT_COLUMNS]

# snapshots: snapshot_history's columns, the product's names after its ids
SNAPSHOT_NAMES = [
    *list(SNAPSHOT_COLUMNS)[:3],
    *(name for name, _, _ in PRODUCT_LABELS),
    *list(SNAPSHOT_COLUMNS)[3:],
]
SNAPSHOT_TYPES = {**{n: t for n, (_, t) in SNAPSHOT_COLUMNS.items()}, **{n: t for n, _, t in PRODUCT_LABELS}}
SNAPSHOTS = f"""
SELECT {", ".join(SNAPSHOT_COLUMNS[n][0] if n in SNAPSHOT_COLUMNS else f"l.{n}" for n in SNAPSHOT_NAMES)}
  FROM snapshot_history h LEFT JOIN ({LABELS}) l ON l.label_id = h.store_product_id
 WHERE captured_at >= %(start)s AND captured_at < %(end)s
 ORDER BY captured_at, store_product_id
"""
# the same names for an archived month's rows, joined in DuckDB (history/reader.py)
COLD_LABELS = f"""
SELECT sp.id, sp.dispensary_id, sp.provider_product_id,
       {select_list(PRODUCT_LABELS)}
  FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id
"""
COLD_LABELS_SCHEMA = pa.schema(
    [("id", pa.int64()), ("dispensary_id", pa.int64()), ("provider_product_id", pa.string())]
    + [(name, t) for name, _, t in PRODUCT_LABELS]
)

# products: the menus as the database holds them now, with their unit prices and each option's
# prices (docs/analytics.md, "Unit prices")
PRODUCTS = f"""
SELECT sp.id AS store_product_id, sp.dispensary_id, {select_list(PRODUCT_LABELS[:4])},
       sp.provider_product_id, {select_list(PRODUCT_LABELS[4:])},
       sp.subcategory, sp.price_rec::float8 AS price_rec, sp.price_med::float8 AS price_med,
       sp.price_rec_special::float8 AS price_rec_special, sp.price_med_special::float8 AS price_med_special,
       sp.is_on_special, sp.unit_price::float8 AS unit_price, sp.unit_price_special::float8 AS unit_price_special,
       sp.unit_price_basis, sp.stock_status, sp.quantity_available,
       CASE WHEN sp.stock_status = 'oos' THEN es.oos_since END AS oos_since,
       sp.canonical_product_id, sp.canonical_brand_id, cb.name AS canonical_brand, sp.options::text AS options,
       sp.specials::text AS specials, sp.last_seen_at
  FROM store_products sp
  JOIN dispensaries d ON d.id = sp.dispensary_id
  LEFT JOIN product_event_state es ON es.store_product_id = sp.id
  LEFT JOIN brands cb ON cb.id = sp.canonical_brand_id
 WHERE (%(state)s::text IS NULL OR d.state = %(state)s::text)
   AND (%(dispensary_id)s::bigint IS NULL OR sp.dispensary_id = %(dispensary_id)s::bigint)
   AND (%(brand)s::text IS NULL OR lower(sp.brand_name_raw) = lower(%(brand)s::text)
        OR lower(cb.name) = lower(%(brand)s::text))
   AND (%(category)s::text IS NULL OR lower(sp.category) = lower(%(category)s::text))
 ORDER BY sp.dispensary_id, coalesce(sp.name, sp.name_raw), sp.id
"""

# PostgreSQL's types of the columns the products and market queries give, as Parquet's
ARROW_TYPES = {
    "int2": pa.int32(),
    "int4": pa.int32(),
    "int8": pa.int64(),
    "float8": pa.float64(),
    "text": pa.string(),
    "bool": pa.bool_(),
    "date": pa.date32(),
    "timestamptz": TIME,
}


class ExportError(Exception):
    """Input or output the export cannot use: one line for the operator."""


def parse_month(text: str | None) -> tuple[date, date]:
    try:
        start = datetime.strptime(text or "", "%Y-%m").date()
    except ValueError:
        raise ExportError(f"--month must be YYYY-MM, got {text!r}") from None
    return start, add_months(start, 1)


def parse_until(text: str) -> datetime:
    """--until: a date includes that day (the end is the next midnight, UTC); a time is the end."""
    try:
        moment = ev.parse_since(text)
    except ev.EventQueryError:
        raise ExportError(f"--until: not a date or an ISO 8601 time: {text[:40]!r}") from None
    return moment + timedelta(days=1) if len(text.strip()) == 10 else moment


def parse_range(opts: argparse.Namespace) -> tuple[datetime | None, datetime | None]:
    """[start, end) from --month or --since/--until (either may be None: open)."""
    if opts.month is not None:
        if opts.since or opts.until:
            raise ExportError("give --month or --since/--until, not both")
        first, after = parse_month(opts.month)
        return datetime.combine(first, time(), UTC), datetime.combine(after, time(), UTC)
    start = ev.parse_since(opts.since) if opts.since else None
    end = parse_until(opts.until) if opts.until else None
    if start is not None and end is not None and end <= start:
        raise ExportError("--until must be after --since")
    return start, end


def csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return text_cell(value)


FORMULA_FIRST = frozenset(FORMULA_LEADERS)
BOOL_TEXT = {True: "true", False: "false", None: None}


def csv_rows(chunk: list[tuple[Any, ...]], types: list[pa.DataType]) -> Iterator[tuple[Any, ...]]:
    """A chunk's rows as CSV cells, csv_value()'s, converted a column at a time by its type: a
    call per cell cost two thirds of a CSV export's time. Numbers go as they are and None as the
    csv module writes it, empty."""
    columns: list[Any] = list(zip(*chunk, strict=True))
    for i, kind in enumerate(types):
        column = columns[i]
        if pa.types.is_string(kind):
            columns[i] = [("'" + v) if v and v[0] in FORMULA_FIRST else v for v in column]
        elif pa.types.is_boolean(kind):
            columns[i] = [BOOL_TEXT[v] for v in column]
        elif pa.types.is_temporal(kind):
            columns[i] = [None if v is None else v.isoformat() for v in column]
        elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            columns[i] = [csv_value(v) for v in column]
    return zip(*columns, strict=True)


Chunk: TypeAlias = list[tuple[Any, ...]] | pa.RecordBatch  # rows from PostgreSQL, or Arrow's from the cold tier


def as_rows(chunk: Chunk) -> list[tuple[Any, ...]]:
    if isinstance(chunk, pa.RecordBatch):
        return list(zip(*(column.to_pylist() for column in chunk.columns), strict=True))
    return chunk


def write(path: Path, names: list[str], types: list[pa.DataType], chunks: Iterator[Chunk]) -> int:
    """Rows to `path` in the format of its extension, through a .partial file; returns the rows.
    Arrow batches go to Parquet as they are (cast to the export's types), never through Python."""
    partial = path.with_name(path.name + ".partial")
    rows = 0
    try:
        if path.suffix == ".parquet":
            schema = pa.schema(list(zip(names, types, strict=True)))
            with pq.ParquetWriter(partial, schema) as writer:
                for chunk in chunks:
                    if isinstance(chunk, pa.RecordBatch):
                        writer.write_table(pa.Table.from_batches([chunk]).rename_columns(names).cast(schema))
                        rows += chunk.num_rows
                        continue
                    columns = zip(*chunk, strict=True)
                    arrays = [pa.array(c, t) for c, t in zip(columns, types, strict=True)]
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                    rows += len(chunk)
        else:
            with open(partial, "w", newline="", encoding="utf-8") as out:
                table = csv.writer(out) if path.suffix == ".csv" else None
                if table is not None:
                    table.writerow(names)
                for batch in chunks:
                    chunk = as_rows(batch)
                    if not chunk:
                        continue
                    if table is not None:
                        table.writerows(csv_rows(chunk, types))
                    else:
                        out.write(
                            "".join(orjson.dumps(dict(zip(names, row, strict=True))).decode() + "\n" for row in chunk)
                        )
                    rows += len(chunk)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return rows


def output_path(text: str | None) -> Path:
    if not text:
        raise ExportError("give the file to write: -o FILE (.jsonl, .csv or .parquet)")
    path = Path(text)
    if path.suffix not in FORMATS:
        raise ExportError(f"{path.name}: the format follows the extension, one of {', '.join(FORMATS)}")
    folder = path.parent
    if not folder.is_dir():
        raise ExportError(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write {path}: the folder {folder} is not writable")
    return path


def snapshot_chunks(conn: psycopg.Connection[Any], start: datetime, end: datetime | None) -> Iterator[Chunk]:
    """The snapshots captured in [start, end), month by month from whichever tier holds the month
    (docs/history.md): an archived month from its file, the others from PostgreSQL."""
    cold = archived(conn)
    months = sorted(set(partitions(conn)) | set(cold))
    labels: pa.Table | None = None
    for month in months:
        first = datetime.combine(month, time(), UTC)
        after = datetime.combine(add_months(month, 1), time(), UTC)
        if after <= start or (end is not None and first >= end):
            continue
        low, high = max(start, first), after if end is None else min(end, after)
        listed = cold.get(month)
        if listed is not None:
            if labels is None:  # the products' names, read once for every archived month
                labels = fetch_arrow(conn, COLD_LABELS, COLD_LABELS_SCHEMA, CHUNK)
            path = Path(listed["store"]) / listed["file"]
            yield from month_rows(conn, path, SNAPSHOT_NAMES, CHUNK, start=low, end=high, products=labels)
            continue
        with conn.cursor(name=f"export_{month:%Y_%m}") as cur:  # server-side: rows arrive CHUNK at a time
            cur.itersize = CHUNK
            cur.execute(SNAPSHOTS, {"start": low, "end": high})
            yield from iter(lambda: cur.fetchmany(CHUNK), [])


def export_query(
    conn: psycopg.Connection[Any], path: Path, query: str, params: dict[str, Any]
) -> tuple[int, list[str]]:
    """A query's rows to `path`, the columns typed from PostgreSQL's description of them."""
    with conn.cursor(name="export") as cur:
        cur.itersize = CHUNK
        cur.execute(query, params)
        assert cur.description is not None
        names = [c.name for c in cur.description]
        kinds = [conn.adapters.types.get(c.type_code) for c in cur.description]
        types = [ARROW_TYPES[k.name] if k is not None else pa.string() for k in kinds]
        return write(path, names, types, iter(lambda: cur.fetchmany(CHUNK), [])), names
