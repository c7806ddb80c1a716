"""Product images, stored once as webp (docs/images.md): the pipeline, its workers and the end of
the crawl.

An item pipeline of its own that owns its flow, beside the crawl; of Scrapy's media pipelines it
keeps the file stores (a local folder, s3://, gs://, ftp://, chosen by IMAGES_STORE:
cannaspider/images/backends.py), their settings (IMAGES_MIN_WIDTH/HEIGHT, MEDIA_ALLOW_REDIRECTS)
and the download path (the engine's downloader, so the downloader middlewares and any proxy layer
apply). What differs from ImagesPipeline lives where its rule is applied:

- Which products need a download, the seed's rule (a product whose row has a local_image_path is
  skipped, its store's products read by one query sent when the store's first request is
  scheduled, a path queued once a crawl): ImagePlanner, here.
- Each image source fetched once, whatever the stores and crawls that list it (a claim in
  image_sources, per-store paths mapped to the one stored object): image_fetch.py, image_sources.py.
- How one image is fetched, checked, converted to webp, written and recorded (local_image_path by
  a batched UPDATE, cannaspider/pipelines/image_sources.py), and what a failed image costs (one
  warning line, a stat `cannaspider/images_failed/<code>`, the product's local_image_path left
  NULL for the next crawl): image_fetch.py.
- The item is never held for its image (here). Scrapy's MediaPipeline.process_item returns only
  when the item's downloads are done: that would hold the response's slot in the scraper and delay
  the store's close behind image downloads. Here process_item only queues the image (a few
  strings, not the item) and returns the item at once; IMAGES_CONCURRENCY workers download the
  queue beside the crawl, so images count for nothing in the store's completion or its
  out-of-stock judgement. The spider is kept open (spider_idle) while images wait for a download
  or a store's query is out, and when that work settles the pipeline runs the engine's idle check
  itself instead of leaving the crawl to the engine's next heartbeat (cannaspider/units/lifecycle.py);
  conversions and database updates still running when it closes are finished by close_spider.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Request
from scrapy.pipelines.files import FilesStoreProtocol
from scrapy.statscollectors import StatsCollector

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.images.backends import images_store_uri, open_files_backend
from cannaspider.images.paths import brand_logo_path, image_file_name, product_image_path
from cannaspider.items import StoreProduct
from cannaspider.pipelines.image_fetch import ImageFetcher, ImageJob
from cannaspider.pipelines.image_sources import ImagePathWriter, ImageSources
from cannaspider.stealth.routing import session_key
from cannaspider.storable import HTTP_SCHEMES
from cannaspider.units.lifecycle import end_if_idle

logger = logging.getLogger(__name__)


class ProductImagesPipeline:
    def __init__(self, crawler: Crawler, backend: FilesStoreProtocol):
        self.crawler = crawler
        self.db = CrawlDatabase.for_crawler(crawler)
        self.paths = ImagePathWriter(crawler, self.db)
        self.concurrency = max(1, crawler.settings.getint("IMAGES_CONCURRENCY"))
        self.queue: deque[ImageJob] = deque()  # planned, not yet taken by a worker
        self.workers: set[asyncio.Task[None]] = set()
        self.waiting_for_download = 0  # jobs taken by a worker whose response has not arrived
        self.holding = False  # spider_idle kept the crawl open for this pipeline's work
        self.done = 0  # jobs a worker finished, whatever their outcome (stored, shared, failed)
        self.progress_interval = crawler.settings.getfloat("IMAGES_PROGRESS_INTERVAL_S")
        self.progress: asyncio.Task[None] | None = None
        self.progress_said: tuple[int, int] | None = None  # (done, total) of the last progress line
        self.planner = ImagePlanner(crawler, self.db, self.queue, self._start_workers, self._wake_if_settled)
        sources = ImageSources(self.db, crawler.settings.getfloat("IMAGES_SOURCE_LEASE_S"))
        self.fetcher = ImageFetcher(crawler, backend, self.paths, self.planner.release, sources)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProductImagesPipeline:
        pipeline = cls(crawler, open_files_backend(images_store_uri(crawler.settings), crawler.settings))
        crawler.signals.connect(pipeline.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(pipeline.planner.request_scheduled, signal=signals.request_scheduled)
        return pipeline

    def open_spider(self) -> None:
        self.fetcher.open_spider()

    def process_item(self, item: Any) -> Any:  # never waits: see the module docstring
        if type(item) is not StoreProduct or not (item.image_url or item.brand_logo_url):
            return item
        self.planner.plan(item)
        return item

    # -- downloading -------------------------------------------------------------------------
    def _start_workers(self) -> None:
        # A worker that has just found the queue empty is done, but leaves `workers` only when its
        # done-callback runs, a loop step later: counted as live it would leave this job without a
        # worker, and the spider open forever (spider_idle). Only unfinished workers count.
        live = sum(not worker.done() for worker in self.workers)
        if self.progress is None and self.progress_interval > 0:
            self.progress = asyncio.ensure_future(self._report_progress())
        for _ in range(min(self.concurrency - live, len(self.queue))):
            worker = asyncio.ensure_future(self._work())
            self.workers.add(worker)
            worker.add_done_callback(self._worker_done)

    async def _work(self) -> None:
        while self.queue and not self.planner.closing and self._engine_running():
            job = self.queue.popleft()
            try:
                self.waiting_for_download += 1
                try:
                    response = await self.fetcher.download(job)
                finally:
                    self.waiting_for_download -= 1
                    self._wake_if_settled()
                if response is not None:
                    await self.fetcher.save(job, response)
            except Exception as exc:  # a bug must cost one image, never the crawl
                logger.exception("images: %s: unexpected %s", job.url, type(exc).__name__)
                self.fetcher.abandon(job)
            finally:
                self.done += 1

    # -- progress --------------------------------------------------------------------------
    # A large crawl's image phase runs on after its stores are done (thousands of images behind
    # one proxy): every IMAGES_PROGRESS_INTERVAL_S a line says how far it is, when something moved.
    # A crawl whose images all finish within the first interval says nothing.
    async def _report_progress(self) -> None:
        while True:
            await asyncio.sleep(self.progress_interval)
            self._say_progress()

    def _say_progress(self) -> None:
        now = (self.done, self.planner.queued_total)
        if now == self.progress_said or (self.progress_said is None and not self._holds_crawl()):
            return
        self.progress_said = now
        logger.info(
            "images: %d of %d done, %d queued, %d downloading (%d stored, %d failed)",
            self.done,
            self.planner.queued_total,
            len(self.queue),
            self.waiting_for_download,
            self.planner.stats.get_value("cannaspider/images_stored", 0),
            sum(v for k, v in self.planner.stats.get_stats().items() if k.startswith("cannaspider/images_failed/")),
        )

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
        return bool(self.queue or self.waiting_for_download or self.planner.loading)

    def spider_idle(self) -> None:
        if self._holds_crawl():
            self._start_workers()  # (none missing, unless a bug left queued jobs without one)
            self.holding = True
            raise DontCloseSpider
        self.holding = False

    def _worker_done(self, worker: asyncio.Task[None]) -> None:
        self.workers.discard(worker)
        self._wake_if_settled()

    def _wake_if_settled(self) -> None:
        # the work that held an idle crawl open is done: it ends now, not on the engine's next
        # heartbeat (units/lifecycle.py)
        if self.holding and not self._holds_crawl():
            self.holding = False
            end_if_idle(self.crawler)

    async def close_spider(self) -> None:
        self.planner.close()  # nothing more is queued, nor taken by a worker
        if self.progress is not None:
            self.progress.cancel()
        loading = self.planner.loading
        # a crawl cut short: these stay NULL and the next crawl backfills them (a store query still
        # out with no product waiting for it leaves nothing undone)
        left = len(self.queue) + sum(len(v) for v in loading.values())
        if left:
            logger.info("images: %d images not downloaded (the crawl closed first): the next crawl gets them", left)
        self.queue.clear()
        while self.workers or self.planner.loaders:
            await asyncio.gather(*self.workers, *self.planner.loaders, return_exceptions=True)
        if self.progress_said is not None:  # the phase's last line, where its progress was said
            self._say_progress()
        try:
            await self.paths.close()
        except Exception:  # noqa: BLE001 - logged by the writer: those products keep NULL and are downloaded again
            return


# The plan: which product images need a job (the module's docstring gives the rule; docs/images.md,
# "When an image is downloaded"). A product whose row already has a local_image_path for its image
# URL is skipped; the store's products that have an image are read once, by one query
# (STORE_QUERY), sent as soon as a request of the store is scheduled (request_scheduled), not when
# its first product arrives, so the spider never goes idle with a store query still out (idle on a
# query, it stayed open until the engine's next 5 s heartbeat: docs/images.md, "Ingest benchmark").
# A path already claimed in this crawl is never queued twice; only http(s) URLs are queued (one
# that reaches the plan anyway is counted, `images_failed/scheme`, never fetched, never logged).


@dataclass(slots=True)
class StoreImages:
    """What the images of one store's products need from the database, read once per crawl."""

    state: str | None
    store: str | None
    with_image: dict[str, str] = field(default_factory=dict)  # product → its local_image_path


STORE_QUERY = """
SELECT d.state, coalesce(nullif(d.slug, ''), d.name),
       ARRAY(SELECT ARRAY[provider_product_id, local_image_path] FROM store_products
              WHERE dispensary_id = d.id AND local_image_path IS NOT NULL)
  FROM dispensaries d WHERE d.id = %s
"""


class ImagePlanner:
    """Plans the jobs of the products that have an image or a brand logo, appending them to `jobs`
    and calling `queued()` after each; `settled()` is called when a store's query is done."""

    def __init__(
        self,
        crawler: Crawler,
        db: CrawlDatabase,
        jobs: deque[ImageJob],
        queued: Callable[[], None],
        settled: Callable[[], None],
    ):
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.db = db
        self.jobs = jobs
        self.queued = queued
        self.settled = settled
        self.stores: dict[int, StoreImages] = {}
        self.loading: dict[int, list[StoreProduct]] = {}  # products waiting for their store's query
        self.loaders: set[asyncio.Task[None]] = set()
        self.claimed: set[str] = set()  # paths queued, written or found in this crawl
        self.queued_total = 0  # jobs queued in this crawl (a released path queued again counts again)
        self.logo_paths: dict[tuple[str | None, str], str] = {}  # (brand name, logo URL) -> its path
        self.closing = False  # the pipeline is closing: nothing more is queued
        # `scrapy check` opens no database for requests alone (crawl_database.py): only items ask
        self.load_early = not crawler.settings.getbool("CONTRACT_MODE")

    def request_scheduled(self, request: Request) -> None:
        # a store's page asked for: its products come next, read what they need now
        match session_key(request):
            case ("dispensary", int(dispensary_id)) if self.load_early and dispensary_id not in self.stores:
                self._load(dispensary_id)

    def plan(self, item: StoreProduct) -> None:
        """Queue what one product with an image or a brand logo needs (synchronous: the item goes
        on at once); a product of a store whose query is not in yet waits for it."""
        known = self.stores.get(item.dispensary_id)
        if known is None:
            self._load(item.dispensary_id).append(item)
            return
        logo = item.brand_logo_url
        if logo:
            # one brand's logo comes with each of its products: its path (a slug and a hash) is made
            # once per crawl, and the job only while the path is not claimed (a failed logo is
            # released, and asked for again by the brand's next product)
            brand = (item.brand_name_raw, logo)
            path = self.logo_paths.get(brand)
            if path is None:
                path = self.logo_paths[brand] = brand_logo_path(item.brand_name_raw, logo)
            if path not in self.claimed:
                self._enqueue(ImageJob(item.dispensary_id, item.provider, None, logo, path))
        if not item.image_url:
            return
        has = known.with_image.get(item.provider_product_id)
        if has is not None and has.endswith(image_file_name(item.image_url)):
            self.stats.inc_value("cannaspider/images_skipped_has_image")
            return
        path = product_image_path(
            known.state, known.store, item.brand_name_raw, item.provider_product_id, item.image_url
        )
        if self._enqueue(ImageJob(item.dispensary_id, item.provider, item.provider_product_id, item.image_url, path)):
            known.with_image[item.provider_product_id] = path

    def release(self, path: str) -> None:
        """A job that failed: its path may be asked for again."""
        self.claimed.discard(path)

    def close(self) -> None:
        """Nothing more is queued: the products still waiting for a query are left to the next crawl."""
        self.closing = True

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
        self.stores[dispensary_id] = (
            StoreImages(row[0], row[1], {pid: path for pid, path in row[2]}) if row else StoreImages(None, None)
        )
        for item in self.loading.pop(dispensary_id, []):
            self.plan(item)  # its store is known now: planned, not waiting again

    def _loader_done(self, task: asyncio.Task[None]) -> None:
        self.loaders.discard(task)
        self.settled()

    def _enqueue(self, job: ImageJob) -> bool:
        if not job.url[:8].lower().startswith(HTTP_SCHEMES):
            # the normalizer drops these already; whatever built this item, a file:, ftp: or s3: URL
            # is never fetched (docs/images.md), and not logged: no line tells what is on this disk
            self.stats.inc_value("cannaspider/images_failed/scheme")
            return False
        if job.path in self.claimed or self.closing:
            return False
        self.claimed.add(job.path)
        self.jobs.append(job)
        self.queued_total += 1
        self.queued()
        return True
