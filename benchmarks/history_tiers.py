"""The history in two tiers (docs/history.md), measured in one run: a year of snapshots
(STORES × PRODUCTS × CRAWLS a month × MONTHS, the shape benchmarks/history.py writes), then

  * bytes per snapshot in PostgreSQL (each month's partition, heap + indexes) and in the cold
    tier (the Parquet files `scrapy history archive` writes, zstd, sorted by product);
  * the product history query (dashboard_queries.history, what GET …/history runs) over the
    year, p50/p95 over random products: all months in PostgreSQL, then with all but the newest
    HOT months archived; the answers are checked equal, product by product;
  * the time the archive took per month, rows per second.

    python benchmarks/history_tiers.py                     # 2,000 × 400 × 30 × 12 = 288 million snapshots
    python benchmarks/history_tiers.py --stores 50         # 7.2 million, to iterate
    python benchmarks/history_tiers.py --stores 3 --products 10 --crawls 2 --months 3 --hot 1 --samples 5

The database is DATABASE_URL's server or the embedded one, a throwaway database dropped at the
end (--keep keeps it); the files go to a temporary folder (or --store DIR, left as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this folder comes first on the path, and its queue.py would shadow the stdlib's
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import psycopg  # noqa: E402

from benchmarks.history import (  # noqa: E402
    BRANDS,
    CANONICAL,
    CATEGORIES,
    PRODUCTS,
    RUNS,
    SNAPSHOTS,
    STATES,
    STORES,
    fresh_database,
)
from cannaspider.history import archive  # noqa: E402
from cannaspider.web import dashboard_queries as q  # noqa: E402

DBNAME = "cannaspider_history_tiers_bench"
FIRST_MONTH = date(2025, 12, 1)


def load(url: str, stores: int, products: int, crawls: int, months: int) -> int:
    """A year of crawls: CRAWLS a month, evenly spread, each store's products snapshotted."""
    start = FIRST_MONTH.isoformat() + " 00:00+00"
    total = 0
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        conn.execute("SELECT ensure_snapshot_partitions(%s::date, %s)", (FIRST_MONTH, months))
        conn.execute(STORES, {"states": list(STATES), "nstates": len(STATES), "stores": stores})
        conn.execute(BRANDS)
        conn.execute(CANONICAL, {"categories": list(CATEGORIES), "products": products})
        conn.execute(PRODUCTS, {"categories": list(CATEGORIES), "products": products, "start": start})
        for m in range(months):
            month = archive.add_months(FIRST_MONTH, m)
            for c in range(crawls):
                at = conn.execute(
                    "SELECT %s::timestamptz + %s * interval '1 day' * 28 / %s",
                    (month.isoformat() + " 00:00+00", c, crawls),
                ).fetchone()
                assert at is not None
                crawl = m * crawls + c
                seen = products - products // 33
                conn.execute(RUNS, {"at": at[0], "crawl": crawl, "products": products, "seen": seen})
                total += conn.execute(SNAPSHOTS, {"at": at[0], "crawl": crawl}).rowcount
            print(f"  {month:%Y-%m}: {total:,} snapshots, {time.perf_counter() - t0:.0f} s", flush=True)
        conn.execute("VACUUM (ANALYZE) product_snapshots")
        conn.execute("VACUUM (ANALYZE) store_products")
    return total


def partition_bytes(url: str, months: list[date]) -> tuple[int, int]:
    """(bytes with indexes, rows) of these months' partitions."""
    nbytes = rows = 0
    with psycopg.connect(url) as conn:
        for month in months:
            name = archive.partition_name(month)
            row = conn.execute(f"SELECT pg_total_relation_size(%s::regclass), count(*) FROM {name}", (name,)).fetchone()
            assert row is not None
            nbytes, rows = nbytes + int(row[0]), rows + int(row[1])
    return nbytes, rows


def sample(url: str, n: int, seed: int = 7) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT dispensary_id, provider_product_id FROM store_products ORDER BY id").fetchall()
    random.Random(seed).shuffle(rows)
    return [(int(d), str(p)) for d, p in rows[:n]]


def time_history(
    url: str, products: list[tuple[int, str]], passes: int
) -> tuple[list[float], list[list[dict[str, Any]]]]:
    """Each product's history read `passes` times over; the last pass's times (ms) and answers (the
    earlier ones warm both tiers alike: PostgreSQL's buffers, the files' pages and footers)."""

    async def run() -> tuple[list[float], list[list[dict[str, Any]]]]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for _ in range(passes):
                times, answers = [], []
                for d, p in products:
                    t0 = time.perf_counter()
                    answers.append(await q.history(conn, d, p))
                    times.append((time.perf_counter() - t0) * 1000)
            return times, answers

    return asyncio.run(run())


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=2000)
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--crawls", type=int, default=30, help="crawls of each store a month")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--hot", type=int, default=3, help="the newest months left in PostgreSQL")
    parser.add_argument("--samples", type=int, default=300, help="products whose history is read")
    parser.add_argument("--passes", type=int, default=2, help="reads of each product's history; the last is timed")
    parser.add_argument("--store", type=Path, help="the cold tier's folder (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    admin, url = fresh_database(DBNAME)
    folder = args.store or Path(tempfile.mkdtemp(prefix="history-tiers-"))
    try:
        print(f"{args.stores} stores × {args.products} products × {args.crawls} crawls × {args.months} months")
        total = load(url, args.stores, args.products, args.crawls, args.months)
        months = [archive.add_months(FIRST_MONTH, m) for m in range(args.months)]
        cold = months[: args.months - args.hot]
        pg_bytes, pg_rows = partition_bytes(url, months)
        print(f"snapshots: {total:,}; PostgreSQL {pg_bytes / pg_rows:.1f} B/snapshot (heap + indexes)")

        products = sample(url, args.samples)
        pg_times, pg_answers = time_history(url, products, args.passes)

        t0 = time.perf_counter()
        moved = [archive.archive_month(url, m, folder, require_rolled=False) for m in cold]
        took = time.perf_counter() - t0
        cold_rows = sum(m.rows for m in moved if m)
        cold_bytes = sum(m.bytes for m in moved if m)
        cold_pg_bytes = sum(m.pg_bytes for m in moved if m)
        print(
            f"archived {len(cold)} months, {cold_rows:,} snapshots in {took:.1f} s "
            f"({cold_rows / took:,.0f} snapshots/s, exported, verified and dropped)"
        )
        steps: dict[str, float] = {}
        for m in moved:
            for step, s in (m.seconds if m else {}).items():
                steps[step] = steps.get(step, 0.0) + s
        print("  of which " + ", ".join(f"{step} {s:.1f} s" for step, s in steps.items()))
        print(
            f"bytes per snapshot: PostgreSQL {cold_pg_bytes / cold_rows:.1f} B, "
            f"cold tier {cold_bytes / cold_rows:.2f} B "
            f"({cold_pg_bytes / cold_bytes:.0f}x smaller)"
        )

        tier_times, tier_answers = time_history(url, products, args.passes)
        same = sum(a == b for a, b in zip(pg_answers, tier_answers, strict=True))
        assert same == len(products), f"{len(products) - same} products' history differ across the tiers"
        rows = statistics.mean(len(a) for a in tier_answers)
        print(f"history of a product over {args.months} months ({rows:.0f} snapshots), {len(products)} products:")
        print(f"  all PostgreSQL      p50 {pct(pg_times, 50):.1f} ms  p95 {pct(pg_times, 95):.1f} ms")
        print(
            f"  {len(cold)} cold + {args.hot} hot   p50 {pct(tier_times, 50):.1f} ms  p95 {pct(tier_times, 95):.1f} ms"
            f"  ({pct(tier_times, 95) / pct(pg_times, 95):.2f}x all-PostgreSQL's p95); answers identical"
        )
    finally:
        if args.store is None:
            shutil.rmtree(folder, ignore_errors=True)
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
