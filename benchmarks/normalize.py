"""The normalizer's CPU per product, in process: the sandbox catalog's products (the shapes of the
real payload, docs/dutchie.md) through platforms/dutchie/normalizer.py, and optionally the validation
pipeline (monitors/validation.py) on what it returns, beside its baseline: the same schema's
"valid?" by pure-Python jsonschema, which the pipeline used before jsonschema-rs. CPU time
(time.process_time), the best of --repeats: the machine is shared, and wall time would measure the
neighbours.

    .venv/bin/python -m benchmarks.normalize [--stores 20] [--products 150] [--repeats 15] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections.abc import Callable

from jsonschema.validators import validator_for
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from cannaspider import platforms
from cannaspider.items import RawProduct
from cannaspider.monitors.validation import StoreProductValidationPipeline, inlined_schema, item_json
from cannaspider.storable import Losses
from sandbox.catalog import _product

# Dutchie's normalizer, as the normalize pipeline reaches it (the registry and the interface)
normalize = platforms.build("dutchie", Settings()).normalize


def catalog(stores: int, products: int) -> list[RawProduct]:
    return [
        RawProduct(dispensary_id=s, crawl_run_id=1, raw=_product(42, f"store-{s}", i, i % 5, "http://127.0.0.1:1"))
        for s in range(stores)
        for i in range(products)
    ]


def best_cpu(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--products", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", action="store_true", help="cProfile one normalizer pass: top functions")
    args = parser.parse_args()
    items = catalog(args.stores, args.products)
    n = len(items)
    losses = Losses()  # as the normalize pipeline holds it
    normalized = [normalize(item, losses) for item in items]
    validation = StoreProductValidationPipeline(get_crawler(settings_dict={"HEALTH_VALIDATION_SAMPLE_EVERY": 1}))

    def normalize_all() -> None:
        for item in items:
            normalize(item, losses)

    sample = normalized[::10]
    schema = inlined_schema()
    python_check = validator_for(schema)(schema)

    def validate_all() -> None:
        for product in sample:
            validation.process_item(product)

    def python_validate_all() -> None:
        for product in sample:
            python_check.is_valid(item_json(product))

    norm_cpu = best_cpu(normalize_all, args.repeats)
    valid_cpu = best_cpu(validate_all, args.repeats)
    python_cpu = best_cpu(python_validate_all, max(1, args.repeats // 5))  # ~1.6 ms a product
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {n} products, best of {args.repeats}")
    print(f"normalize: {norm_cpu / n * 1e6:.1f} µs CPU per product ({n / norm_cpu:,.0f} products/s)")
    print(f"validate: {valid_cpu / len(sample) * 1e6:.1f} µs CPU per product validated (a crawl: 1 in 50)")
    print(
        f"  baseline, pure-Python jsonschema: {python_cpu / len(sample) * 1e6:.0f} µs "
        f"({python_cpu / valid_cpu:.0f} times the pipeline's)"
    )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(normalize_all)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
