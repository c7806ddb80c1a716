"""ProductImagesPipeline: the seed's layout and slugs, webp conversion (alpha, EXIF orientation,
ICC), the download rules (once, never again, backfill when local_image_path is NULL), every kind
of unusable image skipped without touching the product row or the crawl, and an end-to-end
`scrapy crawl` against the sandbox."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from pathlib import Path

import psycopg
import pytest
import pyvips
from PIL import Image, ImageCms
from scrapy import Request
from scrapy.exceptions import DontCloseSpider
from scrapy.settings import BaseSettings
from scrapy.utils.test import get_crawler

from cannaspider import settings as defaults
from cannaspider.images import convert
from cannaspider.images.convert import UnusableImage
from cannaspider.images.paths import brand_logo_path, product_image_path, slugify, url_hash
from cannaspider.items import Potency, RawProduct, StoreProduct
from cannaspider.pipelines.images import ProductImagesPipeline
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from cannaspider.spiders.products import ProductSpider
from sandbox.catalog import _product
from tests.helpers import add_store, fetch
from tests.images.bombs import webp_declaring

PID = "6913e3cd444eac3935e928b9"


def to_webp(body: bytes, **kwargs) -> tuple[bytes, tuple[int, int]]:
    """As the pipeline converts: the project's IMAGES_WEBP_QUALITY and IMAGES_MAX_PIXELS, unless given."""
    return convert.to_webp(
        body, **{"quality": defaults.IMAGES_WEBP_QUALITY, "max_pixels": defaults.IMAGES_MAX_PIXELS, **kwargs}
    )


# --- layout and slugs ---------------------------------------------------------------------------


def test_the_seeds_example_layout():
    url = "https://images.dutchie.com/abc.jpg"
    path = product_image_path("AZ", "az-deeply-rooted", "Bud Bros", PID, url)
    assert path == f"products/az/az-deeply-rooted/bud-bros/{PID}/image-{url_hash(url)}.webp"
    assert len(url_hash(url)) == 8 and url_hash(url) != url_hash(url + "?w=2")
    assert brand_logo_path("Bud Bros", url) == f"brands/bud-bros/logo-{url_hash(url)}.webp"


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Bud & Mary's", "bud-and-marys"),
        ("Café Ñandú — Tempe", "cafe-nandu-tempe"),
        ("AC/DC Farms", "ac-dc-farms"),
        ("../../etc/passwd", "etc-passwd"),
        ("Grön Straße", "gron-strasse"),
        ("  Høme  Grown  ", "home-grown"),
        ("1906", "1906"),
        ("Select™ Elite+ ®", "select-elite-plus"),
        ("Kiva Confections 🍫🔥", "kiva-confections"),
        ("“Curly” ‘Quotes’", "curly-quotes"),
    ],
)
def test_slugs_of_real_world_names(name, slug):
    assert slugify(name) == slug


def test_names_without_any_ascii_stay_distinct_and_stable():
    fire, leaf = slugify("🔥🔥🔥", "brand"), slugify("🍁", "brand")
    assert fire.startswith("brand-") and leaf.startswith("brand-") and fire != leaf
    assert slugify("🔥🔥🔥", "brand") == fire
    assert slugify("大麻", "brand").startswith("brand-")
    assert slugify(None, "unbranded") == "unbranded" and slugify("   ", "unbranded") == "unbranded"


def test_no_segment_can_escape_or_add_a_level():
    path = product_image_path("A/Z", "../..", "/etc/", "../" + "a" * 24, "u")
    segments = path.split("/")
    assert len(segments) == 6 and all(s and s not in (".", "..") for s in segments)
    assert all(c.isalnum() or c in "-." for c in path.replace("/", ""))
    assert segments[:2] == ["products", "a-z"] and segments[2].startswith("store-") and segments[3] == "etc"
    assert slugify("x" * 300).__len__() <= 80


# --- conversion -----------------------------------------------------------------------------


def _encode(image: Image.Image, fmt: str, **params) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **params)
    return buf.getvalue()


def test_alpha_is_kept():
    image = Image.new("RGBA", (40, 30), (255, 0, 0, 0))
    image.putpixel((0, 0), (0, 0, 255, 255))
    webp, size = to_webp(_encode(image, "PNG"))
    out = Image.open(io.BytesIO(webp))
    assert out.format == "WEBP" and size == (40, 30) and out.mode == "RGBA"
    assert out.getpixel((20, 20))[3] == 0 and out.getpixel((0, 0))[3] == 255


def test_palette_transparency_is_kept():
    image = Image.new("P", (10, 10), 0)
    image.info["transparency"] = 0
    out = Image.open(io.BytesIO(to_webp(_encode(image, "PNG", transparency=0))[0]))
    assert out.mode == "RGBA" and out.getpixel((5, 5))[3] == 0


def test_exif_orientation_is_applied():
    image = Image.new("RGB", (60, 20), (0, 128, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    webp, size = to_webp(_encode(image, "JPEG", exif=exif))
    assert size == (20, 60)
    assert 0x0112 not in Image.open(io.BytesIO(webp)).getexif()


def test_icc_profile_is_kept():
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    webp, _ = to_webp(_encode(Image.new("RGB", (8, 8)), "JPEG", icc_profile=icc))
    assert Image.open(io.BytesIO(webp)).info.get("icc_profile") == icc


def test_cmyk_becomes_rgb():
    out = Image.open(io.BytesIO(to_webp(_encode(Image.new("CMYK", (8, 8), (0, 255, 255, 0)), "JPEG"))[0]))
    assert out.mode == "RGB"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"<!DOCTYPE html><html><body>Denied</body></html>", "not an image (HTML)"),
        (_encode(Image.new("RGB", (200, 200), (1, 2, 3)), "PNG")[:120], "broken"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n", "not an image"),
    ],
)
def test_unusable_bodies_say_why(body, reason):
    with pytest.raises(UnusableImage, match=reason.replace("(", r"\(").replace(")", r"\)")):
        to_webp(body)


def test_a_decompression_bomb_is_refused_from_its_header():
    from sandbox.websites import _bomb_png

    with pytest.raises(UnusableImage, match="decompression bomb"):
        to_webp(_bomb_png())
    with pytest.raises(UnusableImage, match="more than 100 pixels"):
        to_webp(_encode(Image.new("RGB", (20, 20)), "PNG"), max_pixels=100)


def test_a_100_byte_file_declaring_30000_squared_is_refused_before_decoding():
    from sandbox.websites import _bomb_png

    bomb = _bomb_png(30_000)
    assert len(bomb) <= 100
    with pytest.raises(UnusableImage, match="30000x30000 is more than 50000000 pixels"):
        to_webp(bomb)
    # 38 bytes that really decode to 268 M pixels (a gigabyte) if anything decodes them
    with pytest.raises(UnusableImage, match="16383x16383 is more than"):
        to_webp(webp_declaring(16383))


@pytest.mark.parametrize(
    "body",
    [
        b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
        _encode(Image.new("RGB", (8, 8)), "TIFF"),
    ],
)
def test_formats_libvips_could_read_but_photos_never_come_in_are_not_images(body):
    with pytest.raises(UnusableImage, match="not an image"):
        to_webp(body)


@pytest.mark.parametrize(("mode", "params"), [("L", {}), ("I;16", {}), ("LA", {}), ("RGB", {"bits": 16})])
def test_grey_and_16_bit_sources_become_8_bit_srgb(mode, params):
    if params:  # a 16-bit RGB PNG (Pillow writes none itself): libvips writes it
        source = pyvips.Image.black(6, 4, bands=3).copy(interpretation="rgb16").cast("ushort") + 40000
        body = source.cast("ushort").pngsave_buffer(bitdepth=16)
    else:
        body = _encode(Image.new(mode, (6, 4), 200 if mode != "I;16" else 50000), "PNG")
    out = Image.open(io.BytesIO(to_webp(body)[0]))
    assert out.mode == ("RGBA" if mode == "LA" else "RGB")
    r, g, b = out.convert("RGB").getpixel((1, 1))
    assert r == g == b and r > 150  # not clipped to white, not scaled to black


def test_an_animated_gif_stores_its_first_frame():
    frames = [Image.new("RGB", (10, 10), c) for c in ((255, 0, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    webp, size = to_webp(buf.getvalue())
    assert size == (10, 10) and Image.open(io.BytesIO(webp)).convert("RGB").getpixel((5, 5))[0] > 200


# --- the pipeline in-process: real sandbox images, real database -------------------------------


class SandboxEngine:
    """The engine's download_async, answered by the sandbox over loopback (the pipeline's own
    code decides, converts, stores and records; only Scrapy's downloader is left out)."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.running = True  # False once a shutdown stops the engine

    async def download_async(self, request):
        self.urls.append(request.url)
        return await asyncio.to_thread(fetch, request)


def product(dispensary_id: int, pid: str, image: str | None, brand: str | None = "Bud Bros") -> StoreProduct:
    return StoreProduct(
        dispensary_id, None, pid, "Name", "Name", brand, None, None, None, None, None, None, None, None, False,
        [], Potency(None, None), Potency(None, None), [], [], {}, image, [image] if image else [], None, None, None,
    )  # fmt: skip


class Harness:
    def __init__(self, db: str, store_dir: Path, **settings) -> None:
        project = BaseSettings()  # the project's settings, as `scrapy crawl` builds them
        project.setmodule("cannaspider.settings", priority="project")
        project.setdict({"DATABASE_URL": db, "IMAGES_STORE": str(store_dir), **settings}, priority="cmdline")
        self.crawler = get_crawler(ProductSpider, project.copy_to_dict())
        self.crawler.spider = ProductSpider.from_crawler(self.crawler, dispensary_id="1")
        self.engine = SandboxEngine()
        self.crawler.engine = self.engine  # type: ignore[assignment]
        self.writer = ProductWriterPipeline.from_crawler(self.crawler)
        self.images = ProductImagesPipeline.from_crawler(self.crawler)
        self.images.open_spider()

    async def crawl(self, items: list[StoreProduct]) -> list:
        passed = []
        for item in items:
            out = self.writer.process_item(item)
            out = self.images.process_item(out)
            assert out is item  # never held, never awaited
            passed.append(out)
        while True:  # as the engine does: the spider closes once no handler of spider_idle objects
            try:
                self.images.spider_idle()
                break
            except DontCloseSpider:
                await asyncio.sleep(0.01)
        await asyncio.gather(self.writer.close_spider(), self.images.close_spider())
        await self.crawler.spider.store.close()
        return passed

    def stat(self, name: str) -> int:
        return self.crawler.stats.get_value(f"cannaspider/{name}", 0)


@pytest.fixture
def store(db, sandbox):
    s = sandbox.stores("AZ")[0]
    return {"id": add_store(db, s), "slug": s["cName"], "base": sandbox.urls.base}


def local_paths(db: str, dispensary_id: int) -> dict[str, str | None]:
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            "SELECT provider_product_id, local_image_path FROM store_products WHERE dispensary_id = %s",
            (dispensary_id,),
        ).fetchall()
    return dict(rows)


def image_requests(sandbox) -> dict[str, int]:
    return {k.removeprefix("image:"): v for k, v in sandbox.requests().items() if k.startswith("image:")}


@pytest.mark.integration
def test_first_crawl_stores_webp_and_records_the_path(db, sandbox, store, tmp_path):
    d, base = store["id"], store["base"]
    items = [product(d, f"{i:024x}", f"{base}/images/products/p{i}.png") for i in range(5)]
    items.append(product(d, "f" * 24, None))  # no image: nothing to do
    harness = Harness(db, tmp_path / "images")
    asyncio.run(harness.crawl(items))
    paths = local_paths(db, d)
    assert paths["f" * 24] is None
    for i in range(5):
        url = f"{base}/images/products/p{i}.png"
        expected = product_image_path("AZ", store["slug"], "Bud Bros", f"{i:024x}", url)
        assert paths[f"{i:024x}"] == expected and expected.startswith(f"products/az/{store['slug']}/bud-bros/")
        stored = Image.open(tmp_path / "images" / expected)
        assert stored.format == "WEBP" and stored.size == (320, 320)
    assert harness.stat("images_stored") == 5 and harness.stat("images_paths_written") == 5
    assert not list((tmp_path / "images").rglob("*.tmp"))


@pytest.mark.integration
def test_never_downloaded_twice_in_one_crawl_nor_across_crawls(db, sandbox, store, tmp_path):
    d, base = store["id"], store["base"]
    url = f"{base}/images/products/once.png"
    first = Harness(db, tmp_path / "images")
    # the same product twice in one crawl (a store crawled twice in one process)
    asyncio.run(first.crawl([product(d, PID, url), product(d, PID, url)]))
    assert first.engine.urls == [url]
    # the next crawl: the product has its local image, nothing is even looked at
    second = Harness(db, tmp_path / "images")
    asyncio.run(second.crawl([product(d, PID, url)]))
    assert second.engine.urls == [] and second.stat("images_skipped_has_image") == 1
    assert image_requests(sandbox) == {"products/once": 1}


@pytest.mark.integration
def test_a_stores_query_is_sent_when_its_page_is_scheduled_so_its_products_are_planned_at_once(
    db, sandbox, store, tmp_path
):
    """A spider idle while a store's query was still out stayed open until the engine's next 5 s
    heartbeat (no download ends to make it look again): the query goes out with the store's first
    request, and its products find the answer in."""
    d, base = store["id"], store["base"]
    url = f"{base}/images/products/early.png"
    asyncio.run(Harness(db, tmp_path / "images").crawl([product(d, PID, url)]))
    second = Harness(db, tmp_path / "images")

    async def run() -> None:
        second.images.planner.request_scheduled(Request("http://127.0.0.1/graphql", meta={"dispensary_id": d}))
        second.images.planner.request_scheduled(Request("http://127.0.0.1/graphql", meta={"point": (1, 2)}))
        assert list(second.images.planner.loading) == [d]  # one query, for the store only
        await asyncio.gather(*second.images.planner.loaders)
        second.images.process_item(second.writer.process_item(product(d, PID, url)))
        # planned in process_item itself: no query waited for, nothing holds the spider open
        assert second.stat("images_skipped_has_image") == 1 and not second.images.planner.loading
        second.images.spider_idle()
        await asyncio.gather(second.writer.close_spider(), second.images.close_spider())
        await second.crawler.spider.store.close()

    asyncio.run(run())
    assert second.engine.urls == []


@pytest.mark.integration
def test_a_store_query_still_out_at_the_close_with_no_product_waiting_reports_nothing_left(
    db, sandbox, store, tmp_path, caplog
):
    """The query goes out when the store's first request is scheduled: a crawl that closes before
    any of its products arrived has left no image undone, and says none ("0 images not downloaded"
    it said)."""
    harness = Harness(db, tmp_path / "images")

    async def run() -> None:
        harness.images.planner.request_scheduled(
            Request("http://127.0.0.1/graphql", meta={"dispensary_id": store["id"]})
        )
        assert harness.images.planner.loading == {store["id"]: []}  # out, nobody waiting
        await asyncio.gather(harness.writer.close_spider(), harness.images.close_spider())
        await harness.crawler.spider.store.close()

    with caplog.at_level(logging.INFO, logger="cannaspider.pipelines.images"):
        asyncio.run(run())
    assert not [r for r in caplog.records if "not downloaded" in r.getMessage()]
    assert not harness.images.planner.loaders  # the query was awaited, not left running


class IdleEngine(SandboxEngine):
    """An engine whose downloads are done (spider_is_idle), for units/lifecycle.py's idle check: it
    records the close that check starts."""

    def __init__(self, spider) -> None:
        super().__init__()
        self.spider = spider
        self.closed: list[str] = []

    def spider_is_idle(self) -> bool:
        return True

    def needs_backout(self) -> bool:
        return bool(self.closed)

    async def close_spider_async(self, *, reason: str) -> None:
        self.closed.append(reason)


@pytest.mark.integration
def test_a_crawl_held_open_for_images_ends_once_they_settle_not_on_the_next_heartbeat(db, sandbox, store, tmp_path):
    """The pipeline holds an idle crawl open while an image is out (DontCloseSpider); the engine
    would look again only on its next heartbeat (5 s), so the pipeline runs the idle check itself
    once that image is stored (units/lifecycle.py)."""
    d, base = store["id"], store["base"]
    sandbox.faults({"kind": "slow", "operation": "image", "delay": 0.5})
    harness = Harness(db, tmp_path / "images")
    harness.engine = engine = IdleEngine(harness.crawler.spider)
    harness.crawler.engine = engine  # type: ignore[assignment]
    harness.crawler.crawling = True

    async def run() -> None:
        harness.images.process_item(harness.writer.process_item(product(d, PID, f"{base}/images/products/slow.png")))
        await asyncio.sleep(0.2)  # the image is out
        with pytest.raises(DontCloseSpider):
            harness.images.spider_idle()
        for _ in range(100):  # the image settles; nobody asks spider_idle again
            if engine.closed:
                break
            await asyncio.sleep(0.05)
        await asyncio.gather(harness.writer.close_spider(), harness.images.close_spider())
        await harness.crawler.spider.store.close()

    asyncio.run(run())
    assert engine.closed == ["finished"] and harness.stat("images_stored") == 1


@pytest.mark.integration
def test_backfill_when_local_image_path_is_null_and_the_file_is_not_fetched_again(db, sandbox, store, tmp_path, sql):
    d, base = store["id"], store["base"]
    url = f"{base}/images/products/backfill.png"
    asyncio.run(Harness(db, tmp_path / "images").crawl([product(d, PID, url)]))
    path = local_paths(db, d)[PID]
    # the row lost its path (a crash between the write and the update, or a backfill): the file is
    # in the store, so the path is recorded again without a download
    sql("UPDATE store_products SET local_image_path = NULL")
    again = Harness(db, tmp_path / "images")
    asyncio.run(again.crawl([product(d, PID, url)]))
    assert again.engine.urls == [] and again.stat("images_already_stored") == 1
    assert local_paths(db, d)[PID] == path
    # the file is gone too: downloaded again
    sql("UPDATE store_products SET local_image_path = NULL")
    (tmp_path / "images" / path).unlink()
    third = Harness(db, tmp_path / "images")
    asyncio.run(third.crawl([product(d, PID, url)]))
    assert third.engine.urls == [url] and (tmp_path / "images" / path).exists()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("fault", "stat", "message"),
    [
        ("404", "http", "HTTP 404"),
        ("html", "not_an_image", "not an image (HTML)"),
        ("truncated", "broken", "broken PNG image"),
        ("empty", "empty", "empty body"),
        ("bomb", "bomb", "decompression bomb"),
    ],
)
def test_unusable_images_are_skipped_and_the_product_saved(db, sandbox, store, tmp_path, caplog, fault, stat, message):
    d, base = store["id"], store["base"]
    good = product(d, "a" * 24, f"{base}/images/products/fine.png")
    bad = product(d, PID, f"{base}/images/products/broken-{fault}-x.png")
    harness = Harness(db, tmp_path / "images")
    with caplog.at_level(logging.WARNING, logger="cannaspider.pipelines.images"):
        passed = asyncio.run(harness.crawl([bad, good]))
    assert passed == [bad, good]
    paths = local_paths(db, d)
    assert paths[PID] is None and paths["a" * 24] is not None  # both rows saved, the bad one without image
    assert harness.stat(f"images_failed/{stat}") == 1 and harness.stat("images_stored") == 1
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and message in lines[0] and PID in lines[0], lines
    assert not caplog.records[0].exc_info  # one line, no traceback
    assert [p.name for p in (tmp_path / "images").rglob("*.webp")] == [Path(paths["a" * 24]).name]


@pytest.mark.integration
@pytest.mark.parametrize(
    "url",
    ["file://{local}", "file:///etc/passwd", "ftp://127.0.0.1:1/x.png", "s3://node-bucket/x.png", "data:,x"],
)
def test_an_image_url_that_is_not_http_is_never_fetched_nor_stored(db, sandbox, store, tmp_path, caplog, url):
    """The second wall behind the normalizer (docs/images.md): whatever built the item, a file:,
    ftp:, s3: or data: URL never reaches the downloader, and no line says anything about the disk."""
    local = tmp_path / "local.png"
    Image.new("RGB", (320, 320), "red").save(local)
    url = url.format(local=local)
    d = store["id"]
    item = product(d, PID, url)
    item.brand_logo_url = url
    harness = Harness(db, tmp_path / "images")
    with caplog.at_level(logging.DEBUG, logger="cannaspider.pipelines.images"):
        asyncio.run(harness.crawl([item]))
    assert harness.engine.urls == []
    assert not list((tmp_path / "images").rglob("*.webp")) and local_paths(db, d) == {PID: None}
    assert harness.stat("images_failed/scheme") == 2 and not caplog.records


@pytest.mark.integration
def test_a_raw_product_with_local_file_images_gets_none_fetched_and_the_refusal_counted(db, sandbox, store, tmp_path):
    d = store["id"]
    local = tmp_path / "local.png"
    Image.new("RGB", (320, 320), "red").save(local)
    raw = _product(42, store["slug"], 1, 0, store["base"])
    raw.update({"Image": f"file://{local}", "images": [{"url": "file:///etc/passwd"}, {"url": "s3://b/k.png"}]})
    raw["brand"] = {**raw["brand"], "imageUrl": "ftp://127.0.0.1:1/logo.png"}
    harness = Harness(db, tmp_path / "images")
    normalized = NormalizeProductPipeline.from_crawler(harness.crawler).process_item(RawProduct(d, None, raw))
    asyncio.run(harness.crawl([normalized]))
    assert harness.engine.urls == [] and not list((tmp_path / "images").rglob("*.webp"))
    assert harness.stat("image_urls_refused") == 4 and harness.stat("images_failed/scheme") == 0


@pytest.mark.integration
def test_a_download_that_fails_is_skipped(db, sandbox, store, tmp_path, caplog):
    d = store["id"]
    harness = Harness(db, tmp_path / "images")

    async def refused(request):
        raise ConnectionRefusedError("Connection was refused by other side")

    harness.engine.download_async = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="cannaspider.pipelines.images"):
        asyncio.run(harness.crawl([product(d, PID, "http://127.0.0.1:1/x.png")]))
    assert local_paths(db, d) == {PID: None}
    assert "download failed" in caplog.text and harness.stat("images_failed/connectionrefusederror") == 1


@pytest.mark.integration
def test_an_image_download_never_holds_the_item_nor_its_stores_rows(db, sandbox, store, tmp_path):
    d, base = store["id"], store["base"]
    harness = Harness(db, tmp_path / "images")
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return await asyncio.to_thread(fetch, request)

    harness.engine.download_async = slow  # type: ignore[method-assign]

    async def run() -> None:
        item = product(d, PID, f"{base}/images/products/slow.png")
        assert harness.images.process_item(harness.writer.process_item(item)) is item
        await harness.writer.flush()  # what a store's completion waits for: committed, image or not
        assert harness.writer.store.ledger.runs[(d, None)].written == 1
        await asyncio.sleep(0.05)
        with pytest.raises(DontCloseSpider):  # the downloader must stay open for the queued image
            harness.images.spider_idle()
        release.set()
        await asyncio.gather(harness.writer.close_spider(), harness.images.close_spider())
        harness.images.spider_idle()  # nothing left: the spider may close
        await harness.crawler.spider.store.close()

    asyncio.run(run())
    assert local_paths(db, d)[PID] is not None


@pytest.mark.integration
def test_a_shutdown_downloads_no_more_queued_images_and_leaves_them_to_the_next_crawl(
    db, sandbox, store, tmp_path, caplog
):
    """A cancelled node (SIGINT/SIGTERM, Scrapyd's cancel.json) stops the engine, which then waits
    for every download in flight before the pipeline's close_spider: workers that went on taking
    queued images drained the whole queue first (600 slow images held a cancelled Scrapyd job past
    a minute in CI). The image out when the engine stops is finished; the rest stay NULL."""
    d, base = store["id"], store["base"]
    harness = Harness(db, tmp_path / "images", IMAGES_CONCURRENCY=1)
    first_out = asyncio.Event()
    release = asyncio.Event()

    async def slow(request):
        harness.engine.urls.append(request.url)
        first_out.set()
        await release.wait()
        return await asyncio.to_thread(fetch, request)

    harness.engine.download_async = slow  # type: ignore[method-assign]
    pids = [f"{i:024x}" for i in range(5)]

    async def run() -> None:
        for i, pid in enumerate(pids):
            item = product(d, pid, f"{base}/images/products/q{i}.png")
            harness.images.process_item(harness.writer.process_item(item))
        await asyncio.wait_for(first_out.wait(), 10)
        harness.engine.running = False  # the shutdown: engine.stop_async, before the slot drains
        release.set()
        for _ in range(100):  # the engine waits for the downloads in flight before any close_spider
            if harness.stat("images_stored") and not harness.images.waiting_for_download:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # time for a worker that goes on to take the next image
        await asyncio.gather(harness.writer.close_spider(), harness.images.close_spider())
        await harness.crawler.spider.store.close()

    with caplog.at_level(logging.INFO, logger="cannaspider.pipelines.images"):
        asyncio.run(run())
    paths = local_paths(db, d)
    assert harness.engine.urls == [f"{base}/images/products/q0.png"] and paths[pids[0]] is not None
    assert [paths[pid] for pid in pids[1:]] == [None] * 4  # the next crawl downloads these
    assert harness.stat("images_stored") == 1
    left = [r.getMessage() for r in caplog.records if "not downloaded (the crawl closed first)" in r.getMessage()]
    assert left == ["images: 4 images not downloaded (the crawl closed first): the next crawl gets them"]


@pytest.mark.integration
def test_an_image_is_asked_for_with_its_own_timeout_size_cap_and_no_retry(db, sandbox, store, tmp_path):
    """A slow 200 MB image held a finished crawl open for 4 × DOWNLOAD_TIMEOUT (issue 16): the
    pipeline's requests carry IMAGES_DOWNLOAD_TIMEOUT_S, IMAGES_MAX_BYTES (the downloader cancels
    a larger body) and IMAGES_RETRY_TIMES, which Scrapy's downloader and RetryMiddleware read."""
    d, base = store["id"], store["base"]
    harness = Harness(db, tmp_path / "images", IMAGES_DOWNLOAD_TIMEOUT_S=7.5, IMAGES_MAX_BYTES=4096)
    asked: list = []

    async def download(request):
        asked.append(request)
        return await asyncio.to_thread(fetch, request)

    harness.engine.download_async = download  # type: ignore[method-assign]
    asyncio.run(harness.crawl([product(d, PID, f"{base}/images/products/capped.png")]))
    [request] = asked
    assert request.meta["download_timeout"] == 7.5 < harness.crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
    assert request.meta["download_maxsize"] == 4096 and request.meta["max_retry_times"] == 0
    assert local_paths(db, d)[PID] is not None  # an image under the cap is stored as before


# --- end to end: `scrapy crawl` against the sandbox ----------------------------------------


@pytest.mark.integration
def test_an_image_queued_as_the_last_worker_finishes_still_gets_downloaded(db, sandbox, store, tmp_path):
    """The worker that just found the queue empty is done but still in the pipeline's set until
    its done-callback runs: an image queued in that moment must get a worker of its own, or the
    spider stays open forever (seen in the demo: the crawl idled after its last store)."""
    d, base = store["id"], store["base"]
    h = Harness(db, tmp_path / "images", IMAGES_CONCURRENCY=1)

    async def run() -> None:
        finished = asyncio.ensure_future(asyncio.sleep(0))
        await finished  # done, its callbacks (none) run: the state between "done" and "discarded"
        h.images.workers.add(finished)
        h.images.process_item(h.writer.process_item(product(d, "a" * 24, f"{base}/images/products/p1.png")))
        for _ in range(500):  # the engine asks spider_idle until nobody objects
            try:
                h.images.spider_idle()
                break
            except DontCloseSpider:
                await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"the spider never idles: {len(h.images.queue)} image(s) queued, no worker")
        h.images.workers.discard(finished)
        await asyncio.gather(h.writer.close_spider(), h.images.close_spider())
        await h.crawler.spider.store.close()

    asyncio.run(run())
    assert h.stat("images_stored") == 1 and local_paths(db, d)["a" * 24]


@pytest.mark.integration
def test_a_crawl_stores_every_image_once_and_the_next_crawl_downloads_none(db, sandbox, crawl, scrapy_env, sql):
    s = sandbox.stores("AZ")[0]
    d = add_store(db, s)
    first = crawl("product_resync", dispensary_id=d)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = sql(
        "SELECT image_url, local_image_path FROM store_products WHERE dispensary_id = %s AND image_url IS NOT NULL",
        (d,),
    )
    assert rows and all(path for _, path in rows)
    store_dir = Path(scrapy_env["CANNASPIDER_DATA_DIR"]) / "images"
    assert {str(p.relative_to(store_dir)) for p in (store_dir / "products").rglob("*.webp")} == {
        path for _, path in rows
    }
    assert sql("SELECT status FROM crawl_runs WHERE dispensary_id = %s", (d,)) == [("complete",)]
    downloads = image_requests(sandbox)
    products = {k: n for k, n in downloads.items() if k.startswith("products/")}
    logos = {k: n for k, n in downloads.items() if k.startswith("brands/")}
    assert len(products) == len(rows) and set(products.values()) == {1}
    assert logos and set(logos.values()) == {1}  # each brand's logo once, however many products
    assert len(list((store_dir / "brands").rglob("logo-*.webp"))) == len(logos)
    # every image came through the store's proxy (its stealth session), none directly
    counts = sandbox.requests()
    assert counts.get("image via:sandbox") == len(products) + len(logos) and "image via:-" not in counts
    second = crawl("product_resync", dispensary_id=d)
    assert second.returncode == 0, second.stderr[-3000:]
    assert image_requests(sandbox) == downloads  # not one image fetched again
    assert "images_skipped_has_image" in second.stderr


@pytest.mark.integration
def test_a_brand_logo_that_failed_is_asked_for_again_by_the_brands_next_product(db, sandbox, store, tmp_path):
    """A brand's logo path is made once per crawl (every product of the brand carries the logo),
    but a logo whose download failed is released: the brand's next product asks for it again,
    and once it is stored no product asks again."""
    d, base = store["id"], store["base"]
    logo = f"{base}/images/products/bud-bros-logo.png"
    harness = Harness(db, tmp_path / "images")
    answer = harness.engine.download_async

    async def down_once(request):
        if not harness.engine.urls:
            harness.engine.urls.append(request.url)
            raise ConnectionRefusedError("connection refused")
        return await answer(request)

    harness.engine.download_async = down_once  # type: ignore[method-assign]

    async def run() -> None:
        for i in range(3):
            item = product(d, f"{i:024x}", None)
            item.brand_logo_url = logo
            harness.images.process_item(harness.writer.process_item(item))
            await asyncio.gather(*harness.images.planner.loaders)
            while harness.images.workers:  # this product's logo settled before the next one comes
                await asyncio.gather(*harness.images.workers)
        await asyncio.gather(harness.writer.close_spider(), harness.images.close_spider())
        await harness.crawler.spider.store.close()

    asyncio.run(run())
    assert harness.engine.urls == [logo, logo]  # failed, asked again by the 2nd product, not by the 3rd
    assert harness.stat("images_failed/connectionrefusederror") == 1 and harness.stat("images_stored") == 1
    assert [p.relative_to(tmp_path / "images").as_posix() for p in (tmp_path / "images").rglob("*.webp")] == [
        brand_logo_path("Bud Bros", logo)
    ]


@pytest.mark.integration
def test_the_image_phase_says_how_far_it_is_at_the_interval(db, sandbox, store, tmp_path, caplog):
    """IMAGES_PROGRESS_INTERVAL_S: images done out of those queued, while they download, then the last."""
    d, base = store["id"], store["base"]
    sandbox.faults({"kind": "slow", "operation": "image", "delay": 0.3})
    items = [product(d, f"{i:024x}", f"{base}/images/products/p{i}.png") for i in range(12)]
    harness = Harness(db, tmp_path / "images", IMAGES_PROGRESS_INTERVAL_S=0.2, IMAGES_CONCURRENCY=2)
    with caplog.at_level(logging.INFO, logger="cannaspider.pipelines.images"):
        asyncio.run(harness.crawl(items))
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("images: ") and " of " in r.getMessage()
    ]
    said = [tuple(map(int, re.match(r"images: (\d+) of (\d+) done", line).groups())) for line in lines]
    assert len(said) >= 3 and said == sorted(said) and len(set(said)) == len(said), lines  # only when it moved
    assert said[0][0] < 12 and lines[-1] == "images: 12 of 12 done, 0 queued, 0 downloading (12 stored, 0 failed)"


@pytest.mark.integration
def test_images_that_finish_within_the_interval_say_nothing(db, sandbox, store, tmp_path, caplog):
    d, base = store["id"], store["base"]
    harness = Harness(db, tmp_path / "images", IMAGES_PROGRESS_INTERVAL_S=30)
    with caplog.at_level(logging.INFO, logger="cannaspider.pipelines.images"):
        asyncio.run(harness.crawl([product(d, "a" * 24, f"{base}/images/products/p1.png")]))
    assert harness.stat("images_stored") == 1
    assert not [r for r in caplog.records if " done, " in r.getMessage()]
