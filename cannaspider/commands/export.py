"""`scrapy export events|snapshots|products|market`: the history and the menus as files an analyst
opens, each row carrying the names beside the ids (docs/analytics.md, "Exports").

    scrapy export events --since 2026-11-30 [--until 2026-12-06] -o events.parquet [--state AZ]
                         [--dispensary-id N] [--brand NAME] [--type price_changed …]
    scrapy export snapshots --month 2026-11 -o snapshots-2026-11.parquet
    scrapy export snapshots --since 2026-11-23 --until 2026-11-29 -o week.csv
    scrapy export products -o menus.csv [--state AZ] [--dispensary-id N] [--brand NAME] [--category C]
    scrapy export market --table brands|categories|states|movers -o brands.csv [--state AZ] [range]

A range is `--month YYYY-MM`, or `--since` and/or `--until` (a date, or an ISO 8601 time; without
an offset UTC): `--until` a date includes that whole day, a time is the first instant left out.

The format follows the file's extension: `.jsonl` (one JSON object a line), `.csv` (a header row;
booleans `true`/`false`, empty for null, times ISO 8601, nested values as JSON text, a text that a
spreadsheet would run as a formula led by `'`: cannaspider/spreadsheet.py) or `.parquet`
(pyarrow, typed columns). Rows stream from a server-side cursor into a `.partial` file beside the
target, renamed over it when complete: a failed export leaves no half file. Bad input, and a
folder that cannot be written, is one `error:` line and exit code 2.

Snapshots are read from both history tiers (docs/history.md): the range is cut at month
boundaries, and each month comes from its Parquet file when archived, else from PostgreSQL, in
order (by time, then product).

The files are written by cannaspider/analytics/exports.py, which loads pyarrow and DuckDB: an
export imports it when it runs, not with this module (Scrapy imports every command module on each
start of `scrapy`, whatever the command).
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from cannaspider.analytics import events as ev
from cannaspider.command_base import CannaspiderCommand
from cannaspider.db import connect, database_url

WHAT = ("events", "snapshots", "products", "market")

# market: the tables of the market roll (docs/analytics.md, "Market analytics"), by state and day,
# with the names of the brands and products they count
MARKET_RANGE = """
 WHERE (%(state)s::text IS NULL OR t.state = %(state)s::text)
   AND (%(start)s::date IS NULL OR t.day >= %(start)s::date) AND (%(end)s::date IS NULL OR t.day < %(end)s::date)
"""
MARKET = {
    "states": f"""
SELECT t.state, t.day, t.stores_crawled, t.products_seen, t.listed, t.price_changed, t.price_drops, t.price_rises,
       t.price_changes_implausible, t.specials_started, t.specials_ended, t.out_of_stock, t.back_in_stock,
       t.stores_by_platform::text AS stores_by_platform
  FROM market_state_daily t {MARKET_RANGE}
 ORDER BY t.state, t.day""",
    "categories": f"""
SELECT t.state, t.city, t.day, t.category, t.stores, t.products, t.on_special,
       t.price_per_g_p25::float8 AS price_per_g_p25, t.price_per_g_median::float8 AS price_per_g_median,
       t.price_per_g_p75::float8 AS price_per_g_p75, t.stores_by_platform::text AS stores_by_platform
  FROM market_category_daily t {MARKET_RANGE}
 ORDER BY t.state, t.day, t.category, t.city""",
    "brands": f"""
SELECT t.state, t.day, t.canonical_brand_id, b.name AS brand, t.stores, t.stores_crawled,
       (t.stores::float8 / nullif(t.stores_crawled, 0)) AS availability, t.products, t.store_products,
       t.median_price::float8 AS median_price, t.stores_by_platform::text AS stores_by_platform
  FROM market_brand_daily t LEFT JOIN brands b ON b.id = t.canonical_brand_id {MARKET_RANGE}
 ORDER BY t.state, t.day, t.stores DESC, b.name, t.canonical_brand_id""",
    "movers": f"""
SELECT t.state, t.day, t.kind, t.rank, t.event_id, t.crawl_run_id, t.dispensary_id, d.name AS store,
       d.platform, t.store_product_id, sp.provider_product_id, coalesce(sp.name, sp.name_raw) AS product,
       sp.brand_name_raw AS brand, sp.category, t.price_old::float8 AS price_old, t.price_new::float8 AS price_new,
       t.change_pct::float8 AS change_pct
  FROM market_movers t LEFT JOIN dispensaries d ON d.id = t.dispensary_id
  LEFT JOIN store_products sp ON sp.id = t.store_product_id {MARKET_RANGE}
 ORDER BY t.state, t.day, t.kind, t.rank""",
}


class Command(CannaspiderCommand):
    def syntax(self) -> str:
        return (
            "events --since DATE [--until DATE] -o FILE [filters] | snapshots (--month YYYY-MM | --since DATE "
            "[--until DATE]) -o FILE | products -o FILE [filters] | market --table T -o FILE [filters]"
        )

    def short_desc(self) -> str:
        return "Export events, snapshots, the current menus or the market tables to .jsonl, .csv or .parquet"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", help="the file to write; its extension picks the format")
        parser.add_argument("--since", help="the range's start: a date (UTC midnight) or an ISO 8601 time")
        parser.add_argument("--until", help="the range's end: a date (included) or an ISO 8601 time (excluded)")
        parser.add_argument("--month", help="the range as a month, YYYY-MM (UTC)")
        parser.add_argument("--state", help="a two-letter state code")
        parser.add_argument("--dispensary-id", type=int, help="events, products: one store")
        parser.add_argument("--brand", help="events, products: a brand name (any case)")
        parser.add_argument("--category", help="products: a category (any case)")
        parser.add_argument("--type", action="append", default=[], help="events: an event type (repeatable)")
        parser.add_argument("--table", choices=sorted(MARKET), help="market: which table")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from cannaspider.analytics.exports import ExportError  # noqa: PLC0415 - a command's start-up time (pyarrow)

        try:
            super().run(args, opts)
        except (ExportError, ev.EventQueryError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2

    def execute(self, args: list[str], opts: argparse.Namespace) -> None:
        from cannaspider.analytics.exports import (  # noqa: PLC0415 - a command's start-up time (pyarrow, DuckDB)
            CHUNK,
            EVENT_COLUMNS,
            EVENT_TYPES,
            PRODUCTS,
            SNAPSHOT_NAMES,
            SNAPSHOT_TYPES,
            ExportError,
            export_query,
            output_path,
            parse_range,
            snapshot_chunks,
            write,
        )

        what = args[0] if args else None
        if what not in WHAT or len(args) > 1:
            raise ExportError("export what? `scrapy export events|snapshots|products|market …`")
        path = output_path(opts.output)
        # the filters an export takes are checked as the events API checks them
        where = ev.EventFilter(
            state=opts.state, dispensary_id=opts.dispensary_id, brand=opts.brand, types=tuple(opts.type)
        )
        start, end = parse_range(opts) if what != "products" else (None, None)
        with connect(database_url(self.settings)) as conn:
            if what == "events":
                if start is None:
                    raise ExportError("export events needs --since DATE (or --month YYYY-MM)")
                params = {**ev.page_params(where, 0, None, until=end), "since": start}
                names, types = list(EVENT_TYPES), list(EVENT_TYPES.values())
                with conn.cursor(name="export") as cur:
                    cur.itersize = CHUNK
                    cur.execute(ev.select(EVENT_COLUMNS), params)
                    rows = write(path, names, types, iter(lambda: cur.fetchmany(CHUNK), []))
            elif what == "snapshots":
                if start is None:
                    raise ExportError("export snapshots needs --month YYYY-MM or --since DATE")
                types = [SNAPSHOT_TYPES[n] for n in SNAPSHOT_NAMES]
                rows = write(path, SNAPSHOT_NAMES, types, snapshot_chunks(conn, start, end))
            elif what == "products":
                params = {**where.params(), "category": opts.category}
                rows, _ = export_query(conn, path, PRODUCTS, params)
            else:
                if opts.table is None:
                    raise ExportError(f"export market needs --table, one of {', '.join(sorted(MARKET))}")
                params = {
                    "state": where.params()["state"],
                    "start": start.date() if start else None,
                    # a day is in the range when it begins before its end (an --until time mid-day keeps that day)
                    "end": (end - timedelta(microseconds=1)).date() + timedelta(days=1) if end else None,
                }
                rows, _ = export_query(conn, path, MARKET[opts.table], params)
                what = f"{opts.table} rows"
        print(f"{rows} {what} written to {path}")
