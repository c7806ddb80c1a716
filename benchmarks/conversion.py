"""The image pipeline's download → webp conversion, libvips (cannaspider/images/convert.py)
against Pillow (benchmarks/pillow_convert.py), paired: each round converts the same
bodies with both, in alternating order, and the ratio is taken within the round, so a shared
machine's drift hits both alike (docs/images.md, "Which converter").

    python benchmarks/conversion.py --rounds 15          # the sandbox's product PNGs (what ingest converts)
    python benchmarks/conversion.py --rounds 15 --photos # 1000×1000 photo-like JPEGs

Two threads convert at once, as the pipeline's `asyncio.to_thread` does on this 2-core machine.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import pillow_convert  # noqa: E402
from cannaspider import settings  # noqa: E402
from cannaspider.images import convert  # noqa: E402
from sandbox.websites import product_png  # noqa: E402

Converter = Callable[..., tuple[bytes, tuple[int, int]]]


def photos(count: int, side: int = 1000) -> list[bytes]:
    bodies = []
    for i in range(count):
        base = Image.linear_gradient("L").resize((side, side)).convert("RGB").rotate(i * 7)
        noise = Image.effect_noise((side, side), 24 + i % 8).convert("RGB")
        out = io.BytesIO()
        Image.blend(base, noise, 0.4).save(out, "JPEG", quality=88)
        bodies.append(out.getvalue())
    return bodies


def rate(fn: Converter, bodies: list[bytes], threads: int) -> float:
    webp = {"quality": settings.IMAGES_WEBP_QUALITY, "max_pixels": settings.IMAGES_MAX_PIXELS}  # the pipeline's
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(lambda b: fn(b, **webp), bodies))
        return len(bodies) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--photos", action="store_true", help="1000x1000 JPEG photos instead of the sandbox PNGs")
    args = parser.parse_args()
    bodies = photos(args.images) if args.photos else [product_png(f"p{i}") for i in range(args.images)]
    engines: dict[str, Converter] = {"libvips": convert.to_webp, "Pillow": pillow_convert.to_webp}
    for fn in engines.values():  # warm: libvips' and Pillow's first calls load codecs
        rate(fn, bodies[:10], args.threads)
    rates: dict[str, list[float]] = {name: [] for name in engines}
    ratios = []
    for n in range(args.rounds):
        order = list(engines) if n % 2 == 0 else list(reversed(engines))
        for name in order:
            rates[name].append(rate(engines[name], bodies, args.threads))
        ratios.append(rates["libvips"][-1] / rates["Pillow"][-1])
    kind = "1000x1000 JPEG photos" if args.photos else "sandbox product PNGs (320x320)"
    print(f"conversion to webp q90: {args.images} {kind}, {args.threads} threads, {args.rounds} paired rounds")
    for name, values in rates.items():
        print(
            f"  {name:8} median {statistics.median(values):7.1f} images/s  "
            f"(all: {', '.join(f'{v:.0f}' for v in values)})"
        )
    ratios.sort()
    print(
        f"  libvips / Pillow, per round: median {statistics.median(ratios):.2f} "
        f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; {sum(r < 1 for r in ratios)} of {len(ratios)} rounds below 1)"
    )


if __name__ == "__main__":
    main()
