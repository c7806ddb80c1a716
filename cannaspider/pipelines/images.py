"""Product images, stored once as webp (docs/images.md): the pipeline, its workers and the end of
the crawl.

An item pipeline of its own that owns its flow, beside the crawl; of Scrapy's media pipelines it
keeps the file stores (a local folder, s3://, gs://, ftp://, chosen by IMAGES_STORE:
cannaspider/images/filestore.py), their settings (IMAGES_MIN_WIDTH/HEIGHT, MEDIA_ALLOW_REDIRECTS)
and the download path (the engine's downloader, so the downloader middlewares and any proxy layer
apply). What differs from ImagesPipeline lives where its rule is applied:

- Which products need a download, the seed's rule (a product whose row has a local_image_path is
  skipped, its store's products read by one query sent when the store's first request is
  scheduled, a path queued once a crawl): image_plan.py.
- Each image source fetched once, whatever the stores and crawls that list it (a claim in
  image_sources, per-store paths mapped to the one stored object): image_fetch.py, image_sources.py.
- How one image is fetched, checked, converted to webp, written and recorded (local_image_path by
  a batched UPDATE, cannaspider/pipelines/image_paths.py), and what a failed image costs (one
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
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.pipelines.files import FilesStoreProtocol

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.images.filestore import images_store_uri, open_files_store
from cannaspider.items import StoreProduct
from cannaspider.pipelines.image_fetch import ImageFetcher, ImageJob
from cannaspider.pipelines.image_paths import ImagePathWriter
from cannaspider.pipelines.image_plan import ImagePlanner
from cannaspider.pipelines.image_sources import ImageSources
from cannaspider.units.lifecycle import end_if_idle

logger = logging.getLogger(__name__)


class ProductImagesPipeline:
    def __init__(self, crawler: Crawler, store: FilesStoreProtocol):
        self.crawler = crawler
        self.db = CrawlDatabase.for_crawler(crawler)
        self.paths = ImagePathWriter(crawler, self.db)
        self.concurrency = max(1, crawler.settings.getint("IMAGES_CONCURRENCY"))
        self.queue: deque[ImageJob] = deque()  # planned, not yet taken by a worker
        self.workers: set[asyncio.Task[None]] = set()
        self.waiting_for_download = 0  # jobs taken by a worker whose response has not arrived
        self.holding = False  # spider_idle kept the crawl open for this pipeline's work
        self.planner = ImagePlanner(crawler, self.db, self.queue, self._start_workers, self._wake_if_settled)
        sources = ImageSources(self.db, crawler.settings.getfloat("IMAGES_SOURCE_LEASE_S"))
        self.fetcher = ImageFetcher(crawler, store, self.paths, self.planner.release, sources)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProductImagesPipeline:
        pipeline = cls(crawler, open_files_store(images_store_uri(crawler.settings), crawler.settings))
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
        loading = self.planner.loading
        # a crawl cut short: these stay NULL and the next crawl backfills them (a store query still
        # out with no product waiting for it leaves nothing undone)
        left = len(self.queue) + sum(len(v) for v in loading.values())
        if left:
            logger.info("images: %d images not downloaded (the crawl closed first): the next crawl gets them", left)
        self.queue.clear()
        while self.workers or self.planner.loaders:
            await asyncio.gather(*self.workers, *self.planner.loaders, return_exceptions=True)
        try:
            await self.paths.close()
        except Exception:  # noqa: BLE001 - logged by the writer: those products keep NULL and are downloaded again
            return
