"""Stealth benchmark: the product crawl's products/s with the proxy + identity layer on (through
the sandbox's forward proxy, with credentials, a browser identity per store) vs. off (straight
to the sandbox), all measured in this one run, interleaved. Target: on / off >= 0.85.

    python benchmarks/stealth.py --stores 30 --products 300 --repeats 3 [--upstream]

"Off" removes the two stealth middlewares with Scrapy's generic `-s DOWNLOADER_MIDDLEWARES=…None`
(there is no setting that turns proxies off). "On" is measured twice: as configured (the claimed
browser's TLS handshake, curl_cffi: stealth/tls.py) and with Scrapy's own HTTP/1.1 handler
(`-s DOWNLOAD_HANDLERS=…`, no impersonation). `--upstream` adds scrapy-impersonate's own handler
(a curl session per request), to show what keeping sessions is worth. Everything talks to
127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database, crawl, seed, start_sandbox  # noqa: E402
from cannaspider import settings  # noqa: E402
from sandbox.forward_proxy import ForwardProxy  # noqa: E402

AUTH = ("bench", "b3nch@pw")
# `-s` replaces the project's whole dict, so each keeps the project's other middlewares (without
# UnitTrackingMiddleware no store's crawl ever closed, and "off" failed at every run)
OFF_ARGS = [
    "-s",
    "DOWNLOADER_MIDDLEWARES="
    + json.dumps({**settings.DOWNLOADER_MIDDLEWARES, "cannaspider.middlewares.stealth.StealthProxyMiddleware": None}),
    "-s",
    "SPIDER_MIDDLEWARES="
    + json.dumps(
        {**settings.SPIDER_MIDDLEWARES, "cannaspider.middlewares.proxy_required.ProxyRequiredMiddleware": None}
    ),
]


def handlers(path: str) -> list[str]:
    return ["-s", "DOWNLOAD_HANDLERS=" + json.dumps({"http": path, "https": path})]


OFF = "stealth off (direct)"
ON = "stealth on, TLS impersonated"
VARIANTS = (
    (OFF, OFF_ARGS),
    (ON, []),
    ("stealth on, Scrapy's handler", handlers("scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler")),
)
UPSTREAM = ("stealth on, scrapy-impersonate", handlers("scrapy_impersonate.ImpersonateDownloadHandler"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=30)
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="measurements per variant; the median is reported")
    parser.add_argument("--upstream", action="store_true", help="also measure scrapy-impersonate's own handler")
    args = parser.parse_args()

    url = bench_database("cannaspider_bench_stealth")
    sandbox, urls = start_sandbox(args.stores, args.products)
    proxy = ForwardProxy(*AUTH, name="bench").start()
    try:
        ids = seed(url, urls["base"])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO proxies (host, port, username, password) VALUES ('127.0.0.1', %s, %s, %s)",
                (proxy.port, *AUTH),
            )
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DUTCHIE_GRAPHQL_URL": urls["graphql"],
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        products = len(ids) * args.products
        # warm the sandbox's page cache (every store: a cold first crawl ran at ~5 % of the others'
        # speed and skewed whichever variant came first) and the OS file cache
        crawl(env, None, ids)
        variants = VARIANTS + ((UPSTREAM,) if args.upstream else ())
        measured: dict[str, list[float]] = {name: [] for name, _ in variants}
        for repeat in range(args.repeats):
            turn = repeat % len(variants)
            for name, extra in variants[turn:] + variants[:turn]:
                reset(url)
                run = crawl_with(env, ids, extra)
                if run["cannaspider/stores_complete"] != len(ids):
                    raise SystemExit(f"{name}: not every store completed: {run}")
                if (run["cannaspider/tls_impersonated"] > 0) != (name == ON):
                    raise SystemExit(f"{name}: impersonation not as expected: {run}")
                measured[name].append(products / run["elapsed_time_seconds"])
    finally:
        proxy.stop()
        sandbox.terminate()
        sandbox.wait(10)
    median = {name: sorted(v)[len(v) // 2] for name, v in measured.items()}
    print(f"stealth benchmark: {len(ids)} stores x {args.products} products, full pipeline; median of {args.repeats}")
    for name, values in measured.items():
        print(f"  {name:32} {median[name]:8.0f} products/s   (all: {', '.join(f'{v:.0f}' for v in values)})")
    for name in measured:
        if name != OFF:
            print(f"  {name + ' / off':43} {median[name] / median[OFF]:5.2f}" + ("   (target >= 0.85)" * (name == ON)))


def reset(url: str) -> None:
    """Each measured crawl starts from an empty history (snapshots live in product_snapshots since
    migration 011; store_product_snapshots is a view)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE product_snapshots, store_products, crawl_runs CASCADE")


def crawl_with(env: dict, ids: list[int], extra: list[str]) -> dict:
    args = [sys.executable, "-m", "scrapy", "crawl", "product_resync", "-a", "dispensary_id=" + ",".join(map(str, ids))]
    result = subprocess.run(
        [*args, "-s", "FEEDS={}", "-s", "LOG_LEVEL=INFO", *extra],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if result.returncode != 0 or "Traceback" in result.stderr:
        raise SystemExit(f"crawl failed:\n{result.stderr[-3000:]}")
    stats = {}
    for key in ("elapsed_time_seconds", "cannaspider/stores_complete", "cannaspider/tls_impersonated"):
        m = re.search(rf"'{re.escape(key)}': ([0-9.]+)", result.stderr)
        stats[key] = float(m.group(1)) if m else 0.0
    return stats


if __name__ == "__main__":
    main()
