"""Ingest benchmark: the product crawl against the sandbox, with every pipeline on, with
pipelines off (the crawl ceiling) and with a per-row INSERT … ON CONFLICT pipeline (the
baseline), all measured in this one run; plus peak RSS for two store counts.

What each measurement starts from is fixed, so that the five measurements of a variant measure
the same thing (docs/images.md, "Ingest benchmark"):
- "full pipeline": new products (the product tables emptied) whose images the image store holds
  already (filled by an untimed crawl before the first measurement), so the image layer plans,
  looks up and records every image but converts none;
- "steady state": a resync of stores whose products and images all exist (a daily crawl): one
  untimed crawl fills the tables, the measured crawls find every row and every image;
- with --converters, only "new images, libvips" / "new images, Pillow": new products and an empty
  image store, so every image is downloaded and converted (cannaspider/images/convert.py or
  benchmarks/pillow_convert.py); the figure is images converted per second, the two converters'
  ratio taken per repeat.
Before, the images folder was either shared (the first "full" measurement converted every image
and the others none: 269 against ~3,800 products/s) or new for every measurement (each was
mostly conversion: full / ceiling ~0.04).

    ./dev bench                          # 50 stores × 300 products, each measurement 2 crawls, 5 repeats
    python benchmarks/ingest.py --stores 20 --products 150 --repeats 5
    python benchmarks/ingest.py --converters --stores 10 --products 100 --repeats 7
    python benchmarks/ingest.py --market-cost    # issue 17's cost: full vs without events, then also
                                                 # without identity keys, canonical links, unit prices
    python benchmarks/ingest.py --metrics-cost   # issue 33: the crawl's metrics exported every second, or not
    python benchmarks/ingest.py --platforms      # issue 30: a Jane menu's products/s against Dutchie's,
                                                 # the same stores × products, in the same run

INGEST_LOG_DIR=dir keeps every crawl's log; INGEST_PROFILE_DIR=dir runs each full-pipeline crawl
under cProfile.

Everything talks to 127.0.0.1 only: the sandbox runs as a child process, the database is
DATABASE_URL's server or the embedded one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu import CRAWL_CPU_STAT, CpuMeter  # noqa: E402
from cannaspider import settings  # noqa: E402
from cannaspider.db import database_url, migrations  # noqa: E402

FULL = None  # the project's ITEM_PIPELINES
OFF = {}
NORMALIZE_ONLY = {"cannaspider.pipelines.normalize.NormalizeProductPipeline": 200}
PILLOW_CONVERSION = ("-s", "IMAGES_CONVERTER=benchmarks.pillow_convert.to_webp")
EVENTS_OFF = ("-s", "PRODUCT_EVENTS_ENABLED=False")  # each complete crawl's close writes them (docs/analytics.md)
CEILING = "ceiling (pipelines off)"
STEADY = "steady state (resync)"
NEW_VIPS = "new images, libvips"
NEW_PILLOW = "new images, Pillow"
LIBVIPS_CONVERSION = ("-s", "IMAGES_CONVERTER=cannaspider.images.convert.to_webp")
NO_EVENTS = "full, product events off"
NO_MARKET = "full, no events/market"
JANE = "full pipeline, Jane"
# issue 33: the crawl's stats exported (cannaspider/metrics/crawl.py) every second, 15 times as
# often as by default, to node_exporter's textfile folder (METRICS_TEXTFILE_DIR is set in main())
WITH_METRICS = "full, crawl metrics on"
# the full pipeline without identity keys, canonical links and unit prices (benchmarks/market_off.py)
MARKET_OFF = {
    **{
        k: v
        for k, v in settings.ITEM_PIPELINES.items()
        if v is not None and not k.endswith(("NormalizeProductPipeline", "ProductWriterPipeline"))
    },
    "benchmarks.market_off.NormalizeWithoutMarket": settings.ITEM_PIPELINES[
        "cannaspider.pipelines.normalize.NormalizeProductPipeline"
    ],
    "benchmarks.market_off.ProductWriterWithoutMarket": settings.ITEM_PIPELINES[
        "cannaspider.pipelines.product_writer.ProductWriterPipeline"
    ],
}
CPU_PARTS = ("crawl", "database", "sandbox")
METER: CpuMeter | None = None  # set by main() once the database and the sandbox run

PER_ROW = {
    "cannaspider.pipelines.normalize.NormalizeProductPipeline": 200,
    "benchmarks.perrow_pipeline.PerRowUpsertPipeline": 300,
}


def start_sandbox(stores: int, products: int) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--port",
            "0",
            "--firecrawl-port",
            "0",
            "--states",
            "AZ",
            "--stores-per-state",
            str(stores),
            "--min-products",
            str(products),
            "--max-products",
            str(products),
            "--jane-stores-per-state",
            str(stores),
            "--proxy",  # Dutchie is only crawled through proxies (docs/stealth.md)
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    urls = json.loads(proc.stdout.readline())
    return proc, urls


def register_proxy(url: str, proxy_url: str) -> None:
    """The sandbox's forward proxy as the crawl's proxy pool."""
    host, port = proxy_url.rsplit("//", 1)[1].split(":")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO proxies (host, port, protocol) VALUES (%s, %s, 'http')", (host, int(port)))


def bench_database(name: str) -> str:
    admin = database_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)
    migrations.apply(url, log=lambda _: None)
    return url


def crawl_env(url: str, urls: dict) -> dict:
    """The environment of a benchmark's crawl processes: its database, the sandbox, this checkout."""
    return {
        **os.environ,
        "DATABASE_URL": url,
        "DUTCHIE_GRAPHQL_URL": urls["graphql"],
        "JANE_ALGOLIA_URL": urls["jane"],
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def seed(url: str, base: str) -> list[int]:
    stores = json.loads(urllib.request.urlopen(base + "/_sandbox/stores", timeout=30).read())
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            conn.execute(
                "INSERT INTO dispensaries (name, slug, state, platform_dispensary_id) "
                "VALUES (%s, %s, 'AZ', %s) RETURNING id",
                (s["name"], s["cName"], s["id"]),
            ).fetchone()[0]
            for s in stores
        ]


def seed_jane(url: str, base: str) -> list[int]:
    """The sandbox's Jane stores as dispensaries of platform 'jane' (their store id the platform id)."""
    stores = json.loads(urllib.request.urlopen(base + "/_sandbox/jane/stores", timeout=30).read())
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            conn.execute(
                "INSERT INTO dispensaries (name, slug, state, platform, platform_dispensary_id) "
                "VALUES (%s, %s, 'AZ', 'jane', %s) RETURNING id",
                (s["name"], s["url_slug"], str(s["id"])),
            ).fetchone()[0]
            for s in stores
        ]


def crawl(env: dict, pipelines: dict | None, dispensary_ids: list[int], extra: tuple[str, ...] = ()) -> dict:
    args = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "product_resync",
        "-a",
        "dispensary_id=" + ",".join(map(str, dispensary_ids)),
        "-s",
        "FEEDS={}",
        "-s",
        "LOG_LEVEL=INFO",
        "-s",
        "EXTENSIONS=" + json.dumps({**settings.EXTENSIONS, "benchmarks.cpu.CrawlCpu": 0}),
        *extra,
    ]
    if pipelines is not None:
        args += ["-s", "ITEM_PIPELINES=" + json.dumps(pipelines)]
    profiles = os.environ.get("INGEST_PROFILE_DIR")
    if profiles and pipelines is FULL:  # cProfile of each full-pipeline crawl (pstats files)
        Path(profiles).mkdir(parents=True, exist_ok=True)
        target = Path(profiles) / f"crawl-{len(list(Path(profiles).iterdir())):03d}.prof"
        args[1:3] = ["-m", "cProfile", "-o", str(target), "-m", "scrapy"]
    before = METER.read() if METER else None
    result = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    cpu = CpuMeter.spent(before, METER.read()) if METER and before else {}
    if os.environ.get("INGEST_LOG_DIR"):  # every crawl's log, for a look at where the time went
        logs = Path(os.environ["INGEST_LOG_DIR"])
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"crawl-{len(list(logs.iterdir())):03d}.log").write_text(" ".join(args) + "\n" + result.stderr)
    # exit 3 is `scrapy crawl`'s "a unit of work did not complete" (README, "Exits and errors"): the
    # variants without the completion pipeline never close their store crawls; the full pipeline's
    # completeness is checked from its stats below
    if result.returncode not in (0, 3) or "Traceback" in result.stderr:
        raise SystemExit(f"crawl failed:\n{result.stderr[-3000:]}")
    stats = {}
    for key in (
        "elapsed_time_seconds",
        "memusage/max",
        "item_scraped_count",
        "item_dropped_count",
        "cannaspider/stores_complete",
        "cannaspider/stores_incomplete",
        "cannaspider/images_stored",
        "cannaspider/images_already_stored",
        "cannaspider/images_skipped_has_image",
    ):
        m = re.search(rf"'{re.escape(key)}': ([0-9.]+)", result.stderr)
        stats[key] = float(m.group(1)) if m else 0.0
    for key, value in re.findall(r"'(cannaspider/db_write_ms/[A-Za-z]+)': ([0-9.]+)", result.stderr):
        stats[key] = float(value)
    m = re.search(rf"'{re.escape(CRAWL_CPU_STAT)}': ([0-9.]+)", result.stderr)
    stats["cpu/crawl"] = float(m.group(1)) if m else None
    stats.update({"cpu/" + part: spent for part, spent in cpu.items()})
    return stats


@dataclass(frozen=True)
class Variant:
    name: str
    pipelines: dict | None
    extra: tuple[str, ...] = ()
    images: str = "shared"  # "shared": the filled image store; "new": an empty one per measurement
    steady: bool = False  # the tables are filled by an untimed crawl first
    crawls: int | None = None  # None: --crawls
    platform: str = "dutchie"  # whose stores it crawls (--platforms)


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE product_snapshots, product_events, store_products, crawl_runs CASCADE"
        )  # migration 011, 014


def measure(env: dict, url: str, ids: list[int], v: Variant, shared: tuple[str, ...], args) -> dict:
    reset(url)
    crawls = v.crawls or args.crawls
    if v.images == "new":
        with tempfile.TemporaryDirectory(prefix="ingest-images-") as images:
            runs = [crawl(env, v.pipelines, ids, v.extra + ("-s", f"IMAGES_STORE={images}")) for _ in range(crawls)]
    else:
        if v.steady:
            crawl(env, v.pipelines, ids, v.extra + shared)  # the rows and images a daily crawl finds
        runs = [crawl(env, v.pipelines, ids, v.extra + shared) for _ in range(crawls)]
    if v.pipelines is FULL and any(r["cannaspider/stores_complete"] != len(ids) for r in runs):
        raise SystemExit(f"{v.name}: the full pipeline did not complete every store: {runs}")
    seconds = sum(r["elapsed_time_seconds"] for r in runs)
    result = {
        "products": len(ids) * args.products * crawls,
        "products_per_s": len(ids) * args.products * crawls / seconds,
        "seconds": seconds,
        "peak_rss_mb": max(r["memusage/max"] for r in runs) / 2**20,
        "images": sum(r["cannaspider/images_stored"] for r in runs),
        "images_per_s": sum(r["cannaspider/images_stored"] for r in runs) / seconds,
    }
    for part in CPU_PARTS:
        spent = [r.get("cpu/" + part) for r in runs]
        result["cpu/" + part] = sum(spent) if None not in spent else None
    for key in runs[0]:
        if key.startswith("cannaspider/db_write_ms/"):
            result[key] = sum(r.get(key, 0.0) for r in runs)
    return result


def paired_target(
    measured: dict[str, list[dict]], results: dict[str, dict], name: str, label: str, target: float
) -> None:
    """`name`'s products/s against the full pipeline's: the medians' ratio, each repeat's, the verdict."""
    pairs = [
        m["products_per_s"] / f["products_per_s"]
        for f, m in zip(measured["full pipeline"], measured[name], strict=True)
    ]
    listed = ", ".join(f"{x:.3f}" for x in pairs)
    ratio = results[name]["products_per_s"] / results["full pipeline"]["products_per_s"]
    print(f"  {label:26} {ratio:9.3f}   (target >= {target:.2f}; per repeat: {listed})")
    print("targets met" if ratio >= target else "targets NOT met")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=50)
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--crawls", type=int, default=2, help="crawls per measurement (first inserts, then updates)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="measurements per variant, interleaved across variants; the median is reported",
    )
    parser.add_argument(
        "--database", default="cannaspider_bench", help="dropped and made anew (two runs at once: two names)"
    )
    parser.add_argument(
        "--converters",
        action="store_true",
        help="measure only the crawl with new images (an empty image store), converted by libvips and by Pillow, "
        "paired per repeat (issue 19)",
    )
    parser.add_argument(
        "--market-cost",
        action="store_true",
        help="measure only the full pipeline, without product events, and without events, identity keys, "
        "canonical links and unit prices (issue 17's bound: they cost at most 5 %%)",
    )
    parser.add_argument(
        "--platforms",
        action="store_true",
        help="measure only the full pipeline on Dutchie's stores and on Jane's, the same stores x products "
        "(issue 30's bound: Jane at no less than 0.8 x Dutchie's products/s)",
    )
    parser.add_argument(
        "--metrics-cost",
        action="store_true",
        help="measure only the full pipeline without and with the crawl's metrics exported every second "
        "(issue 33's bound: they cost at most 3 %%)",
    )
    args = parser.parse_args()

    global METER
    url = bench_database(args.database)
    sandbox, urls = start_sandbox(args.stores, args.products)
    METER = CpuMeter(url, sandbox.pid)
    try:
        ids = seed(url, urls["base"])
        jane_ids = seed_jane(url, urls["base"])
        register_proxy(url, urls["proxy"])
        env = crawl_env(url, urls)
        crawl(env, OFF, ids[:2])  # warm the sandbox's page cache and the OS file cache
        variants: tuple[Variant, ...] = (
            Variant(CEILING, OFF),
            Variant("full pipeline", FULL),
            Variant(STEADY, FULL, steady=True),
            # only a store's first crawl converts (the second finds every image): one crawl each
            Variant(NEW_VIPS, FULL, LIBVIPS_CONVERSION, images="new", crawls=1),
            Variant(NEW_PILLOW, FULL, PILLOW_CONVERSION, images="new", crawls=1),
            Variant("per-row upsert baseline", PER_ROW),
            Variant("normalize only", NORMALIZE_ONLY),
        )
        # each image converted in a crawl that does nothing else: its own run (at 50 stores x 300
        # products, 13,500 conversions per measurement would take longer than the rest together)
        variants = tuple(v for v in variants if (v.images == "new") == args.converters)
        if args.market_cost:
            variants = (
                Variant("full pipeline", FULL),
                Variant(NO_EVENTS, FULL, EVENTS_OFF),
                Variant(NO_MARKET, MARKET_OFF, EVENTS_OFF),
            )
        if args.metrics_cost:
            metrics_dir = tempfile.mkdtemp(prefix="ingest-metrics-")
            variants = (
                Variant("full pipeline", FULL),
                Variant(
                    WITH_METRICS,
                    FULL,
                    ("-s", f"METRICS_TEXTFILE_DIR={metrics_dir}", "-s", "METRICS_EXPORT_PERIOD_S=1"),
                ),
            )
        if args.platforms:
            crawl(env, OFF, jane_ids[:2])  # warm Jane's pages too
            variants = (Variant("full pipeline", FULL), Variant(JANE, FULL, platform="jane"))
        shared_images = tempfile.mkdtemp(prefix="ingest-images-")
        shared = ("-s", f"IMAGES_STORE={shared_images}")
        if any(v.images == "shared" and v.pipelines is not OFF for v in variants):
            # the image store every "shared" measurement starts from: each image converted here,
            # untimed, instead of in whichever measurement came first
            reset(url)
            crawl(env, FULL, ids, shared)
            if args.platforms:  # Jane's products have images of their own
                crawl(env, FULL, jane_ids, shared)
        measured: dict[str, list[dict]] = {v.name: [] for v in variants}
        try:
            for repeat in range(args.repeats):
                # interleaved and rotated, so drift in a shared machine's speed hits every variant alike
                k = repeat % len(variants)
                for v in variants[k:] + variants[:k]:
                    stores = jane_ids if v.platform == "jane" else ids
                    measured[v.name].append(measure(env, url, stores, v, shared, args))
        finally:
            shutil.rmtree(shared_images, ignore_errors=True)
        results = {name: sorted(ms, key=lambda m: m["products_per_s"])[len(ms) // 2] for name, ms in measured.items()}
        reset(url)
        small = None
        if not (args.market_cost or args.converters or args.platforms or args.metrics_cost):
            with tempfile.TemporaryDirectory(prefix="ingest-images-") as images:
                small = crawl(env, FULL, ids[: max(len(ids) // 5, 1)], ("-s", f"IMAGES_STORE={images}"))
    finally:
        sandbox.terminate()
        sandbox.wait(10)

    print(
        f"ingest benchmark: {len(ids)} stores x {args.products} products; each measurement is "
        f"{args.crawls} crawls (new images: 1); median of {args.repeats} interleaved measurements per variant"
    )
    for name, r in results.items():
        spread = ", ".join(f"{m['products_per_s']:.0f}" for m in measured[name])
        print(
            f"  {name:26} {r['products_per_s']:9.0f} products/s   (peak RSS {r['peak_rss_mb']:.0f} MB; "
            f"images stored {r['images']:.0f}; all: {spread})"
        )
    print("  CPU per 1,000 products (median of the measurements; the three share this machine's cores):")
    for name, ms in measured.items():
        per_1000 = 1000 / ms[0]["products"]
        parts = []
        for part in CPU_PARTS:
            spent = [m["cpu/" + part] for m in ms]
            if None not in spent:
                parts.append(f"{part} {statistics.median(spent) * per_1000 * 1000:.0f} ms")
        wall = statistics.median(m["seconds"] for m in ms) * per_1000 * 1000
        print(f"    {name:26} wall {wall:4.0f} ms; CPU {', '.join(parts) or 'not readable here'}")
    if NEW_VIPS in measured:
        pairs = [
            p["images_per_s"] / v["images_per_s"] for v, p in zip(measured[NEW_VIPS], measured[NEW_PILLOW], strict=True)
        ]
        for name in (NEW_VIPS, NEW_PILLOW):
            rates = ", ".join(f"{m['images_per_s']:.1f}" for m in measured[name])
            median = statistics.median(m["images_per_s"] for m in measured[name])
            print(f"  {name:26} {median:9.1f} images/s     (all: {rates})")
        listed = ", ".join(f"{x:.2f}" for x in pairs)
        print(
            f"  Pillow / libvips, per repeat {statistics.median(pairs):7.2f}   (all: {listed}; crawls with new images)"
        )
    if args.converters:
        return
    full = results["full pipeline"]["products_per_s"]
    if args.platforms:
        paired_target(measured, results, JANE, "Jane / Dutchie", 0.80)
        return
    if args.metrics_cost:
        paired_target(measured, results, WITH_METRICS, "with metrics / without", 0.97)
        return
    if small is None:
        no_events = full / results[NO_EVENTS]["products_per_s"]
        no_market = full / results[NO_MARKET]["products_per_s"]
        print(f"  full / without events      {no_events:9.2f}   (information: the events' share)")
        print(f"  full / without both        {no_market:9.2f}   (target >= 0.95: events, identity and unit prices)")
        print("targets met" if no_market >= 0.95 else "targets NOT met")
        return
    ceiling = results[CEILING]["products_per_s"]
    per_row = results["per-row upsert baseline"]["products_per_s"]
    steady = results[STEADY]["products_per_s"]
    print(f"  full / ceiling             {full / ceiling:9.2f}   (target >= 0.60)")
    print(f"  full / per-row baseline    {full / per_row:9.2f}   (target >= 3.00)")
    print(f"  steady state / ceiling     {steady / ceiling:9.2f}   (target >= 0.75: a daily resync)")
    for name in ("full pipeline", STEADY):
        writes = {
            k.rsplit("/", 1)[1]: statistics.median(m[k] for m in measured[name])
            for k in measured[name][0]
            if k.startswith("cannaspider/db_write_ms/")
        }
        print(f"  {name} db_write_ms per measurement (median): {writes}")
    normalized = results["normalize only"]["products_per_s"]
    print(
        f"  full / normalize only      {full / normalized:9.2f}   (information: the writers' share, if "
        "normalizing counted as parsing)"
    )
    small_rss = small["memusage/max"] / 2**20
    big_rss = results["full pipeline"]["peak_rss_mb"]
    print(f"  peak RSS, {max(len(ids) // 5, 1):3d} stores        {small_rss:9.0f} MB")
    print(
        f"  peak RSS, {len(ids):3d} stores        {big_rss:9.0f} MB   (ratio {big_rss / small_rss:.2f}; "
        "flat means it does not grow with stores)"
    )
    ok = full / ceiling >= 0.60 and full / per_row >= 3.0 and steady / ceiling >= 0.75
    print("targets met" if ok else "targets NOT met")


if __name__ == "__main__":
    main()
