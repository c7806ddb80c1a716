"""Product images, stored once as webp (docs/images.md).

An item pipeline of its own that owns its flow, beside the crawl; of Scrapy's media pipelines it
keeps the file stores (a local folder, s3://, gs://, ftp://, chosen by IMAGES_STORE:
cannaspider/images/filestore.py), their settings (IMAGES_MIN_WIDTH/HEIGHT, MEDIA_ALLOW_REDIRECTS)
and the download path (the engine's downloader, so the downloader middlewares and any proxy layer
apply); what differs from ImagesPipeline:

- The file is webp, not JPEG (IMAGES_CONVERTER: cannaspider/images/convert.py), at the seed's
  layout (cannaspider/images/paths.py), and the product's store_products.local_image_path is set
  once it is written, by a batched UPDATE (cannaspider/pipelines/image_paths.py), never a round
  trip per product.
- Which products need a download is the seed's rule: a product whose row already has a
  local_image_path is skipped; a new one, or one whose local_image_path is NULL, is downloaded. The
  store's products that have an image are read once, by one query, when its first product arrives.
  A path already claimed in this crawl is never queued twice, and a file already in the store is
  never fetched again (its path is recorded without a download). That query is sent as soon as
  a request of the store is scheduled (request_scheduled), not when its first product arrives: by
  then the answer is in, so a store's products are planned at once, and the spider never goes
  idle with a store query still out. (Idle on a query, it stayed open until the engine's next
  5 s heartbeat: no download ends to make the engine look again. docs/images.md, "Ingest
  benchmark".)
- The item is never held for its image. Scrapy's MediaPipeline.process_item returns only when the
  item's downloads are done: that would hold the response's slot in the scraper and delay the
  store's close behind image downloads. Here process_item only queues the image (a few
  strings, not the item) and returns the item at once; IMAGES_CONCURRENCY workers download the
  queue beside the crawl, so images count for nothing in the store's completion or its
  out-of-stock judgement. The spider is kept open (spider_idle) while images wait for a download;
  conversions and database updates still running when it closes are finished by close_spider.
- A failed or unusable image (HTTP error, HTML, a truncated file, a decompression bomb, an empty
  body) is one warning line and a stat `cannaspider/images_failed/<code>`, the code given where the
  failure is found (ImageFailed, UnusableImage); its product keeps local_image_path NULL, so the
  next crawl tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.pipelines.files import FilesStoreProtocol
from scrapy.pipelines.media import MediaPipeline
from scrapy.statscollectors import StatsCollector
from scrapy.utils.datatypes import SequenceExclude
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import first_line
from cannaspider.images import vips
from cannaspider.images.convert import UnusableImage
from cannaspider.images.filestore import images_store_uri, open_files_store
from cannaspider.images.paths import brand_logo_path, product_image_path
from cannaspider.items import StoreProduct
from cannaspider.pipelines.batch_writer import OUTAGE_ERRORS
from cannaspider.pipelines.image_paths import ImagePathWriter
from cannaspider.stealth.routing import session_key
from cannaspider.storable.urls import HTTP_SCHEMES
from cannaspider.units.idle import end_if_idle

logger = logging.getLogger(__name__)


class ImageFailed(Exception):
    """An image not stored: `code` is its stat (`images_failed/<code>`), the message its line."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


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


class ProductImagesPipeline:
    def __init__(self, crawler: Crawler, store: FilesStoreProtocol):
        settings = crawler.settings
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.store = store
        self.db = CrawlStore.for_crawler(crawler)
        self.paths = ImagePathWriter(crawler, self.db)
        self.quality = settings.getint("IMAGES_WEBP_QUALITY")
        vips.configure(settings)
        self.convert = load_object(settings["IMAGES_CONVERTER"])  # (body, quality=, max_pixels=) -> (webp, size)
        self.max_pixels = settings.getint("IMAGES_MAX_PIXELS")
        self.min_width = settings.getint("IMAGES_MIN_WIDTH")
        self.min_height = settings.getint("IMAGES_MIN_HEIGHT")
        self.concurrency = max(1, settings.getint("IMAGES_CONCURRENCY"))
        self.download_timeout = settings.getfloat("IMAGES_DOWNLOAD_TIMEOUT_S")
        self.max_bytes = settings.getint("IMAGES_MAX_BYTES")
        self.retry_times = settings.getint("IMAGES_RETRY_TIMES")
        # MEDIA_ALLOW_REDIRECTS: the redirect middleware follows 3xx, every other status is ours to judge
        self.statuses: dict[str, Any] = (
            {"handle_httpstatus_list": SequenceExclude(range(300, 400))}
            if settings.getbool("MEDIA_ALLOW_REDIRECTS")
            else {"handle_httpstatus_all": True}
        )
        self.spiderinfo: MediaPipeline.SpiderInfo | None = None  # what Scrapy's stores take as `info`
        self.stores: dict[int, StoreImages] = {}
        self.loading: dict[int, list[StoreProduct]] = {}  # products waiting for their store's query
        self.loaders: set[asyncio.Task[None]] = set()
        self.claimed: set[str] = set()  # paths queued, written or found in this crawl
        self.queue: deque[ImageJob] = deque()
        self.workers: set[asyncio.Task[None]] = set()
        self.waiting_for_download = 0  # jobs taken by a worker whose response has not arrived
        self.holding = False  # spider_idle kept the crawl open for this pipeline's work
        self.closing = False  # the downloader is closed: nothing more is queued
        # `scrapy check` opens no database for requests alone (crawl_store.py): only items ask
        self.load_early = not settings.getbool("CONTRACT_MODE")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProductImagesPipeline:
        pipeline = cls(crawler, open_files_store(images_store_uri(crawler.settings), crawler.settings))
        crawler.signals.connect(pipeline.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(pipeline.request_scheduled, signal=signals.request_scheduled)
        return pipeline

    def open_spider(self) -> None:
        assert isinstance(self.crawler.spider, Spider)
        self.spiderinfo = MediaPipeline.SpiderInfo(self.crawler.spider)

    # -- deciding (synchronous: the item goes on at once) --------------------------------
    def process_item(self, item: Any) -> Any:  # never waits: see the module docstring
        if type(item) is not StoreProduct or not (item.image_url or item.brand_logo_url):
            return item
        known = self.stores.get(item.dispensary_id)
        if known is not None:
            self._plan(item, known)
        else:
            self._load(item.dispensary_id).append(item)
        return item

    def request_scheduled(self, request: Request) -> None:
        # a store's page asked for: its products come next, read what they need now
        match session_key(request):
            case ("dispensary", int(dispensary_id)) if self.load_early and dispensary_id not in self.stores:
                self._load(dispensary_id)

    def _load(self, dispensary_id: int) -> list[StoreProduct]:
        """The products waiting for the store's query, the query sent if it is not out yet."""
        waiting = self.loading.get(dispensary_id)
        if waiting is None:
            waiting = self.loading[dispensary_id] = []
            task = asyncio.ensure_future(self._load_store(dispensary_id))
            self.loaders.add(task)
            task.add_done_callback(self._loader_done)
        return waiting

    async def _load_store(self, dispensary_id: int) -> None:
        try:
            pool = await self.db.open()
            async with pool.connection() as conn:
                row = await (await conn.execute(STORE_QUERY, (dispensary_id,))).fetchone()
        except Exception as exc:  # noqa: BLE001 - an outage or a bad row: logged, the crawl goes on without its images
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
        logo = item.brand_logo_url
        if logo:
            self._enqueue(
                ImageJob(item.dispensary_id, item.provider, None, logo, brand_logo_path(item.brand_name_raw, logo))
            )
        if not item.image_url:
            return
        if item.provider_product_id in known.with_image:
            self.stats.inc_value("cannaspider/images_skipped_has_image")
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
            self.stats.inc_value("cannaspider/images_failed/scheme")
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
            worker.add_done_callback(self._worker_done)

    # -- downloading -------------------------------------------------------------------------
    async def _work(self) -> None:
        while self.queue and not self.closing and self._engine_running():
            job = self.queue.popleft()
            try:
                await self._fetch(job)
            except Exception as exc:  # a bug must cost one image, never the crawl
                logger.exception("images: %s: unexpected %s", job.url, type(exc).__name__)

    async def _fetch(self, job: ImageJob) -> None:
        # through the store's stealth session (its proxy, identity and TLS: docs/stealth.md), in a
        # download slot of their own so images never take the API pages' turns at that proxy, and
        # without judging the proxy (a failed image is skipped, not rotated)
        self.waiting_for_download += 1
        try:
            if await self._stored_already(job.path):
                self.stats.inc_value("cannaspider/images_already_stored")
                self._written(job)
                return
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
                **self.statuses,
            }
            # built only for a download: a Request parses its URL (w3lib), a tenth of this pipeline's CPU
            # in a crawl of new products whose images are stored already
            request = Request(job.url, callback=NO_CALLBACK, meta=meta)
            assert self.crawler.engine is not None
            try:
                response = await self.crawler.engine.download_async(request)
            except IgnoreRequest as exc:
                logger.debug("images: %s not downloaded: %s", job.url, exc)
                self.stats.inc_value("cannaspider/images_failed/filtered")
                return
            except Exception as exc:  # noqa: BLE001 - any download failure is this image's failure, counted
                self._failed(job, ImageFailed(type(exc).__name__.lower(), f"download failed: {first_line(exc)}"))
                return
        finally:
            self.waiting_for_download -= 1
            self._wake_if_settled()
        try:
            await self._store(job, response)
        except (ImageFailed, UnusableImage) as exc:
            self._failed(job, exc)
            return
        except OUTAGE_ERRORS + (OSError,) as exc:
            self._failed(job, ImageFailed("store", f"not written to the store: {first_line(exc)}"))
            return
        self.stats.inc_value("cannaspider/images_stored")
        self._written(job)

    async def _store(self, job: ImageJob, response: Response) -> None:
        """Check, convert and write one download; ImageFailed or UnusableImage say why not."""
        if response.status != 200:
            raise ImageFailed("http", f"HTTP {response.status}")
        if not response.body:
            raise ImageFailed("empty", "empty body (0 bytes)")
        status = "cached" if "cached" in response.flags else "downloaded"
        self.stats.inc_value("file_count")  # Scrapy's media pipelines' stats
        self.stats.inc_value(f"file_status_count/{status}")
        # decoding and encoding hold a core for tens of milliseconds: never on the event loop
        webp, (width, height) = await asyncio.to_thread(
            self.convert, response.body, quality=self.quality, max_pixels=self.max_pixels
        )
        if width < self.min_width or height < self.min_height:
            raise ImageFailed("small", f"too small ({width}x{height} < {self.min_width}x{self.min_height})")
        persisted = self.store.persist_file(
            job.path,
            BytesIO(webp),
            self._info(),
            meta={"width": width, "height": height},
            headers={"Content-Type": "image/webp"},
        )
        if isinstance(persisted, Deferred):
            await maybe_deferred_to_future(persisted)

    def _info(self) -> MediaPipeline.SpiderInfo:
        if self.spiderinfo is None:  # open_spider not called (a pipeline built outside a crawl)
            self.open_spider()
        assert self.spiderinfo is not None
        return self.spiderinfo

    async def _stored_already(self, path: str) -> bool:
        try:
            result: Any = self.store.stat_file(path, self._info())
            if isinstance(result, Deferred):
                result = await maybe_deferred_to_future(result)
        except Exception:  # noqa: BLE001 - as Scrapy's media_to_download: a store that cannot tell means "download it"
            return False
        return bool(result and result.get("last_modified"))

    def _written(self, job: ImageJob) -> None:
        if job.provider_product_id is not None:
            self.paths.add(job.dispensary_id, job.provider, job.provider_product_id, job.path)

    def _failed(self, job: ImageJob, exc: ImageFailed | UnusableImage) -> None:
        self.stats.inc_value(f"cannaspider/images_failed/{exc.code}")
        self.claimed.discard(job.path)  # another product (or crawl) may ask again
        what = f"product {job.provider_product_id}" if job.provider_product_id else "brand logo"
        logger.warning("images: dispensary %s %s: %s skipped: %s", job.dispensary_id, what, job.url, exc)

    # -- the end of the crawl ------------------------------------------------------------
    def _engine_running(self) -> bool:
        # A shutdown (SIGINT/SIGTERM, Scrapyd's cancel.json) stops the engine first, then waits for
        # every download in flight before any pipeline's close_spider runs: workers that went on
        # taking queued jobs would drain the whole queue first (600 images behind a slow proxy held
        # a cancelled node for half a minute). Queued jobs are left to the next crawl, as in close_spider.
        engine = self.crawler.engine
        return engine is not None and engine.running

    def _holds_crawl(self) -> bool:
        # queued images and store queries still need the downloader, which closes with the spider
        # (a job being converted and written is awaited by close_spider)
        return bool(self.queue or self.waiting_for_download or self.loading)

    def spider_idle(self) -> None:
        if self._holds_crawl():
            self._start_workers()  # (none missing, unless a bug left queued jobs without one)
            self.holding = True
            raise DontCloseSpider
        self.holding = False

    def _loader_done(self, task: asyncio.Task[None]) -> None:
        self.loaders.discard(task)
        self._wake_if_settled()

    def _worker_done(self, worker: asyncio.Task[None]) -> None:
        self.workers.discard(worker)
        self._wake_if_settled()

    def _wake_if_settled(self) -> None:
        # the work that held an idle crawl open is done: it ends now, not on the engine's next
        # heartbeat (units/idle.py)
        if self.holding and not self._holds_crawl():
            self.holding = False
            end_if_idle(self.crawler)

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
        except Exception:  # noqa: BLE001 - logged by the writer: those products keep NULL and are downloaded again
            return
