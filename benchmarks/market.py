"""Market API benchmark (docs/analytics.md, "Market analytics"): p50/p95 of GET /api/market and
GET /api/brands over HTTP, at the scale of benchmarks/history.py (2,000 stores × 400 products ×
30 crawls by default), against the real service (create_app under uvicorn on 127.0.0.1), one
client with a kept-alive connection, after the analytics refresh has rolled that history.

    python benchmarks/market.py                     # builds the history (as history.py does), then times
    python benchmarks/market.py --stores 200        # a tenth
    python benchmarks/history.py --keep && python benchmarks/market.py --reuse   # time history.py's kept database

The requests: /api/market for a random state (a random day of the history, compared with
--compare-days before, so that both days have rows), /api/brands (every state, limit 100),
/api/brands?state=XX, /api/market/states?category= (a weighed category: every state side by side)
and /api/products/{id}/history (a random canonical product's last 30 days across stores: every
store sells every product here, so a product's history has a row per store and day). Targets:
p95 <= 50 ms each. The machine may be shared: beside the wall-clock percentiles it prints two
figures that load moves far less, the CPU time per request (this process: client and server,
which runs in a thread of it) and each endpoint's statements' execution time in PostgreSQL
(median of EXPLAIN ANALYZE over the same parameters).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import random
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import psycopg  # noqa: E402
import uvicorn  # noqa: E402

from benchmarks import history  # noqa: E402
from cannaspider import settings  # noqa: E402
from cannaspider.db import database_url  # noqa: E402
from cannaspider.web import market_queries as q  # noqa: E402
from cannaspider.web.app import create_app  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(url: str) -> Iterator[http.client.HTTPConnection]:
    """The HTTP service over `url` on a free loopback port, in a thread, and a client of it."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(url, None, pool_max_size=settings.DB_POOL_MAX_SIZE),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        yield client
    finally:
        client.close()
        server.should_exit = True
        thread.join(10)


def timed(conn: http.client.HTTPConnection, paths: list[str]) -> tuple[float, float, float]:
    """p50 and p95 in ms over `paths` (after one warm-up request), and the CPU ms per request of
    this process (client and server); every answer must be a 200."""
    ms = []
    cpu = 0.0
    for i, path in enumerate([paths[0], *paths]):
        if i == 1:
            cpu = time.process_time()
        t = time.perf_counter()
        conn.request("GET", path)
        reply = conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            raise SystemExit(f"{path}: HTTP {reply.status} {body[:200]!r}")
        if i:
            ms.append((time.perf_counter() - t) * 1000)
    cpu_ms = (time.process_time() - cpu) * 1000 / len(ms)
    ms.sort()
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.95))], cpu_ms


def executed_ms(conn: psycopg.Connection[Any], statements: list[tuple[str, dict[str, Any]]], rounds: int = 25) -> float:
    """The median over `rounds` of the summed PostgreSQL execution time (EXPLAIN ANALYZE) of `statements`."""
    totals = []
    for _ in range(rounds):
        total = 0.0
        for query, params in statements:
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query, params).fetchone()
            assert plan is not None
            total += float(plan[0][0]["Execution Time"])
        totals.append(total)
    return statistics.median(totals)


def database_ms(
    conn: psycopg.Connection[Any], state: str, day: Any, compare_days: int, product: int
) -> dict[str, float]:
    """Each endpoint's statements, as its handler runs them, timed inside PostgreSQL."""
    then = day - timedelta(days=compare_days)
    market = {"state": state, "day": day, "then": then, "compare": compare_days, "movers": 10, "city": ""}
    return {
        "GET /api/market": executed_ms(
            conn,
            [
                (q.MARKET_DAY, market),
                (q.MARKET_BRANDS, market),
                (q.MARKET_MOVERS, market),
                (q.MARKET_CATEGORIES, market),
                (q.MARKET_SIZES, market),
            ],
        ),
        "GET /api/market/states": executed_ms(
            conn,
            [
                (q.STATES_TABLE, {"category": "Flower", "day": None}),
                (
                    q.STATES_SIZES,
                    {"states": list(history.STATES), "days": [day] * len(history.STATES), "category": "Flower"},
                ),
            ],
        ),
        "GET /api/products/{id}/history": executed_ms(
            conn,
            [
                (q.PRODUCT, (product,)),
                (q.PRODUCT_LAST_DAY, (product,)),
                (q.PRODUCT_DAY_SIZES, {"id": product, "since": day - timedelta(days=29), "until": day}),
                (q.PRODUCT_DAYS, {"id": product, "since": day - timedelta(days=29), "until": day}),
            ],
        ),
        "GET /api/brands": executed_ms(conn, [(q.BRANDS, {"state": None, "limit": 100})]),
        "GET /api/brands?state=": executed_ms(conn, [(q.BRANDS, {"state": state, "limit": 100})]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=2000)
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--crawls", type=int, default=30)
    parser.add_argument("--samples", type=int, default=200, help="requests timed per endpoint")
    parser.add_argument("--compare-days", type=int, default=3, help="/api/market's compare_days (history spans days)")
    parser.add_argument("--reuse", action="store_true", help=f"time the database {history.DBNAME} kept by history.py")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    if min(args.stores, args.products, args.crawls, args.samples, args.compare_days) <= 0:
        parser.error("--stores, --products, --crawls, --samples and --compare-days must be positive")

    if args.reuse:
        admin = database_url()
        url = psycopg.conninfo.make_conninfo(admin, dbname=history.DBNAME)
    else:
        admin, url = history.fresh_database()
        with psycopg.connect(url, autocommit=True) as conn:
            print(f"loading {args.stores:,} stores × {args.products:,} products × {args.crawls} crawls", flush=True)
            history.load(conn, args.stores, args.products, range(args.crawls))
        refresh_s, _, _ = asyncio.run(history.refresh(url))
        print(f"  analytics refresh {refresh_s:.1f} s", flush=True)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            days = [r[0] for r in conn.execute("SELECT DISTINCT day FROM market_state_daily ORDER BY 1").fetchall()]
            states = [r[0] for r in conn.execute("SELECT DISTINCT state FROM market_state_daily").fetchall()]
            brand_rows = conn.execute("SELECT count(*) FROM market_brand_daily").fetchone()
        if not days:
            raise SystemExit("no market analytics in the database: run the refresh first")
        rng = random.Random(7)
        later = [d for d in days if (d - days[0]).days >= args.compare_days] or days
        market = [
            f"/api/market?state={rng.choice(states)}&day={rng.choice(later)}&compare_days={args.compare_days}"
            for _ in range(args.samples)
        ]
        brands = ["/api/brands"] * args.samples
        brands_state = [f"/api/brands?state={rng.choice(states)}" for _ in range(args.samples)]
        # the states side by side (a weighed category, each state's last day) and a canonical
        # product's history across stores, 30 days (every store sells every product here: the
        # largest history a product can have, one row per store and day)
        states_table = [f"/api/market/states?category={rng.choice(history.CATEGORIES[:3])}"] * args.samples
        products = [rng.randint(1, args.products) for _ in range(args.samples)]
        product_history = [f"/api/products/{p}/history" for p in products]

        with serving(url) as client:
            client.request("GET", market[0])
            sample = json.loads(client.getresponse().read())
            results = {
                "GET /api/market": timed(client, market),
                "GET /api/brands": timed(client, brands),
                "GET /api/brands?state=": timed(client, brands_state),
                "GET /api/market/states": timed(client, states_table),
                "GET /api/products/{id}/history": timed(client, product_history),
            }
        with psycopg.connect(url, autocommit=True) as conn:
            in_db = database_ms(conn, rng.choice(states), later[-1], args.compare_days, products[0])
    finally:
        if not args.keep and not args.reuse:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{history.DBNAME}" WITH (FORCE)')

    print(
        f"\nmarket analytics: {len(days)} days, {len(states)} states, {brand_rows[0] if brand_rows else 0:,} "
        f"brand-days; a /api/market answer lists {len(sample['brands'])} brands, "
        f"{len(sample['categories'])} categories"
    )
    for name, (p50, p95, cpu_ms) in results.items():
        print(
            f"  {name:32} p50/p95 {p50:7.2f} / {p95:.2f} ms   (target p95 <= 50)   "
            f"CPU {cpu_ms:.2f} ms/request, in PostgreSQL {in_db[name]:.2f} ms"
        )


if __name__ == "__main__":
    main()
