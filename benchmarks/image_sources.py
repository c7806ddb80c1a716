"""Image downloads across stores that share a catalogue (issue 31, docs/images.md "One download per
source"): N stores of a chain list the same M product images, crawled by two crawlers at once (two
nodes, half the stores each), then all stores again (the next crawl). Printed: the downloads the
sandbox's image CDN served, the distinct URLs, and the repeated downloads (downloads − distinct
URLs; target 0), beside what the per-store layout before cost (one download per store and image).

    python benchmarks/image_sources.py                       # 20 stores × 200 shared images
    python benchmarks/image_sources.py --stores 50 --products 400

The crawlers are the real item pipelines (ProductWriterPipeline, ProductImagesPipeline: the claim,
the webp conversion, the store, the batched path updates) over the real database, fetching from
the sandbox over loopback; only Scrapy's downloader is replaced by a plain HTTP client, so the
figure is the pipeline's, not the network's.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg
from scrapy.http import Request, Response
from scrapy.responsetypes import responsetypes
from scrapy.settings import BaseSettings
from scrapy.utils.test import get_crawler

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import bench_database, start_sandbox  # noqa: E402
from cannaspider.items import Potency, StoreProduct  # noqa: E402
from cannaspider.pipelines.images import ProductImagesPipeline  # noqa: E402
from cannaspider.pipelines.product_writer import ProductWriterPipeline  # noqa: E402
from cannaspider.spiders.products import ProductSpider  # noqa: E402


class Engine:
    """The engine's download_async, over loopback: a plain HTTP GET in a thread."""

    running = True

    async def download_async(self, request: Request) -> Response:
        def get() -> Response:
            with urllib.request.urlopen(request.url, timeout=30) as reply:
                body, headers = reply.read(), dict(reply.headers)
            cls = responsetypes.from_args(headers=headers, url=request.url, body=body)
            return cls(url=request.url, status=200, headers=headers, body=body, request=request)

        return await asyncio.to_thread(get)


def product(dispensary_id: int, pid: str, image: str) -> StoreProduct:
    return StoreProduct(
        dispensary_id, None, pid, "Name", "Name", "Chain Brand", None, None, None, None, None, None, None, None,
        False, [], Potency(None, None), Potency(None, None), [], [], {}, image, [image], None, None, None,
    )  # fmt: skip


async def crawl(db: str, store_dir: Path, items: list[StoreProduct]) -> None:
    """One crawler's run of the item pipelines over `items`, to its spider's close."""
    project = BaseSettings()
    project.setmodule("cannaspider.settings", priority="project")
    project.setdict({"DATABASE_URL": db, "IMAGES_STORE": str(store_dir), "LOG_ENABLED": False}, priority="cmdline")
    crawler = get_crawler(ProductSpider, project.copy_to_dict())
    crawler.spider = ProductSpider.from_crawler(crawler, dispensary_id="1")
    crawler.engine = Engine()  # type: ignore[assignment]
    writer = ProductWriterPipeline.from_crawler(crawler)
    images = ProductImagesPipeline.from_crawler(crawler)
    images.open_spider()
    for item in items:
        written = writer.process_item(item)
        if inspect.isawaitable(written):  # the writer's back-pressure: a batch still being written
            written = await written
        images.process_item(written)
    while images._holds_crawl():  # as spider_idle keeps the crawl open while images are out
        await asyncio.sleep(0.02)
    await asyncio.gather(writer.close_spider(), images.close_spider())
    await crawler.spider.store.close()


def image_downloads(base: str) -> dict[str, int]:
    state = json.loads(urllib.request.urlopen(base + "/_sandbox/state", timeout=30).read())
    return {k: n for k, n in state["requests"].items() if k.startswith("image:products/")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--products", type=int, default=200, help="images of the shared catalogue")
    parser.add_argument("--database", default="cannaspider_bench_image_sources")
    args = parser.parse_args()
    url = bench_database(args.database)
    sandbox, urls = start_sandbox(1, 1)  # its image CDN serves any key
    base = urls["base"]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            ids = [
                conn.execute(
                    "INSERT INTO dispensaries (name, slug, state, platform_dispensary_id) "
                    "VALUES (%s, %s, 'AZ', %s) RETURNING id",
                    (f"Chain - Store {n}", f"chain-store-{n}", f"{n:024x}"),
                ).fetchone()[0]
                for n in range(args.stores)
            ]
        catalogue = [f"{base}/images/products/catalogue-{i}.png" for i in range(args.products)]
        menus = {d: [product(d, f"{i:024x}", image) for i, image in enumerate(catalogue)] for d in ids}
        half = len(ids) // 2
        with tempfile.TemporaryDirectory() as folder:
            store_dir = Path(folder) / "images"
            started = time.perf_counter()

            async def two_nodes() -> None:
                await asyncio.gather(
                    crawl(url, store_dir, [p for d in ids[:half] for p in menus[d]]),
                    crawl(url, store_dir, [p for d in ids[half:] for p in menus[d]]),
                )

            asyncio.run(two_nodes())
            first = time.perf_counter() - started
            asyncio.run(crawl(url, store_dir, [p for d in ids for p in menus[d]]))  # the next crawl
            objects = sum(1 for _ in store_dir.rglob("*.webp"))
        with psycopg.connect(url) as conn:
            recorded = conn.execute("SELECT count(local_image_path) FROM store_products").fetchone()[0]
        downloads = image_downloads(base)
        total, distinct = sum(downloads.values()), len(downloads)
        listed = args.stores * args.products
        print(f"{args.stores} stores × {args.products} images of one catalogue ({listed} store images), two crawlers")
        print(f"  first crawl (two at once): {first:.1f} s; then a crawl of every store")
        print(f"  downloads: {total} for {distinct} distinct URLs; objects stored: {objects}")
        print(f"  store images recorded: {recorded} of {listed}")
        print(f"  repeated image downloads across stores: {total - distinct} (target 0)")
        print(f"  per-store layout before: {listed} downloads ({listed - args.products} repeated)")
    finally:
        sandbox.terminate()
        sandbox.wait(10)


if __name__ == "__main__":
    main()
