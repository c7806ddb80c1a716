"""`scrapy export events|snapshots`: the history as files an analyst opens (docs/analytics.md,
"Exports").

    scrapy export events --since 2026-11-30 -o events.parquet [--state AZ] [--dispensary-id N]
                         [--brand NAME] [--type price_changed …]
    scrapy export snapshots --month 2026-11 -o snapshots-2026-11.parquet

The format follows the file's extension: `.jsonl` (one JSON object a line), `.csv` (a header row;
booleans `true`/`false`, empty for null, times ISO 8601, nested values as JSON text, a text that a
spreadsheet would run as a formula led by `'`: cannaspider/spreadsheet.py) or `.parquet`
(pyarrow, typed columns). Rows stream from a server-side cursor into a `.partial` file beside the
target, renamed over it when complete: a failed export leaves no half file. Bad input, and a
folder that cannot be written, is one `error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from cannaspider.analytics import events as ev
from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url
from cannaspider.history.columns import SNAPSHOT_COLUMNS, TIME
from cannaspider.history.reader import month_file, month_rows
from cannaspider.spreadsheet import text_cell

FORMATS = (".jsonl", ".csv", ".parquet")
CHUNK = 10_000  # rows a fetch and a Parquet row group: a month of snapshots never sits in memory

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
    "canonical_product_id": pa.int64(),
    "canonical_brand_id": pa.int64(),
    **{name: pa.float64() for name, _ in ev.COLUMNS if name.startswith("price_")},
}
assert list(EVENT_TYPES) == [name for name, _ in ev.COLUMNS]
SNAPSHOTS = f"""
SELECT {", ".join(expr for expr, _ in SNAPSHOT_COLUMNS.values())}
  FROM snapshot_history
 WHERE captured_at >= %(start)s AND captured_at < %(end)s
 ORDER BY captured_at, store_product_id
"""


class ExportError(Exception):
    """Input or output the export cannot use: one line for the operator."""


def parse_month(text: str | None) -> tuple[date, date]:
    try:
        start = datetime.strptime(text or "", "%Y-%m").date()
    except ValueError:
        raise ExportError(f"--month must be YYYY-MM, got {text!r}") from None
    return start, date(start.year + start.month // 12, start.month % 12 + 1, 1)


def csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return text_cell(value)


def write(path: Path, names: list[str], types: list[pa.DataType], chunks: Iterator[list[tuple[Any, ...]]]) -> int:
    """Rows to `path` in the format of its extension, through a .partial file; returns the rows."""
    partial = path.with_name(path.name + ".partial")
    rows = 0
    try:
        if path.suffix == ".parquet":
            schema = pa.schema(list(zip(names, types, strict=True)))
            with pq.ParquetWriter(partial, schema) as writer:
                for chunk in chunks:
                    columns = zip(*chunk, strict=True)
                    arrays = [pa.array(c, t) for c, t in zip(columns, types, strict=True)]
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                    rows += len(chunk)
        else:
            with open(partial, "w", newline="", encoding="utf-8") as out:
                table = csv.writer(out) if path.suffix == ".csv" else None
                if table is not None:
                    table.writerow(names)
                for chunk in chunks:
                    for row in chunk:
                        if table is not None:
                            table.writerow([csv_value(v) for v in row])
                        else:
                            out.write(orjson.dumps(dict(zip(names, row, strict=True))).decode() + "\n")
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


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return "events --since DATE -o FILE [filters] | snapshots --month YYYY-MM -o FILE"

    def short_desc(self) -> str:
        return "Export product events or a month of snapshots to .jsonl, .csv or .parquet"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", help="the file to write; its extension picks the format")
        parser.add_argument("--since", help="events: a date (UTC midnight) or an ISO 8601 time")
        parser.add_argument("--month", help="snapshots: the month, YYYY-MM (UTC)")
        parser.add_argument("--state", help="events: a two-letter state code")
        parser.add_argument("--dispensary-id", type=int, help="events: one store")
        parser.add_argument("--brand", help="events: a brand name (any case)")
        parser.add_argument("--type", action="append", default=[], help="events: an event type (repeatable)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            super().run(args, opts)
        except (ExportError, ev.EventQueryError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        what = args[0] if args else None
        if what not in ("events", "snapshots") or len(args) > 1:
            raise ExportError("export what? `scrapy export events …` or `scrapy export snapshots …`")
        path = output_path(opts.output)
        if what == "events":
            if not opts.since:
                raise ExportError("export events needs --since DATE")
            where = ev.EventFilter(
                state=opts.state,
                dispensary_id=opts.dispensary_id,
                brand=opts.brand,
                types=tuple(opts.type),
                since=ev.parse_since(opts.since),
            )
            query, params = ev.SELECT, ev.page_params(where, 0, None)
            names, types = list(EVENT_TYPES), list(EVENT_TYPES.values())
            month = None
        else:
            start, end = parse_month(opts.month)
            query, params = SNAPSHOTS, {"start": start, "end": end}
            names, types = list(SNAPSHOT_COLUMNS), [t for _, t in SNAPSHOT_COLUMNS.values()]
            month = start
        with connect(database_url(self.settings)) as conn:
            cold = month_file(conn, month) if month is not None else None
            if cold is not None:  # an archived month: the same rows, from its file (docs/history.md)
                rows = write(path, names, types, month_rows(conn, cold, names, CHUNK))
                print(f"{rows} {what} written to {path}")
                return
            with conn.cursor(name="export") as cur:  # server-side: rows arrive CHUNK at a time
                cur.itersize = CHUNK
                cur.execute(query, params)
                rows = write(path, names, types, iter(lambda: cur.fetchmany(CHUNK), []))
        print(f"{rows} {what} written to {path}")
