"""Proxy bytes benchmark (issue 31): what a store crawl costs through a proxy billed by the byte.

A byte-counting forward proxy (sandbox/counting_proxy.py) is the crawl's only proxy, between the
crawl and the sandbox, whose GraphQL answers are compressed as Cloudflare's edge compresses them
(sandbox/edge_compression.py). Three crawls of the same stores, each counted:
- "first crawl": new stores, every product and image new (images downloaded);
- "resync": the same menus again, a steady-state daily crawl (every image stored already);
- "resync, uncompressed": the same with the sandbox's compression off, as the sandbox answered
  before issue 31 (what an API that does not compress, or a client that does not ask, would cost).
For each: requests and bytes through the proxy (sent and received, GraphQL and images apart), per
store and per product; the baseline is the compressed minimum, the products' JSON alone (each
store's product objects, compact, brotli at its best quality), and the ratio to it; and the bytes
the crawl's own stats counted (`cannaspider/bytes_received`, stealth/tls.py) beside what
the proxy counted.

    python benchmarks/proxy_bytes.py                         # 10 stores x 341 products
    python benchmarks/proxy_bytes.py --stores 2 --products 50

Everything talks to 127.0.0.1 only: the sandbox runs as a child process, the proxy on a thread
of this one, the database is DATABASE_URL's server or the embedded one.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import brotli

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database, crawl_env, register_proxy, seed, start_sandbox  # noqa: E402
from cannaspider.platforms.dutchie.operations import DEFAULT_PERSISTED_HASHES, FILTERED_PRODUCTS  # noqa: E402
from sandbox.counting_proxy import CountingProxy, Exchange  # noqa: E402

TARGET = 1.3  # resync bytes through the proxy / the brotli minimum of the products' JSON
STAT = re.compile(r"'(cannaspider/(?:bytes_received[^']*|stores_complete|stores_incomplete))': (\d+)")


@dataclass
class Tally:
    requests: int = 0
    sent: int = 0
    received: int = 0

    def add(self, e: Exchange) -> None:
        self.requests += 1
        self.sent += e.sent
        self.received += e.received

    @property
    def total(self) -> int:
        return self.sent + self.received


def tally(exchanges: list[Exchange]) -> dict[str, Tally]:
    out = {"graphql": Tally(), "images": Tally(), "other": Tally(), "all": Tally()}
    for e in exchanges:
        kind = "graphql" if e.operation else "images" if "/images/" in e.url else "other"
        out[kind].add(e)
        out["all"].add(e)
    return out


def crawl(env: dict, ids: list[int], images: str) -> dict[str, int]:
    args = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "product_resync",
        "-a",
        "dispensary_id=" + ",".join(map(str, ids)),
        "-s",
        "FEEDS={}",
        "-s",
        "LOG_LEVEL=INFO",
        "-s",
        f"IMAGES_STORE={images}",
    ]
    result = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0 or "Traceback" in result.stderr:
        raise SystemExit(f"crawl failed ({result.returncode}):\n{result.stderr[-3000:]}")
    stats = {name: int(value) for name, value in STAT.findall(result.stderr)}
    if stats.get("cannaspider/stores_complete") != len(ids):
        raise SystemExit(f"not every store's crawl completed: {stats}")
    return stats


def products_json_minimum(graphql: str, store_ids: list[str]) -> tuple[int, int, int]:
    """(products, bytes of their JSON, bytes of it brotli'd at quality 11), every store's product
    objects as one compact JSON array per store, fetched straight from the sandbox uncompressed."""
    count = raw = packed = 0
    for store in store_ids:
        products: list[dict] = []
        page = 0
        while True:
            variables = {"productsFilter": {"dispensaryId": store, "Status": "Active"}, "page": page, "perPage": 100}
            params = {
                "operationName": FILTERED_PRODUCTS,
                "variables": json.dumps(variables, separators=(",", ":")),
                "extensions": json.dumps(
                    {"persistedQuery": {"version": 1, "sha256Hash": DEFAULT_PERSISTED_HASHES[FILTERED_PRODUCTS]}}
                ),
            }
            request = urllib.request.Request(
                f"{graphql}?{urlencode(params)}", headers={"apollo-require-preflight": "true"}
            )
            answer = json.loads(urllib.request.urlopen(request, timeout=60).read())["data"]["filteredProducts"]
            products += answer["products"]
            page += 1
            if page >= answer["queryInfo"]["totalPages"]:
                break
        body = json.dumps(products, separators=(",", ":")).encode()
        count, raw, packed = count + len(products), raw + len(body), packed + len(brotli.compress(body, quality=11))
    return count, raw, packed


def control(base: str, path: str, body: dict) -> None:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=30).read()


def kb(n: float) -> str:
    return f"{n / 1000:,.1f} KB"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=10)
    parser.add_argument("--products", type=int, default=341, help="per store (issue 31 measured a 341-product store)")
    parser.add_argument("--database", default="cannaspider_bench_bytes", help="dropped and made anew")
    args = parser.parse_args()

    url = bench_database(args.database)
    sandbox, urls = start_sandbox(args.stores, args.products)
    proxy = CountingProxy().start()
    measured: dict[str, tuple[dict[str, Tally], dict[str, int]]] = {}
    try:
        ids = seed(url, urls["base"])
        register_proxy(url, proxy.url)
        env = crawl_env(url, urls)
        store_ids = [s["id"] for s in json.loads(urllib.request.urlopen(urls["base"] + "/_sandbox/stores").read())]
        products, raw, minimum = products_json_minimum(urls["graphql"], store_ids)
        with tempfile.TemporaryDirectory(prefix="proxy-bytes-images-") as images:
            for name in ("first crawl", "resync"):
                proxy.take()
                stats = crawl(env, ids, images)
                measured[name] = (tally(proxy.take()), stats)
            control(urls["base"], "/_sandbox/compression", {"on": False})
            stats = crawl(env, ids, images)
            measured["resync, uncompressed"] = (tally(proxy.take()), stats)
    finally:
        proxy.stop()
        sandbox.terminate()
        sandbox.wait(10)

    stores = len(ids)
    print(
        f"proxy bytes benchmark: {stores} stores x {args.products} products ({products} products), "
        "through a counting proxy"
    )
    print(
        f"  baseline: the products' JSON alone {kb(raw)}, brotli (quality 11) {kb(minimum)} = "
        f"{minimum / products:,.0f} B per product, {kb(minimum / stores)} per store"
    )
    header = f"  {'crawl':22} {'kind':8} {'requests':>8} {'sent':>12} {'received':>12} {'per store':>12}"
    header += f" {'per product':>12} {'/ minimum':>10}"
    print(header)
    for name, (tallies, _) in measured.items():
        for kind in ("graphql", "images", "other", "all"):
            t = tallies[kind]
            if not t.requests and kind == "other":
                continue
            print(
                f"  {name:22} {kind:8} {t.requests:8d} {kb(t.sent):>12} {kb(t.received):>12} "
                f"{kb(t.total / stores):>12} {t.total / products:9,.0f} B {t.total / minimum:10.2f}"
            )
    print(
        "  the crawl's own stats (cannaspider/bytes_received: headers + body before decoding) / the proxy's received:"
    )
    for name, (tallies, stats) in measured.items():
        counted = stats.get("cannaspider/bytes_received", 0)
        parts = ", ".join(
            f"{k.rsplit('/', 2)[-2]}/{k.rsplit('/', 1)[-1]} {kb(v)}"
            for k, v in sorted(stats.items())
            if k.startswith("cannaspider/bytes_received/")
        )
        received = tallies["all"].received
        print(f"    {name:22} {kb(counted)} / {kb(received)} = {counted / max(received, 1):.3f}   ({parts})")
    resync = measured["resync"][0]["all"].total / minimum
    print(f"  resync through the proxy / brotli minimum {resync:8.2f}   (target <= {TARGET})")
    print("targets met" if resync <= TARGET else "targets NOT met")


if __name__ == "__main__":
    main()
