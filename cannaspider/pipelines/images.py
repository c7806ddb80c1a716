"""Product images, stored once as webp (docs/images.md).

A subclass of Scrapy's ImagesPipeline: Scrapy's file stores (a local folder, s3://, gs://,
ftp://, chosen by IMAGES_STORE), its settings (IMAGES_MIN_WIDTH/HEIGHT, MEDIA_ALLOW_REDIRECTS)
and its download path (the engine's downloader, so the downloader middlewares and any proxy layer
apply) are kept; what changes:

- The file is webp, not JPEG (cannaspider/images/convert.py), at the seed's layout
  (cannaspider/images/paths.py), and the product's store_products.local_image_path is set once it
  is written, by a batched UPDATE (ImagePathWriter), never a round trip per product.
- Which products need a download is the seed's rule: a product whose row already has a
  local_image_path is skipped; a new one, or one whose local_image_path is NULL, is downloaded. The
  store's products that have an image are read once, by one query, when its first product arrives.
  A path already claimed in this crawl is never queued twice, and a file already in the store is
  never fetched again (its path is recorded without a download).
- The item is never held for its image. Scrapy's MediaPipeline.process_item returns only when the
  item's downloads are done: that would hold the response's slot in the scraper and delay the
  store's CrawlCompletion behind image downloads. Here process_item only queues the image (a few
  strings, not the item) and returns the item at once; IMAGES_CONCURRENCY workers download the
  queue beside the crawl, so images count for nothing in the store's completion or its
  out-of-stock judgement. The spider is kept open (spider_idle) while images wait for a download;
  conversions and database updates still running when it closes are finished by close_spider.
- A failed or unusable image (HTTP error, HTML, a truncated file, a decompression bomb, an empty
  body) is one warning line and a stat (`cannaspider/images_failed/<reason>`); its product keeps
  local_image_path NULL, so the next crawl tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections import defaultdict, deque
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import psycopg
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.pipelines.files import FSFilesStore, StatInfo
from scrapy.pipelines.images import ImageException, ImagesPipeline
from scrapy.pipelines.media import FileInfo, MediaPipeline
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import first_line
from cannaspider.images import vips
from cannaspider.images.convert import UnusableImage
from cannaspider.images.paths import brand_logo_path, product_image_path
from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import OUTAGE_ERRORS, batch_document, encode_row
from cannaspider.storable.urls import HTTP_SCHEMES

logger = logging.getLogger(__name__)


def images_store_uri(settings) -> str:
    """IMAGES_STORE, or CANNASPIDER_DATA_DIR/images when it is not set."""
    return settings.get("IMAGES_STORE") or str(Path(settings.get("CANNASPIDER_DATA_DIR") or ".data") / "images")


class AtomicFSFilesStore(FSFilesStore):
    """Scrapy's local store, but a file appears whole or not at all (written beside, then renamed),
    off the event loop: a crash mid-write must not leave a truncated file that every later crawl
    would take for the stored image. Folders are made when a file is written, not when the crawl
    starts: a data folder that cannot be used is reported by the crawl's own checks, in one line."""

    def __init__(self, basedir: str | os.PathLike[str]):  # not FSFilesStore.__init__: it makes the folder
        basedir = str(basedir)
        self.basedir = basedir.split("://", 1)[1] if "://" in basedir else basedir
        self.created_directories = defaultdict(set)

    def persist_file(  # type: ignore[override]  # the store protocol (FilesStoreProtocol) allows a Deferred
        self,
        path: str | os.PathLike[str],
        buf: BytesIO,
        info: MediaPipeline.SpiderInfo,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Deferred[Any]:
        return deferred_from_coro(asyncio.to_thread(self._write, self._get_filesystem_path(path), buf.getvalue()))

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{id(data):x}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)

    def stat_file(self, path: str | os.PathLike[str], info: MediaPipeline.SpiderInfo) -> StatInfo:
        # existence is all that matters here (a stored image never expires): no checksum read
        try:
            return {"last_modified": self._get_filesystem_path(path).stat().st_mtime}
        except OSError:
            return {}


@dataclass(slots=True)
class ImageJob:
    dispensary_id: int
    provider: str
    provider_product_id: str | None  # None: a brand logo (no row to update)
    url: str
    path: str


@dataclass(slots=True)
class StoreImages:
    """What the images of one store's products need from the database, read once per crawl."""

    state: str | None
    store: str | None
    with_image: set[str] = field(default_factory=set)


STORE_QUERY = """
SELECT d.state, coalesce(nullif(d.slug, ''), d.name),
       ARRAY(SELECT provider_product_id FROM store_products
              WHERE dispensary_id = d.id AND local_image_path IS NOT NULL)
  FROM dispensaries d WHERE d.id = %s
"""

# One statement per batch: the (dispensary, provider, product, path) rows as one JSON document.
# Returns the rows it found, so a product whose row is still in the product writer's buffer is
# retried at the next flush instead of lost.
UPDATE_PATHS = """
WITH batch AS (
    SELECT (r->>0)::bigint AS dispensary_id, r->>1 AS provider, r->>2 AS provider_product_id, r->>3 AS path
      FROM jsonb_array_elements(%t) AS r)
UPDATE store_products sp SET local_image_path = b.path
  FROM batch b
 WHERE sp.dispensary_id = b.dispensary_id AND sp.provider = b.provider
   AND sp.provider_product_id = b.provider_product_id
RETURNING sp.dispensary_id, sp.provider, sp.provider_product_id
"""


class ImagePathWriter:
    """local_image_path updates, written DB_WRITE_BATCH_SIZE at a time in one statement."""

    def __init__(self, crawler: Crawler, store: CrawlStore):
        self.crawler = crawler
        self.store = store
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE", 1000)
        self.rows: dict[tuple[int, str, str], str] = {}  # (dispensary, provider, product) → path
        self.new_rows = 0  # added since the last flush (rows kept for a retry do not start one)
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Task | None = None

    def add(self, dispensary_id: int, provider: str, provider_product_id: str, path: str) -> None:
        self.rows[(dispensary_id, provider, provider_product_id)] = path
        self.new_rows += 1
        if self.new_rows >= self.batch_size and (self.inflight is None or self.inflight.done()):
            self.inflight = asyncio.ensure_future(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        try:
            await self.flush()
        except Exception:  # logged by flush; the rows are kept for the next one
            return

    async def flush(self, *, final: bool = False) -> None:
        async with self.lock:
            rows, self.rows = self.rows, {}
            self.new_rows = 0
            if not rows:
                return
            try:
                pool = await self.store.open()
                async with pool.connection() as conn:
                    document = batch_document([encode_row((*key, path)) for key, path in rows.items()])
                    found = await (await conn.execute(UPDATE_PATHS, (document,))).fetchall()
            except OUTAGE_ERRORS + (psycopg.Error,) as exc:
                for key, path in rows.items():
                    self.rows.setdefault(key, path)
                logger.error("images: %d local_image_path updates not written: %s", len(rows), first_line(exc))
                raise
            for key in found:
                rows.pop((key[0], key[1], key[2]), None)
            self.crawler.stats.inc_value("cannaspider/images_paths_written", len(found))
            if final:
                if rows:  # their products were never stored (refused rows): the next crawl retries
                    self.crawler.stats.inc_value("cannaspider/images_paths_without_product", len(rows))
                return
            for key, path in rows.items():  # their product rows are still in the writer's buffer
                self.rows.setdefault(key, path)

    async def close(self) -> None:
        if self.inflight is not None:
            await asyncio.gather(self.inflight, return_exceptions=True)
        await self.store.flush_all()  # the product rows first: an UPDATE needs its row
        await self.flush(final=True)


class ProductImagesPipeline(ImagesPipeline):
    MEDIA_NAME = "image"
    STORE_SCHEMES = {**ImagesPipeline.STORE_SCHEMES, "": AtomicFSFilesStore, "file": AtomicFSFilesStore}

    def __init__(self, store_uri: str | os.PathLike[str], download_func: None = None, *, crawler: Crawler):
        super().__init__(store_uri, crawler=crawler)
        settings = crawler.settings
        self.db = CrawlStore.for_crawler(crawler)
        self.paths = ImagePathWriter(crawler, self.db)
        self.quality = settings.getint("IMAGES_WEBP_QUALITY", 90)
        vips.configure(settings)
        self.convert = load_object(settings["IMAGES_CONVERTER"])  # (body, quality=, max_pixels=) -> (webp, size)
        self.max_pixels = settings.getint("IMAGES_MAX_PIXELS", 50_000_000)
        self.concurrency = max(1, settings.getint("IMAGES_CONCURRENCY", 8))
        self.download_timeout = settings.getfloat("IMAGES_DOWNLOAD_TIMEOUT_S")
        self.max_bytes = settings.getint("IMAGES_MAX_BYTES")
        self.retry_times = settings.getint("IMAGES_RETRY_TIMES")
        self.stores: dict[int, StoreImages] = {}
        self.loading: dict[int, list[StoreProduct]] = {}  # products waiting for their store's query
        self.loaders: set[asyncio.Task] = set()
        self.claimed: set[str] = set()  # paths queued, written or found in this crawl
        self.logos: set[tuple[str | None, str]] = set()  # (brand, logo URL) seen in this crawl
        self.queue: deque[ImageJob] = deque()
        self.workers: set[asyncio.Task] = set()
        self.waiting_for_download = 0  # jobs taken by a worker whose response has not arrived
        self.closing = False  # the downloader is closed: nothing more is queued

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProductImagesPipeline:
        cls._update_stores(crawler.settings)
        pipeline = cls(images_store_uri(crawler.settings), crawler=crawler)
        crawler.signals.connect(pipeline.spider_idle, signal=signals.spider_idle)
        return pipeline

    # -- deciding (synchronous: the item goes on at once) --------------------------------
    def process_item(self, item: Any) -> Any:  # type: ignore[override]  # never waits: see the module docstring
        if type(item) is not StoreProduct or not (item.image_url or item.brand_logo_url):
            return item
        known = self.stores.get(item.dispensary_id)
        if known is not None:
            self._plan(item, known)
        elif item.dispensary_id in self.loading:
            self.loading[item.dispensary_id].append(item)
        else:
            self.loading[item.dispensary_id] = [item]
            task = asyncio.ensure_future(self._load_store(item.dispensary_id))
            self.loaders.add(task)
            task.add_done_callback(self.loaders.discard)
        return item

    async def _load_store(self, dispensary_id: int) -> None:
        try:
            pool = await self.db.open()
            async with pool.connection() as conn:
                row = await (await conn.execute(STORE_QUERY, (dispensary_id,))).fetchone()
        except Exception as exc:
            waiting = self.loading.pop(dispensary_id, [])
            logger.error(
                "images: dispensary %s: cannot read which products have an image (%s): %d images not "
                "downloaded in this crawl",
                dispensary_id,
                first_line(exc),
                len(waiting),
            )
            return
        known = StoreImages(row[0], row[1], set(row[2])) if row else StoreImages(None, None)
        self.stores[dispensary_id] = known
        for item in self.loading.pop(dispensary_id, []):
            self._plan(item, known)

    def _plan(self, item: StoreProduct, known: StoreImages) -> None:
        logo = getattr(item, "brand_logo_url", None)
        if logo:
            self._enqueue(
                ImageJob(item.dispensary_id, item.provider, None, logo, brand_logo_path(item.brand_name_raw, logo))
            )
        if not item.image_url:
            return
        if item.provider_product_id in known.with_image:
            self.crawler.stats.inc_value("cannaspider/images_skipped_has_image")
            return
        path = product_image_path(
            known.state, known.store, item.brand_name_raw, item.provider_product_id, item.image_url
        )
        if self._enqueue(ImageJob(item.dispensary_id, item.provider, item.provider_product_id, item.image_url, path)):
            known.with_image.add(item.provider_product_id)

    def _enqueue(self, job: ImageJob) -> bool:
        if not job.url[:8].lower().startswith(HTTP_SCHEMES):
            # the normalizer drops these already; whatever built this item, a file:, ftp: or s3: URL
            # is never fetched (docs/images.md), and not logged: no line tells what is on this disk
            self.crawler.stats.inc_value("cannaspider/images_failed/scheme")
            return False
        if job.path in self.claimed or self.closing:
            return False
        self.claimed.add(job.path)
        self.queue.append(job)
        self._start_workers()
        return True

    def _start_workers(self) -> None:
        # A worker that has just found the queue empty is done, but leaves `workers` only when its
        # done-callback runs, a loop step later: counted as live it would leave this job without a
        # worker, and the spider open forever (spider_idle). Only unfinished workers count.
        live = sum(not worker.done() for worker in self.workers)
        for _ in range(min(self.concurrency - live, len(self.queue))):
            worker = asyncio.ensure_future(self._work())
            self.workers.add(worker)
            worker.add_done_callback(self.workers.discard)

    # -- downloading -------------------------------------------------------------------------
    async def _work(self) -> None:
        while self.queue and not self.closing:
            job = self.queue.popleft()
            try:
                await self._fetch(job)
            except Exception as exc:  # a bug must cost one image, never the crawl
                logger.exception("images: %s: unexpected %s", job.url, type(exc).__name__)

    async def _fetch(self, job: ImageJob) -> None:
        stats = self.crawler.stats
        # through the store's stealth session (its proxy, identity and TLS: docs/stealth.md), in a
        # download slot of their own so images never take the API pages' turns at that proxy, and
        # without judging the proxy (a failed image is skipped, not rotated)
        meta = {
            "image_path": job.path,
            "stealth": True,
            "dispensary_id": job.dispensary_id,
            "stealth_slot": "images",
            "proxy_health": False,
            # an image is worth less than the crawl it would hold open: its own short timeout, a
            # size cap the downloader enforces, no retry (the next crawl asks for it again)
            "download_timeout": self.download_timeout,
            "download_maxsize": self.max_bytes,
            "max_retry_times": self.retry_times,
        }
        request = Request(job.url, callback=NO_CALLBACK, meta=meta)
        if self.handle_httpstatus_list:  # MEDIA_ALLOW_REDIRECTS: let the redirect middleware follow them
            request.meta["handle_httpstatus_list"] = self.handle_httpstatus_list
        else:
            request.meta["handle_httpstatus_all"] = True
        self.waiting_for_download += 1
        try:
            if await self._stored_already(job.path):
                stats.inc_value("cannaspider/images_already_stored")
                self._written(job)
                return
            try:
                response = await self.crawler.engine.download_async(request)
            except IgnoreRequest as exc:
                logger.debug("images: %s not downloaded: %s", job.url, exc)
                stats.inc_value("cannaspider/images_failed/filtered")
                return
            except Exception as exc:
                self._failed(job, type(exc).__name__.lower(), f"download failed: {first_line(exc)}")
                return
        finally:
            self.waiting_for_download -= 1
        try:
            await self.media_downloaded(response, request, self.spiderinfo)
        except (ImageException, UnusableImage) as exc:
            self._failed(job, getattr(exc, "reason", "unusable"), str(exc))
            return
        except OUTAGE_ERRORS + (OSError,) as exc:
            self._failed(job, "store", f"not written to the store: {first_line(exc)}")
            return
        stats.inc_value("cannaspider/images_stored")
        self._written(job)

    async def _stored_already(self, path: str) -> bool:
        try:
            result: Any = self.store.stat_file(path, self.spiderinfo)
            if isinstance(result, Deferred):
                result = await maybe_deferred_to_future(result)
        except Exception:  # as Scrapy's media_to_download: a store that cannot tell means "download it"
            return False
        return bool(result and result.get("last_modified"))

    def _written(self, job: ImageJob) -> None:
        if job.provider_product_id is not None:
            self.paths.add(job.dispensary_id, job.provider, job.provider_product_id, job.path)

    def _failed(self, job: ImageJob, reason: str, message: str) -> None:
        self.crawler.stats.inc_value(f"cannaspider/images_failed/{reason}")
        self.claimed.discard(job.path)  # another product (or crawl) may ask again
        what = f"product {job.provider_product_id}" if job.provider_product_id else "brand logo"
        logger.warning("images: dispensary %s %s: %s skipped: %s", job.dispensary_id, what, job.url, message)

    # -- Scrapy's hooks, for webp ----------------------------------------------------------
    async def media_downloaded(
        self, response: Response, request: Request, info: MediaPipeline.SpiderInfo, *, item: Any = None
    ) -> FileInfo:
        # FilesPipeline's checks, each a one-line reason instead of a logged traceback
        if response.status != 200:
            raise _unusable("http", f"HTTP {response.status}")
        if not response.body:
            raise _unusable("empty", "empty body (0 bytes)")
        status = "cached" if "cached" in response.flags else "downloaded"
        self.inc_stats(status)
        path = self.file_path(request, response=response, info=info, item=item)
        checksum = await self.image_downloaded(response, request, info, item=item)
        return {"url": request.url, "path": path, "checksum": checksum, "status": status}

    async def image_downloaded(
        self, response: Response, request: Request, info: MediaPipeline.SpiderInfo, *, item: Any = None
    ) -> str:
        try:
            # decoding and encoding hold a core for tens of milliseconds: never on the event loop
            webp, (width, height) = await asyncio.to_thread(
                self.convert, response.body, quality=self.quality, max_pixels=self.max_pixels
            )
        except UnusableImage as exc:
            raise _unusable(_reason(str(exc)), str(exc)) from None
        if width < self.min_width or height < self.min_height:
            raise _unusable("small", f"too small ({width}x{height} < {self.min_width}x{self.min_height})")
        path = self.file_path(request, response=response, info=info, item=item)
        persisted = self.store.persist_file(
            path, BytesIO(webp), info, meta={"width": width, "height": height}, headers={"Content-Type": "image/webp"}
        )
        if isinstance(persisted, Deferred):
            await maybe_deferred_to_future(persisted)
        return hashlib.md5(webp, usedforsecurity=False).hexdigest()

    def file_path(
        self,
        request: Request,
        response: Response | None = None,
        info: MediaPipeline.SpiderInfo | None = None,
        *,
        item: Any = None,
    ) -> str:
        return request.meta["image_path"]

    def get_media_requests(self, item: Any, info: MediaPipeline.SpiderInfo) -> list[Request]:
        return []  # images are queued by process_item, never through MediaPipeline.process_item

    def item_completed(self, results, item: Any, info: MediaPipeline.SpiderInfo) -> Any:
        return item  # StoreProduct.images keeps the source URLs

    # -- the end of the crawl ------------------------------------------------------------
    def spider_idle(self) -> None:
        # queued images still need the downloader, which closes with the spider
        if self.queue or self.waiting_for_download or self.loading:
            self._start_workers()  # (none missing, unless a bug left queued jobs without one)
            raise DontCloseSpider

    async def close_spider(self) -> None:
        self.closing = True
        if self.queue or self.loading:  # a crawl cut short: these stay NULL and the next crawl backfills them
            left = len(self.queue) + sum(len(v) for v in self.loading.values())
            logger.info("images: %d images not downloaded (the crawl closed first): the next crawl gets them", left)
            self.queue.clear()
        while self.workers or self.loaders:
            await asyncio.gather(*self.workers, *self.loaders, return_exceptions=True)
        try:
            await self.paths.close()
        except Exception:  # logged by the writer: those products keep NULL and are downloaded again
            return


def _unusable(reason: str, message: str) -> ImageException:
    exc = ImageException(message)
    exc.reason = reason  # type: ignore[attr-defined]
    return exc


def _reason(message: str) -> str:
    for key, reason in (
        ("empty", "empty"),
        ("not an image", "not_an_image"),
        ("bomb", "bomb"),
        ("broken", "broken"),
    ):
        if key in message:
            return reason
    return "unusable"
