"""The CPU of /img's costliest requests (#28, 13): each hostile query rendered from photo-like
stored webps of a few sizes, the CPU seconds of each render (user + system, every libvips thread),
and the worst. Run it before and after a change to /img's bounds:

    python benchmarks/img_worst.py              # sources 1000² and 4000² px
    python benchmarks/img_worst.py --sides 7000

It calls the renderer as the route does, after the route's bounds (cannaspider/images/render.py:
plan() then render()), with the project's libvips settings (VIPS_CONCURRENCY ...).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

import pyvips

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy.settings import Settings  # noqa: E402

from cannaspider.images import convert  # noqa: E402
from cannaspider.images import render as renderer  # noqa: E402
from cannaspider.images.render import parse_variant  # noqa: E402

QUERIES = (
    "w=4000&h=4000&fit=contain&blur=20",
    "w=4000&h=4000&fit=cover&blur=20",
    "w=4000&h=4000&fit=fill&blur=1000",
    "w=4000&blur=19.9",
    "w=4000&h=4000&fit=outside&blur=5",
    "w=200",
)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def source(folder: Path, side: int) -> Path:
    """A photo-like webp: smooth noise, so neither the encoder nor the blur has it easy."""
    noise = pyvips.Image.gaussnoise(side // 8, side // 8, sigma=60, mean=128)
    image = noise.resize(8, kernel="linear").bandjoin([noise.resize(8, kernel="cubic"), noise.resize(8)])
    path = folder / f"{side}.webp"
    image.cast("uchar").copy(interpretation="srgb").webpsave(str(path), Q=90)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sides", type=int, nargs="+", default=[1000, 4000])
    args = parser.parse_args()
    settings = Settings()
    settings.setmodule("cannaspider.settings")
    convert.configure(settings)
    pyvips.cache_set_max(0)  # every render from scratch
    worst = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        for side in args.sides:
            path = source(Path(tmp), side)
            for query in QUERIES:
                variant = parse_variant([tuple(p.split("=")) for p in query.split("&")])  # type: ignore[misc]
                before = cpu()
                try:
                    renderer.render(
                        path, variant, settings.getint("IMG_MAX_PIXELS"), settings.getint("IMAGES_MAX_PIXELS")
                    )
                    outcome = "rendered"
                except renderer.BadParameter as exc:
                    outcome = f"400: {exc}"
                spent = cpu() - before
                print(f"source {side}x{side}  ?{query:<36} {spent:7.2f} s CPU  {outcome}", flush=True)
                worst = max(worst, (spent, f"source {side}² ?{query}"))
    print(f"worst: {worst[0]:.2f} s CPU ({worst[1]})")


if __name__ == "__main__":
    main()
