"""Peak memory of the crawl's conversions with and without the pixel budget (#28, 14): N product
images of 49 MP (7000×7000 PNGs of 143 kB, just under IMAGES_MAX_PIXELS) saved at once through
the pipeline's ImageFetcher (the real converter, a local file store), in a fresh process per
budget; its peak RSS.

    python benchmarks/convert_budget.py                 # 8 images, the default budget and none
    python benchmarks/convert_budget.py --images 40
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402
from scrapy import Spider  # noqa: E402
from scrapy.http import Response  # noqa: E402
from scrapy.pipelines.files import FSFilesStore  # noqa: E402
from scrapy.pipelines.media import MediaPipeline  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from cannaspider import settings  # noqa: E402
from cannaspider.pipelines.image_fetch import ImageFetcher, ImageJob  # noqa: E402
from cannaspider.pipelines.image_sources import MINE, Claim  # noqa: E402
from tests.helpers import project_settings  # noqa: E402

UNBOUNDED = 10**12  # a budget no crawl reaches: every conversion at once, as before the budget


class Settled:
    """Where the fetcher settles a written file (the source marked stored, the path mapped): no
    database here, as this measures the conversions' memory alone."""

    async def stored(self, claim: Claim) -> None:
        pass

    def map(self, path: str, source: str) -> None:
        pass


def run(images: int, budget: int) -> None:
    """In this process: the images saved at once; prints the peak RSS in MB."""
    body = pyvips.Image.black(7000, 7000, bands=3).cast("uchar").pngsave_buffer(compression=9)
    crawler = get_crawler(Spider, {**project_settings(), "IMAGES_CONVERT_BUDGET_PIXELS": budget})
    with tempfile.TemporaryDirectory() as folder:
        settled = Settled()
        fetcher = ImageFetcher(crawler, FSFilesStore(folder), settled, lambda path: None, settled)  # type: ignore[arg-type]
        fetcher.spiderinfo = MediaPipeline.SpiderInfo(Spider("bench"))
        jobs = [ImageJob(1, "dutchie", None, f"https://img.example/{n}.png", f"b/{n}.webp") for n in range(images)]
        for n, job in enumerate(jobs):  # each holds its source's claim, as after download()
            job.claim = Claim(f"source-{n}", job.path, MINE, f"token-{n}")

        async def save_all() -> None:
            await asyncio.gather(*(fetcher.save(j, Response(j.url, status=200, body=body)) for j in jobs))

        asyncio.run(save_all())
        stored = len(list(Path(folder, "b").iterdir()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{images} images of 49 MP, budget {budget:,} pixels: {stored} stored, peak RSS {peak:,.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--budget", type=int, default=None, help="one run with this budget only")
    args = parser.parse_args()
    if args.budget is not None:
        run(args.images, args.budget)
        return
    for budget in (UNBOUNDED, settings.IMAGES_CONVERT_BUDGET_PIXELS):
        cmd = [sys.executable, __file__, "--images", str(args.images), "--budget", str(budget)]
        subprocess.run(cmd, check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
