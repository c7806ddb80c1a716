"""cannaspider/pipelines/image_fetch.py's pixel budget (#28, 14): conversions under way hold the
pixels their headers declare, and those beyond IMAGES_CONVERT_BUDGET_PIXELS wait their turn.
The converter is the real one behind a gate, so the test sees who converts at once."""

from __future__ import annotations

import asyncio
import io
import threading
import time

from PIL import Image
from scrapy import Spider
from scrapy.http import Response
from scrapy.pipelines.files import FSFilesStore
from scrapy.pipelines.media import MediaPipeline

from cannaspider.images import convert
from cannaspider.pipelines.image_fetch import ImageFetcher, ImageJob
from cannaspider.pipelines.image_sources import MINE, Claim
from tests.helpers import project_crawler

SIZE = (300, 200)
GATE = threading.Event()
LOCK = threading.Lock()
ACTIVE: list[int] = [0, 0]  # converting now, the most at once


def gated(body: bytes, *, quality: int, max_pixels: int) -> tuple[bytes, tuple[int, int]]:
    """convert.to_webp, once GATE is open (IMAGES_CONVERTER in the test)."""
    with LOCK:
        ACTIVE[0] += 1
        ACTIVE[1] = max(ACTIVE)
    try:
        assert GATE.wait(60)
        return convert.to_webp(body, quality=quality, max_pixels=max_pixels)
    finally:
        with LOCK:
            ACTIVE[0] -= 1


def png(size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 120, 30)).save(out, "PNG")
    return out.getvalue()


def test_declared_pixels_are_read_from_the_header():
    assert convert.declared_pixels(png(SIZE), max_pixels=50_000_000) == 60_000
    assert convert.declared_pixels(png(SIZE), max_pixels=59_999) == 0  # refused from its header anyway
    assert convert.declared_pixels(b"<html>CDN error</html>", max_pixels=50_000_000) == 0
    assert convert.declared_pixels(b"", max_pixels=50_000_000) == 0


class Settled:
    """What the fetcher settles once a file is written: the source marked stored (ImageSources)
    and the path mapped to it (ImagePathWriter); recorded here, as this test is about the budget."""

    def __init__(self) -> None:
        self.marked: list[str] = []
        self.mapped: dict[str, str] = {}

    async def stored(self, claim: Claim) -> None:
        self.marked.append(claim.source)

    def map(self, path: str, source: str) -> None:
        self.mapped[path] = source


def test_conversions_beyond_the_pixel_budget_wait_their_turn(tmp_path):
    crawler = project_crawler(
        Spider,
        IMAGES_CONVERTER=f"{__name__}.gated",
        IMAGES_CONVERT_BUDGET_PIXELS=2 * SIZE[0] * SIZE[1],  # two of them at once
    )
    released: list[str] = []
    settled = Settled()
    fetcher = ImageFetcher(crawler, FSFilesStore(str(tmp_path)), settled, released.append, settled)  # type: ignore[arg-type]
    fetcher.spiderinfo = MediaPipeline.SpiderInfo(Spider("t"))
    body = png(SIZE)
    jobs = [ImageJob(1, "dutchie", None, f"https://img.example/{n}.png", f"brands/{n}.webp") for n in range(3)]
    for n, job in enumerate(jobs):  # each holds its source's claim, as after download()
        job.claim = Claim(f"source-{n}", job.path, MINE, f"token-{n}")

    async def run() -> None:
        saves = [asyncio.create_task(fetcher.save(j, Response(j.url, status=200, body=body))) for j in jobs]
        deadline = time.monotonic() + 30
        while not (ACTIVE[0] == 2 and fetcher.budget.waiting == 1):
            assert time.monotonic() < deadline, (ACTIVE, fetcher.budget.waiting)
            await asyncio.sleep(0.01)
        assert fetcher.budget.held == 2 * SIZE[0] * SIZE[1]  # the two under way hold their pixels
        await asyncio.sleep(0.2)
        assert ACTIVE[0] == 2 and fetcher.budget.waiting == 1  # the third still waits
        GATE.set()
        await asyncio.gather(*saves)

    try:
        asyncio.run(run())
    finally:
        GATE.set()
    assert ACTIVE[1] == 2 and fetcher.budget.held == 0 and released == []
    assert crawler.stats.get_value("cannaspider/images_stored") == 3
    assert sorted(p.name for p in (tmp_path / "brands").iterdir()) == ["0.webp", "1.webp", "2.webp"]
    assert sorted(settled.marked) == ["source-0", "source-1", "source-2"]
    assert settled.mapped == {f"brands/{n}.webp": f"source-{n}" for n in range(3)}
