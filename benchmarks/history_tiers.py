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

--clone-months makes the full scale affordable on a small machine (288 million snapshots through
PostgreSQL are ~50 min and ~30 GB here before a month is archived): only the first month and the
HOT months are written to PostgreSQL, and the first month goes to the cold tier through
`archive_month` (exported, verified row for row, listed, dropped). Every other cold month is a
copy of that file, made by archive.write_sorted (the archive's own writer: its columns, sort key,
zstd, row groups) with captured_at shifted by whole months and crawl_run_id by the month's first
crawl run (every month's crawl runs are written, so the ids are those a full load gives), and
listed in history_archive by archive.listing / list_month as archive_month lists a month (its
pg_bytes: the first month's partition's, the rows it would have held). The reader cannot tell a
copy from an archived month. The answers are checked equal to PostgreSQL's for the months loaded,
and each copied month's rows, product by product, equal to the first month's shifted. A copy's
values are the first month's (prices, specials and misses follow the crawl's number in a full
load), so its bytes are the first month's, not a month of its own:

    python benchmarks/history_tiers.py --clone-months      # 2,000 stores: 4 months through PostgreSQL, 8 copied

The history query's timed pass is run --rounds times, each printed with the load average and the
CPU it took per request (this process's, every thread's, and its PostgreSQL backend's): on a
shared machine the CPU is what load moves least.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# run as a script, this folder comes first on the path, and its queue.py would shadow the stdlib's
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import psycopg  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from benchmarks.cpu import own_cpu_s  # noqa: E402
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
from cannaspider.history.columns import ARCHIVE_COLUMNS  # noqa: E402
from cannaspider.web import dashboard_queries as q  # noqa: E402

DBNAME = "cannaspider_history_tiers_bench"
FIRST_MONTH = date(2025, 12, 1)


def load(url: str, stores: int, products: int, crawls: int, months: int, *, only: set[date] | None = None) -> int:
    """A year of crawls: CRAWLS a month, evenly spread, each store's products snapshotted. With
    `only`, the snapshots of those months alone (and their partitions); every month's crawl runs
    are written all the same, so each run has the id it has in a full load."""
    start = FIRST_MONTH.isoformat() + " 00:00+00"
    total = 0
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        for m in range(months):
            month = archive.add_months(FIRST_MONTH, m)
            if only is None or month in only:
                conn.execute("SELECT ensure_snapshot_partitions(%s::date, 1)", (month,))
        conn.execute(STORES, {"states": list(STATES), "nstates": len(STATES), "stores": stores})
        conn.execute(BRANDS)
        conn.execute(CANONICAL, {"categories": list(CATEGORIES), "products": products})
        conn.execute(PRODUCTS, {"categories": list(CATEGORIES), "products": products, "start": start})
        for m in range(months):
            month = archive.add_months(FIRST_MONTH, m)
            snapshots = only is None or month in only
            for c in range(crawls):
                at = conn.execute(
                    "SELECT %s::timestamptz + %s * interval '1 day' * 28 / %s",
                    (month.isoformat() + " 00:00+00", c, crawls),
                ).fetchone()
                assert at is not None
                crawl = m * crawls + c
                seen = products - products // 33
                conn.execute(RUNS, {"at": at[0], "crawl": crawl, "products": products, "seen": seen})
                if snapshots:
                    total += conn.execute(SNAPSHOTS, {"at": at[0], "crawl": crawl}).rowcount
            what = f"{total:,} snapshots" if snapshots else "crawl runs only (its snapshots are copied later)"
            print(f"  {month:%Y-%m}: {what}, {time.perf_counter() - t0:.0f} s", flush=True)
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


@dataclass(frozen=True)
class Timed:
    """One timed pass over the products: each read's milliseconds, the CPU it took per read (this
    process's, every thread's; the connection's PostgreSQL backend's, None when the server's
    processes are not readable here) and the load average around it."""

    ms: list[float]
    client_cpu_ms: float
    server_cpu_ms: float | None
    load: tuple[float, float]

    def line(self) -> str:
        server = "n/a" if self.server_cpu_ms is None else f"{self.server_cpu_ms:.1f}"
        return (
            f"p50 {pct(self.ms, 50):.1f} ms  p95 {pct(self.ms, 95):.1f} ms  "
            f"(CPU per read: client {self.client_cpu_ms:.1f} ms + PostgreSQL {server} ms; "
            f"load {self.load[0]:.1f} → {self.load[1]:.1f})"
        )


def time_history(
    url: str, products: list[tuple[int, str]], passes: int, rounds: int
) -> tuple[list[Timed], list[list[dict[str, Any]]]]:
    """Each product's history read `passes` - 1 times over (warming both tiers alike: PostgreSQL's
    buffers, the files' pages and footers), then `rounds` timed passes; their timings and the last
    pass's answers."""

    def server_cpu(pid: int) -> float | None:
        try:
            return own_cpu_s(pid)
        except OSError:  # a server on another machine
            return None

    async def run() -> tuple[list[Timed], list[list[dict[str, Any]]]]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            backend = conn.info.backend_pid
            for _ in range(passes - 1):
                for d, p in products:
                    await q.history(conn, d, p)
            timed, answers = [], []
            for _ in range(rounds):
                times, answers = [], []
                load0, cpu0, server0 = os.getloadavg()[0], time.process_time(), server_cpu(backend)
                for d, p in products:
                    t0 = time.perf_counter()
                    answers.append(await q.history(conn, d, p))
                    times.append((time.perf_counter() - t0) * 1000)
                cpu1, server1 = time.process_time(), server_cpu(backend)
                server_ms = None if server0 is None or server1 is None else (server1 - server0) * 1000 / len(products)
                load = (load0, os.getloadavg()[0])
                timed.append(Timed(times, (cpu1 - cpu0) * 1000 / len(products), server_ms, load))
            return timed, answers

    return asyncio.run(run())


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if len(values) > 1 else values[0]


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def span(months: list[date]) -> str:
    return f"{months[0]:%Y-%m}" + (f" … {months[-1]:%Y-%m}" if len(months) > 1 else "")


def shifted(at: datetime, months: int) -> datetime:
    """`at` (UTC) moved by whole months: the same day and time (the crawls fall on days 1-28)."""
    at = at.astimezone(UTC)
    month = archive.add_months(date(at.year, at.month, 1), months)
    return at.replace(year=month.year, month=month.month)


def month_of(at: datetime) -> date:
    at = at.astimezone(UTC)
    return date(at.year, at.month, 1)


def months_between(a: date, b: date) -> int:
    return (b.year - a.year) * 12 + b.month - a.month


def run_offsets(url: str, months: list[date]) -> dict[date, int]:
    """How far each month's crawl run ids lie from the first month's. load() writes a month's runs
    as one block of ids in the same order (crawl, then store), so a run's id is the first month's
    run of the same crawl and store plus this; checked, not assumed."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT date_trunc('month', started_at AT TIME ZONE 'UTC')::date, min(id), max(id), count(*) "
            "FROM crawl_runs GROUP BY 1"
        ).fetchall()
    blocks = {m: (int(lo), int(hi), int(n)) for m, lo, hi, n in rows}
    first_lo, _, first_n = blocks[months[0]]
    for m in months:
        lo, hi, n = blocks[m]
        assert n == first_n and hi - lo + 1 == n, f"{m:%Y-%m}'s crawl runs are not one block of ids like the first's"
    return {m: blocks[m][0] - first_lo for m in months}


def clone_month(url: str, folder: Path, source: date, month: date, run_offset: int, pg_bytes: int) -> int:
    """`month`'s cold file made from `source`'s archived one (times shifted by whole months, crawl
    runs by `run_offset`) by the archive's own writer, listed as archive_month lists a month (its
    checksums the file's; `pg_bytes`: the source's partition, as large as this month's would be).
    Returns its bytes."""
    months = months_between(source, month)
    columns = ", ".join(
        f"{n} + INTERVAL {months} MONTH AS {n}"
        if kind == "TIMESTAMPTZ"
        else f"{n} + {run_offset} AS {n}"
        if n == "crawl_run_id"
        else n
        for n, _, kind in ARCHIVE_COLUMNS
    )
    # DuckDB writes a column REQUIRED when its source's statistics show no NULL (a Parquet file's
    # do; the archive's CSV has none, so its columns are OPTIONAL): a union with a typed relation of
    # NULLs (of no rows) keeps every column nullable, as in the file archive_month wrote
    nulls = ", ".join(f"CAST(NULL AS {kind}) AS {n}" for n, _, kind in ARCHIVE_COLUMNS)
    src, path = folder / archive.file_name(source), folder / archive.file_name(month)
    rows = f"(SELECT {columns} FROM read_parquet(?) UNION ALL SELECT {nulls} FROM range(0))"
    archive.write_sorted(rows, path, [str(src)])
    # the same columns and types, rows and row groups as the archived file
    ours, theirs = pq.read_metadata(path), pq.read_metadata(src)
    assert pq.read_schema(path) == pq.read_schema(src), f"{path.name}: columns differ from {src.name}'s"
    assert (ours.num_rows, ours.num_row_groups) == (theirs.num_rows, theirs.num_row_groups), path.name
    listed = archive.listing(month, folder, archive.file_checksums(path))
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        archive.list_month(conn, listed, pg_bytes)
    # a partition the migrations made for the month (around today) goes as for any month archived
    assert archive.archive_month(url, month, folder, require_rolled=False) is None
    return int(listed["bytes"])


def check_answers(
    pg: list[list[dict[str, Any]]],
    tiered: list[list[dict[str, Any]]],
    loaded: set[date],
    source: date,
    clones: dict[date, int],
) -> int:
    """Each product's history read across the tiers: the months in PostgreSQL before equal to
    PostgreSQL's answer, each copied month equal to the source month's rows shifted. Returns the
    copied rows checked."""
    copied = 0
    for before, after in zip(pg, tiered, strict=True):
        assert [r for r in after if month_of(r["captured_at"]) in loaded] == before, "the tiers' answers differ"
        first = [r for r in after if month_of(r["captured_at"]) == source]
        for month, offset in clones.items():
            n = months_between(source, month)
            want = [
                {**r, "captured_at": shifted(r["captured_at"], n), "crawl_run_id": r["crawl_run_id"] + offset}
                for r in first
            ]
            assert [r for r in after if month_of(r["captured_at"]) == month] == want, f"{month:%Y-%m} differs"
            copied += len(want)
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=2000)
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--crawls", type=int, default=30, help="crawls of each store a month")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--hot", type=int, default=3, help="the newest months left in PostgreSQL")
    parser.add_argument("--samples", type=int, default=300, help="products whose history is read")
    parser.add_argument("--passes", type=int, default=2, help="reads of each product's history; the last is timed")
    parser.add_argument("--rounds", type=int, default=1, help="timed passes, each printed (a shared machine's load)")
    parser.add_argument(
        "--clone-months",
        action="store_true",
        help="archive the first month only; the other cold months are copies of its file (see above)",
    )
    parser.add_argument("--store", type=Path, help="the cold tier's folder (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    if args.months - args.hot < 1 or args.hot < 0:
        parser.error("--hot leaves no month to archive")

    months = [archive.add_months(FIRST_MONTH, m) for m in range(args.months)]
    cold = months[: args.months - args.hot]
    archived, cloned = (cold[:1], cold[1:]) if args.clone_months else (cold, [])
    loaded = [m for m in months if m not in cloned]
    admin, url = fresh_database(DBNAME)
    folder = args.store or Path(tempfile.mkdtemp(prefix="history-tiers-"))
    phases: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[phase] = now - clock
        clock = now

    try:
        print(f"{args.stores} stores × {args.products} products × {args.crawls} crawls × {args.months} months")
        if cloned:
            print(
                f"--clone-months: {len(loaded)} months through PostgreSQL ({', '.join(f'{m:%Y-%m}' for m in loaded)}); "
                f"{plural(len(cloned), 'cold month')} ({span(cloned)}) will be COPIES of "
                f"{cold[0]:%Y-%m}'s archived file, not crawled nor archived"
            )
        total = load(url, args.stores, args.products, args.crawls, args.months, only=set(loaded))
        lap("load")
        pg_bytes, pg_rows = partition_bytes(url, loaded)
        print(f"snapshots in PostgreSQL: {total:,}; {pg_bytes / pg_rows:.1f} B/snapshot (heap + indexes)")

        products = sample(url, args.samples)
        pg_timed, pg_answers = time_history(url, products, args.passes, args.rounds)
        lap("read, PostgreSQL")

        t0 = time.perf_counter()
        moved = [archive.archive_month(url, m, folder, require_rolled=False) for m in archived]
        took = time.perf_counter() - t0
        lap("archive")
        cold_rows = sum(m.rows for m in moved if m)
        cold_bytes = sum(m.bytes for m in moved if m)
        cold_pg_bytes = sum(m.pg_bytes for m in moved if m)
        print(
            f"archived {plural(len(archived), 'month')}, {cold_rows:,} snapshots in {took:.1f} s "
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

        offsets = run_offsets(url, months) if cloned else {}
        clones: dict[date, int] = {}
        clone_bytes = 0
        for month in cloned:
            clone_bytes += clone_month(url, folder, cold[0], month, offsets[month], cold_pg_bytes)
            clones[month] = offsets[month]
        if cloned:
            lap("copy")
            copies = cold_rows * len(cloned)
            print(
                f"COPIED, not archived: {plural(len(cloned), 'month')} ({span(cloned)}), {copies:,} "
                f"snapshots, are {cold[0]:%Y-%m}'s file with captured_at shifted by whole months and crawl_run_id "
                f"to the month's runs, written by archive.write_sorted and listed by archive.listing in "
                f"{phases['copy']:.1f} s; {clone_bytes / copies:.2f} B/snapshot (the first month's values)"
            )
            print(f"snapshots in the year: {total + copies:,} ({total:,} through PostgreSQL, {copies:,} copied)")

        tier_timed, tier_answers = time_history(url, products, args.passes, args.rounds)
        lap("read, two tiers")
        copied = check_answers(pg_answers, tier_answers, set(loaded), cold[0], clones)
        lap("check")
        rows = statistics.mean(len(a) for a in tier_answers)
        print(f"history of a product over {args.months} months ({rows:.0f} snapshots), {len(products)} products:")
        rounds = [f" round {i + 1}" if args.rounds > 1 else "" for i in range(args.rounds)]
        pg_label = f"PostgreSQL, {len(loaded)} months" if cloned else "all PostgreSQL"
        for timed, n in zip(pg_timed, rounds, strict=True):
            print(f"  {pg_label}{n}  {timed.line()}")
        tier_label = (
            f"{len(cold)} cold ({len(cloned)} copied) + {args.hot} hot"
            if cloned
            else f"{len(cold)} cold + {args.hot} hot"
        )
        if cloned:
            verdict = (
                f"answers identical to PostgreSQL's for its {len(loaded)} months, the copied months' "
                f"{copied:,} rows to {cold[0]:%Y-%m}'s shifted"
            )
        else:
            verdict = (
                f"answers identical ({pct(tier_timed[-1].ms, 95) / pct(pg_timed[-1].ms, 95):.2f}x all-PostgreSQL's p95)"
            )
        for i, (timed, n) in enumerate(zip(tier_timed, rounds, strict=True)):
            print(f"  {tier_label}{n}  {timed.line()}" + (f"; {verdict}" if i == args.rounds - 1 else ""))
        print("wall time: " + ", ".join(f"{phase} {s:.0f} s" for phase, s in phases.items()))
    finally:
        if args.store is None:
            shutil.rmtree(folder, ignore_errors=True)
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
