"""The analyst's endpoints and pages (docs/analytics.md, "Specials" and "Finding a brand"): p50/p95
of GET /api/specials, /api/brands?q=, /api/brands/{id}/stores, /api/brands/{id}/market,
/api/brands/{id}, a store's products filtered by canonical brand, and the dashboard's specials and
brand pages (GET /dashboard/specials, /dashboard/brands/{id}), over HTTP against the real service
(create_app under uvicorn on 127.0.0.1, one kept-alive client), at the scale of
benchmarks/history.py (2,000 stores × 400 products by default) after the analytics refresh.

    python benchmarks/analyst.py                    # 2,000 stores × 400 products × 3 crawls, then times
    python benchmarks/analyst.py --stores 200       # a tenth
    python benchmarks/analyst.py --keep             # keep the database; then --reuse times it again
                                                    # (after applying the migrations since it was kept)

The history is history.py's (its products, brands, snapshots and events), with a seventh of the
products on special (a sale by category, every third also a "Buy 2 get 1"), a special_started event
for half of those, and 3,000 more brand names (accented, never carried) for the search to wade
through. Target: p95 <= 50 ms each. The machine may be shared: beside the wall-clock percentiles it
prints the CPU time per request of this process (client and server) and each endpoint's statements'
execution time inside PostgreSQL (median of EXPLAIN ANALYZE), which load moves far less; for the
endpoints of one brand, over BRANDS_TIMED of the brands requested, with the slowest brand's median
beside it (a brand's figures can differ from another's: its events, its size).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]

import psycopg  # noqa: E402

from benchmarks import history  # noqa: E402
from benchmarks.market import executed_ms, serving, timed  # noqa: E402
from cannaspider.db import database_url, migrations  # noqa: E402
from cannaspider.web import brands, specials  # noqa: E402
from cannaspider.web import dashboard_queries as dq  # noqa: E402
from cannaspider.web import market_queries as mq  # noqa: E402

DBNAME = "cannaspider_analyst_bench"
BRANDS_TIMED = 6  # brands whose statements are timed inside PostgreSQL, per endpoint of one brand

SPECIALS = """
UPDATE store_products SET is_on_special = true, price_rec_special = round(price_rec * 0.8, 2),
       unit_price_special = round(unit_price * 0.8, 4),
       specials = CASE WHEN id % 3 = 0
            THEN jsonb_build_array(
                     jsonb_build_object('name', '20% off ' || category, 'type', 'sale', 'discount', 20,
                                        'percent_discount', true),
                     '{"name": "Buy 2 get 1", "type": "bogo", "required_quantity": 2}'::jsonb)
            ELSE jsonb_build_array(jsonb_build_object('name', '20% off ' || category, 'type', 'sale', 'discount', 20,
                                                      'percent_discount', true)) END
 WHERE id % 7 = 0
"""
SPECIAL_EVENTS = """
INSERT INTO product_events (occurred_at, crawl_run_id, dispensary_id, store_product_id, type, price_rec)
SELECT r.started_at, r.id, sp.dispensary_id, sp.id, 'special_started', sp.price_rec
  FROM store_products sp
  JOIN LATERAL (SELECT id, started_at FROM crawl_runs c WHERE c.dispensary_id = sp.dispensary_id
                 ORDER BY started_at DESC LIMIT 1) r ON true
 WHERE sp.id % 14 = 0
"""
MORE_BRANDS = """
INSERT INTO brands (id, key, name, normalized_name)
SELECT 1000 + g, 'n:marca ' || g, 'Marca Ñandú ' || g, 'marca nandu ' || g FROM generate_series(1, 3000) g
"""


def build(url: str, stores: int, products: int, crawls: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        print(f"loading {stores:,} stores × {products:,} products × {crawls} crawls", flush=True)
        history.load(conn, stores, products, range(crawls))
        conn.execute(SPECIALS)
        conn.execute(SPECIAL_EVENTS)
        conn.execute(MORE_BRANDS)
        conn.execute("VACUUM (ANALYZE) store_products")
        conn.execute("VACUUM (ANALYZE) brands")
    refresh_s, _, _ = asyncio.run(history.refresh(url))
    print(f"  analytics refresh {refresh_s:.1f} s", flush=True)


def requests(conn: psycopg.Connection[Any], samples: int) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The paths timed per endpoint (random states, stores and brands of the database), and one
    set of parameters for the in-database timing."""
    rng = random.Random(7)
    states = [r[0] for r in conn.execute("SELECT DISTINCT state FROM dispensaries ORDER BY 1")]
    store_ids = [r[0] for r in conn.execute("SELECT id FROM dispensaries ORDER BY id")]
    brand_ids = [r[0] for r in conn.execute("SELECT DISTINCT brand_id FROM market_brands_now ORDER BY 1")]
    queries = ["brand", "brand 1", "BRAND 4", "marca nandu 12", "ÑANDÚ 7", "brand 59"]
    paths = {
        "GET /api/specials": ["/api/specials"] * samples,
        "GET /api/specials?state=": [f"/api/specials?state={rng.choice(states)}" for _ in range(samples)],
        "GET /api/specials?store=": [f"/api/specials?store={rng.choice(store_ids)}" for _ in range(samples)],
        "GET /api/specials?brand=&state=": [
            f"/api/specials?brand={rng.choice(brand_ids)}&state={rng.choice(states)}" for _ in range(samples)
        ],
        "GET /api/brands?q=": [f"/api/brands?q={quote(rng.choice(queries))}" for _ in range(samples)],
        "GET /api/brands/{id}/stores?state=": [
            f"/api/brands/{rng.choice(brand_ids)}/stores?state={rng.choice(states)}" for _ in range(samples)
        ],
        "GET /api/brands/{id}/market": [f"/api/brands/{rng.choice(brand_ids)}/market" for _ in range(samples)],
        "GET /api/brands/{id}": [f"/api/brands/{rng.choice(brand_ids)}" for _ in range(samples)],
        "GET /api/stores/{id}/products?brand_id=": [
            f"/api/stores/{rng.choice(store_ids)}/products?brand_id={rng.choice(brand_ids)}" for _ in range(samples)
        ],
    }
    one = {"state": rng.choice(states), "store": rng.choice(store_ids), "brand": rng.choice(brand_ids)}
    # the pages, drawn after the rest so that the endpoints' requests stay those measured before them
    paths["GET /dashboard/specials"] = ["/dashboard/specials"] * samples
    paths["GET /dashboard/brands/{id}"] = [f"/dashboard/brands/{rng.choice(brand_ids)}" for _ in range(samples)]
    one["brands"] = [one["brand"], *rng.sample(brand_ids, min(len(brand_ids), BRANDS_TIMED))][:BRANDS_TIMED]
    return paths, one


def brand_events(conn: psycopg.Connection[Any], brand: int, limit: int = 50) -> list[tuple[str, Any]]:
    """A brand's events as brands.brand_events() reads them: its size, then the query for it."""
    size = conn.execute(brands.BRAND_SIZE, (brand, brands.SMALL_BRAND + 1)).fetchone()
    query = brands.EVENTS_OF_FEW if size and size[0] <= brands.SMALL_BRAND else brands.EVENTS
    return [
        (brands.BRAND_SIZE, (brand, brands.SMALL_BRAND + 1)),
        (query, {"b": brand, "limit": limit, "window": brands.EVENTS_WINDOW}),
    ]


def brand_stores(conn: psycopg.Connection[Any], brand: int, state: str | None, limit: int) -> list[tuple[str, Any]]:
    """A brand's store products as brands.stores() reads them: in stock, then out of stock if room is left."""
    statements: list[tuple[str, Any]] = []
    for status in brands.STOCK_ORDER:
        params = {"b": brand, "state": state, "stock": status, "limit": limit}
        statements.append((brands.STORES, params))
        limit -= len(conn.execute(brands.STORES, params).fetchall())
        if limit <= 0:
            break
    return statements


def brand_statements(conn: psycopg.Connection[Any], brand: int, last: Any) -> dict[str, list[tuple[str, Any]]]:
    """The statements of the endpoints and the page of one brand, as their handlers run them."""
    b = {"b": brand}
    exists = [(brands.EXISTS, (brand,))]
    figures = [(mq.BRAND, (brand,)), (mq.BRAND_STATES, b), (mq.BRAND_CATEGORIES, (brand,))]
    market = [
        (LAST_DAY, None),
        (brands.AVAILABILITY, {**b, "days": 28, "until": last}),
        (brands.SHELF, b),
        *brand_events(conn, brand),
    ]
    return {
        "GET /api/brands/{id}/market": exists + market,
        "GET /api/brands/{id}": figures,
        "GET /dashboard/brands/{id}": figures + brand_stores(conn, brand, None, brands.STORES_SHOWN) + market,
    }


LAST_DAY = "SELECT max(day) FROM market_state_daily"


def database_ms(conn: psycopg.Connection[Any], p: dict[str, Any]) -> dict[str, tuple[float, float | None]]:
    """Each endpoint's statements, as its handler runs them, timed inside PostgreSQL: the median and,
    for the endpoints of one brand, the slowest of the brands' medians (else None)."""

    def special(**kw: Any) -> dict[str, Any]:
        return {"state": None, "store": None, "brand": None, "category": None, "limit": 100, "covers": 10, **kw}

    def listing(**kw: Any) -> list[tuple[str, dict[str, Any]]]:
        """As specials.specials() runs them: the market's or a state's figures from the view."""
        params = special(**kw)
        if params["store"] is None and params["brand"] is None:
            return [(specials.TOTALS_NOW, params), (specials.DEALS, params), (specials.CATEGORIES_NOW, params)]
        return [(specials.TOTALS, params), (specials.DEALS, params), (specials.CATEGORIES, params)]

    last = conn.execute(LAST_DAY).fetchone()
    search = {"state": None, "limit": 100, "prefix": "brand 1%", "inside": "%brand 1%"}
    per_brand: dict[str, list[float]] = {}
    for brand in p["brands"]:
        for name, statements in brand_statements(conn, brand, last[0] if last else None).items():
            per_brand.setdefault(name, []).append(executed_ms(conn, statements, rounds=3))
    page = special(limit=specials.DEALS_SHOWN, covers=specials.COVERS_SHOWN)
    single = {
        "GET /api/specials": executed_ms(conn, listing(), rounds=5),
        "GET /api/specials?state=": executed_ms(conn, listing(state=p["state"]), rounds=5),
        "GET /api/specials?store=": executed_ms(conn, listing(store=p["store"]), rounds=5),
        "GET /api/specials?brand=&state=": executed_ms(conn, listing(brand=p["brand"], state=p["state"]), rounds=5),
        "GET /api/brands?q=": executed_ms(conn, [(mq.BRANDS_SEARCH, search)], rounds=5),
        "GET /api/brands/{id}/stores?state=": executed_ms(
            conn, [(brands.EXISTS, (p["brand"],)), *brand_stores(conn, p["brand"], p["state"], 500)], rounds=5
        ),
        "GET /api/stores/{id}/products?brand_id=": executed_ms(
            conn,
            [
                (dq.FACETS, {"d": p["store"]}),
                (
                    dq.PRODUCTS,
                    {"d": p["store"], "brand_ids": [p["brand"]], "category": None, "stock": None, "limit": 1000},
                ),
            ],
            rounds=5,
        ),
        "GET /dashboard/specials": executed_ms(
            conn,
            [
                (specials.TOTALS_NOW, page),
                (specials.DEALS, page),
                (specials.CATEGORIES_NOW, page),
                (specials.STATES, None),
            ],
            rounds=5,
        ),
    }
    timed_ms: dict[str, tuple[float, float | None]] = {name: (ms, None) for name, ms in single.items()}
    for name, medians in per_brand.items():
        timed_ms[name] = (statistics.median(medians), max(medians))
    return timed_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=2000)
    parser.add_argument("--products", type=int, default=400)
    parser.add_argument("--crawls", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200, help="requests timed per endpoint")
    parser.add_argument("--reuse", action="store_true", help=f"time the database {DBNAME} kept by --keep")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    if min(args.stores, args.products, args.crawls, args.samples) <= 0:
        parser.error("--stores, --products, --crawls and --samples must be positive")
    admin = database_url()
    if args.reuse:
        url = psycopg.conninfo.make_conninfo(admin, dbname=DBNAME)
    else:
        admin, url = history.fresh_database(DBNAME)
        build(url, args.stores, args.products, args.crawls)
    try:
        if args.reuse:  # the migrations since it was kept
            migrations.apply(url, log=print)
        with psycopg.connect(url, autocommit=True) as conn:
            paths, one = requests(conn, args.samples)
            on_special = conn.execute("SELECT count(*) FROM store_products WHERE is_on_special").fetchone()
        with serving(url) as client:
            results = {name: timed(client, endpoint_paths) for name, endpoint_paths in paths.items()}
        with psycopg.connect(url, autocommit=True) as conn:
            in_db = database_ms(conn, one)
    finally:
        if not args.keep and not args.reuse:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')
    print(f"\n{args.stores:,} stores × {args.products:,} products, {on_special[0] if on_special else 0:,} on special")
    for name, (p50, p95, cpu_ms) in results.items():
        median, slowest = in_db[name]
        brands_ms = "" if slowest is None else f" (slowest of {len(one['brands'])} brands {slowest:.2f} ms)"
        print(
            f"  {name:40} p50/p95 {p50:7.2f} / {p95:7.2f} ms   (target p95 <= 50)   "
            f"CPU {cpu_ms:.2f} ms/request, in PostgreSQL {median:.2f} ms{brands_ms}"
        )


if __name__ == "__main__":
    main()
