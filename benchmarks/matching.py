"""Matching benchmark: how well one crawl of the sandbox's Dutchie and Jane stores groups their
products into canonical brands and products (docs/analytics.md, "Across platforms").

The Jane sandbox sells the Dutchie catalog's library products under Jane's spellings (its weights,
its kinds, the brand in capitals or lower case, "Co." written "Company", the brand in front of the
name, the size behind it: sandbox/jane_api.py), and knows what each product really is
(JaneCatalog.truth, Catalog.truth). After a real crawl of every store through the whole pipeline,
sandbox/matching.py counts pairs of store products: precision is the share of pairs put in one
canonical group that truly are one, recall the share of truly-same pairs put in one. Printed for
all pairs and for the pairs of a Dutchie store's product and a Jane store's (across platforms).

    python benchmarks/matching.py                         # 6 Dutchie + 6 Jane stores, 120-260 products
    python benchmarks/matching.py --stores 3 --products 40

Everything talks to 127.0.0.1 only: the sandbox runs as a child process, the database is
DATABASE_URL's server or the embedded one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database, crawl, crawl_env, register_proxy, seed, seed_jane  # noqa: E402
from sandbox.catalog import Catalog, CatalogConfig  # noqa: E402
from sandbox.jane_api import JaneCatalog  # noqa: E402
from sandbox.matching import measure, measure_across  # noqa: E402


def start_sandbox(config: CatalogConfig) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--port",
            "0",
            "--firecrawl-port",
            "0",
            "--seed",
            str(config.seed),
            "--states",
            ",".join(config.states),
            "--stores-per-state",
            str(config.stores_per_state),
            "--min-products",
            str(config.min_products),
            "--max-products",
            str(config.max_products),
            "--jane-stores-per-state",
            str(config.jane_stores_per_state),
            "--proxy",  # Dutchie is only crawled through proxies (docs/stealth.md)
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=6, help="Dutchie stores, and as many Jane stores (one state)")
    parser.add_argument("--products", type=int, default=0, help="products per store (0: the sandbox's 120-260)")
    parser.add_argument("--database", default="cannaspider_bench_match", help="dropped and made anew")
    args = parser.parse_args()
    low, high = (args.products, args.products) if args.products else (120, 260)
    config = CatalogConfig(
        states=("AZ",),
        stores_per_state=args.stores,
        min_products=low,
        max_products=high,
        jane_stores_per_state=args.stores,
    )
    url = bench_database(args.database)
    sandbox, urls = start_sandbox(config)
    try:
        ids = seed(url, urls["base"]) + seed_jane(url, urls["base"])
        register_proxy(url, urls["proxy"])
        stats = crawl(crawl_env(url, urls), None, ids)  # the project's whole pipeline
        with psycopg.connect(url) as conn:
            catalog, jane = Catalog(config), JaneCatalog(config)
            brands, products = measure(conn, catalog, jane)
            brands_x, products_x = measure_across(conn, catalog, jane)
        scraped, complete = int(stats["item_scraped_count"]), int(stats["cannaspider/stores_complete"])
        stores = f"{args.stores} Dutchie + {args.stores} Jane stores"
        print(f"matching: {stores}, one crawl ({scraped} products, {complete} stores complete)")
        print("all pairs:")
        print("  " + brands.line("brands"))
        print("  " + products.line("products"))
        print("across platforms (a Dutchie store's product and a Jane store's):")
        print("  " + brands_x.line("brands"))
        print("  " + products_x.line("products"))
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)


if __name__ == "__main__":
    main()
