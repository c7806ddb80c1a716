"""`scrapy export` measured (docs/analytics.md, "Exports"): rows per second of each export to each
format, the snapshots from PostgreSQL, from the cold tier and across both.

Two months of crawls (STORES × PRODUCTS × CRAWLS a month, the rows benchmarks/history.py writes,
with an option named on each product and a price event on a tenth of the crawls' products); the
first month is archived to Parquet (`scrapy history archive`), the second stays in PostgreSQL.
Each export runs the command's own code (cannaspider/analytics/exports.py) in this process, into a
temporary folder, and the rows it wrote are checked against a count in SQL.

    python benchmarks/export.py                 # 200 stores × 400 products × 30 crawls a month: 4.6 M snapshots
    python benchmarks/export.py --stores 50
    python benchmarks/export.py --stores 2 --products 10 --crawls 2

The database is DATABASE_URL's server or the embedded one, a throwaway database dropped at the
end (--keep keeps it).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this folder comes first on the path, and its queue.py would shadow the stdlib's
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import psycopg  # noqa: E402

from benchmarks.history import EVENTS, fresh_database  # noqa: E402
from benchmarks.history_tiers import FIRST_MONTH, load  # noqa: E402
from cannaspider.analytics import events as ev  # noqa: E402
from cannaspider.analytics import exports  # noqa: E402
from cannaspider.history import archive  # noqa: E402

DBNAME = "cannaspider_export_bench"
FORMATS = (".parquet", ".csv", ".jsonl")


def add_events_and_options(url: str) -> int:
    """Each crawl's price events (benchmarks/history.py's EVENTS) and a size on every product."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        conn.execute(
            "UPDATE store_products SET options = jsonb_build_array(jsonb_build_object("
            "'option', (ARRAY['1g', '1/8oz', '1/4oz'])[1 + id % 3], 'price_rec', price_rec))"
        )
        times = [row[0] for row in conn.execute("SELECT DISTINCT started_at FROM crawl_runs ORDER BY 1")]
        total = sum(conn.execute(EVENTS, {"at": at, "crawl": crawl}).rowcount for crawl, at in enumerate(times))
        conn.execute("VACUUM (ANALYZE) product_events")
        conn.execute("VACUUM (ANALYZE) store_products")
    return total


def timed(what: str, path: Path, expected: int, run: Callable[[], int]) -> None:
    t0 = time.perf_counter()
    rows = run()
    took = time.perf_counter() - t0
    assert rows == expected, f"{what}: {rows} rows written, {expected} in the database"
    size = path.stat().st_size
    print(
        f"  {what:<34} {path.suffix:<8} {rows:>11,} rows {took:>7.1f} s {rows / took:>10,.0f} rows/s "
        f"{size / rows:>6.1f} B/row"
    )
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--crawls", type=int, default=30, help="crawls of each store a month")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    admin, url = fresh_database(DBNAME)
    folder = Path(tempfile.mkdtemp(prefix="export-bench-"))
    try:
        print(f"{args.stores} stores × {args.products} products × {args.crawls} crawls × 2 months")
        snapshots = load(url, args.stores, args.products, args.crawls, 2)
        events = add_events_and_options(url)
        cold, hot = FIRST_MONTH, archive.add_months(FIRST_MONTH, 1)
        moved = archive.archive_month(url, cold, folder / "cold", require_rolled=False)
        assert moved is not None
        print(f"snapshots: {snapshots:,} ({moved.rows:,} archived: {cold:%Y-%m}); events: {events:,}")

        def at(month: object) -> datetime:
            return datetime.fromisoformat(f"{month}T00:00:00+00:00").astimezone(UTC)

        end = at(archive.add_months(hot, 1))
        names, types = exports.SNAPSHOT_NAMES, [exports.SNAPSHOT_TYPES[n] for n in exports.SNAPSHOT_NAMES]
        with psycopg.connect(url) as conn:
            count = conn.execute("SELECT count(*) FROM store_products").fetchone()
            products = int(count[0]) if count else 0

            def snapshots_run(out: Path, start: datetime, stop: datetime) -> int:
                return exports.write(out, names, types, exports.snapshot_chunks(conn, start, stop))

            def events_run(out: Path) -> int:
                params = {**ev.page_params(ev.EventFilter(), 0, None), "since": at(cold)}
                with conn.cursor(name="bench_events") as cur:
                    cur.itersize = exports.CHUNK
                    cur.execute(ev.select(exports.EVENT_COLUMNS), params)
                    chunks = iter(lambda: cur.fetchmany(exports.CHUNK), [])
                    return exports.write(out, list(exports.EVENT_TYPES), list(exports.EVENT_TYPES.values()), chunks)

            def products_run(out: Path) -> int:
                params = {**ev.EventFilter().params(), "category": None}
                return exports.export_query(conn, out, exports.PRODUCTS, params)[0]

            for ext in FORMATS:
                out = folder / f"out{ext}"
                for what, start, stop, rows in (
                    (f"snapshots {cold:%Y-%m} (cold tier)", at(cold), at(hot), moved.rows),
                    (f"snapshots {hot:%Y-%m} (PostgreSQL)", at(hot), end, snapshots - moved.rows),
                    ("snapshots, both months", at(cold), end, snapshots),
                ):
                    timed(what, out, rows, partial(snapshots_run, out, start, stop))
                timed("events, both months", out, events, partial(events_run, out))
                timed("products (the menus now)", out, products, partial(products_run, out))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
