"""One image job fetched and stored (docs/images.md): the download, the checks, the webp, the
file, the row's path. The jobs are planned by images.py (ImagePlanner) and run by the pipeline's workers
(images.py).

- The download path is Scrapy's media pipelines' (the engine's downloader, so the downloader
  middlewares and any proxy layer apply; MEDIA_ALLOW_REDIRECTS); what else the request carries
  (the store's stealth session, a slot, its own timeout, size cap and retries) is said at `download`.
- An image is fetched once per source, not once per store (docs/images.md, "One download per
  source"): before a download the URL is claimed in image_sources (image_sources.py), across
  processes and nodes. A source stored already is not fetched: its object is checked in the store
  (stat_file) and the job's path is mapped to it (image_paths) and recorded; one another claimer
  is fetching is left to a later crawl; a claimed one whose object is found in the back-end (a file
  of an older crawl, or of a claimer that died before settling) is recorded without a download.
  In one crawl, the jobs of a URL whose fetch is under way wait for it beside the queue, holding
  no worker, and take its answer.
- The file is webp, not JPEG (IMAGES_CONVERTER: cannaspider/images/convert.py), checked against
  IMAGES_MIN_WIDTH/HEIGHT, written to one of Scrapy's file stores (a local folder, s3://, gs://,
  ftp://, chosen by IMAGES_STORE: cannaspider/images/backends.py); the conversions under way
  together decode at most IMAGES_CONVERT_BUDGET_PIXELS (cannaspider/images/budget.py; docs/images.md,
  "Bounds"), each counted from its header first; the product's
  store_products.local_image_path is set once it is written, by a batched UPDATE
  (cannaspider/pipelines/image_sources.py), never a round trip per product.
- A failed or unusable image (HTTP error, HTML, a truncated file, a decompression bomb, an empty
  body) is one warning line and a stat `cannaspider/images_failed/<code>`, the code given where the
  failure is found (ImageFailed, UnusableImage); its product keeps local_image_path NULL, so the
  next crawl tries again, its path is given back to the plan (another product may ask again), and
  its source's claim is released as 'failed' (claimable again at once: never stuck).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

import psycopg
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.pipelines.files import FilesStoreProtocol
from scrapy.pipelines.media import MediaPipeline
from scrapy.statscollectors import StatsCollector
from scrapy.utils.datatypes import SequenceExclude
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from cannaspider.db.errors import OUTAGE_ERRORS, first_line
from cannaspider.images import convert
from cannaspider.images.budget import PixelBudget
from cannaspider.images.convert import UnusableImage, declared_pixels
from cannaspider.pipelines.image_sources import ELSEWHERE, STORED_ALREADY, Claim, ImagePathWriter, ImageSources

# the pipeline's logger: its lines are the image pipeline's (docs/images.md, "What is skipped")
logger = logging.getLogger("cannaspider.pipelines.images")


class ImageFailed(Exception):
    """An image not stored: `code` is its stat (`images_failed/<code>`), the message its line."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ImageJob:
    """One file to fetch from `url` and store at `path`, and the product row that records it."""

    dispensary_id: int
    provider: str
    provider_product_id: str | None  # None: a brand logo (no row to update)
    url: str
    path: str
    claim: Claim | None = None  # the source's claim, once this job holds it
    waiting: list[ImageJob] = field(default_factory=list)  # this crawl's jobs of the same URL


class ImageFetcher:
    """Fetches and stores ImageJobs, one a call (the pipeline's workers share it); `release(path)`
    gives a failed job's path back to the plan."""

    def __init__(
        self,
        crawler: Crawler,
        backend: FilesStoreProtocol,
        paths: ImagePathWriter,
        release: Callable[[str], None],
        sources: ImageSources,
    ):
        settings = crawler.settings
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.backend = backend  # the image back-end IMAGES_STORE names (Scrapy's files store)
        self.paths = paths
        self.release = release
        self.sources = sources
        self.fetching: dict[str, ImageJob] = {}  # URL → the job of this crawl that holds its source
        self.known: dict[str, tuple[str, str]] = {}  # URL → (source, object key), stored and checked
        self.quality = settings.getint("IMAGES_WEBP_QUALITY")
        convert.configure(settings)
        self.convert = load_object(settings["IMAGES_CONVERTER"])  # (body, quality=, max_pixels=) -> (webp, size)
        self.max_pixels = settings.getint("IMAGES_MAX_PIXELS")
        self.budget = PixelBudget(max(1, settings.getint("IMAGES_CONVERT_BUDGET_PIXELS")))
        self.min_width = settings.getint("IMAGES_MIN_WIDTH")
        self.min_height = settings.getint("IMAGES_MIN_HEIGHT")
        self.download_timeout = settings.getfloat("IMAGES_DOWNLOAD_TIMEOUT_S")
        self.max_bytes = settings.getint("IMAGES_MAX_BYTES")
        self.retry_times = settings.getint("IMAGES_RETRY_TIMES")
        self.proxy_pool: str = settings["IMAGES_PROXY_POOL"]  # an empty one is the crawl's (the middleware)
        # MEDIA_ALLOW_REDIRECTS: the redirect middleware follows 3xx, every other status is ours to judge
        self.statuses: dict[str, Any] = (
            {"handle_httpstatus_list": SequenceExclude(range(300, 400))}
            if settings.getbool("MEDIA_ALLOW_REDIRECTS")
            else {"handle_httpstatus_all": True}
        )
        self.spiderinfo: MediaPipeline.SpiderInfo | None = None  # what Scrapy's stores take as `info`

    def open_spider(self) -> None:
        assert isinstance(self.crawler.spider, Spider)
        self.spiderinfo = MediaPipeline.SpiderInfo(self.crawler.spider)

    async def download(self, job: ImageJob) -> Response | None:
        """The job's response, or None when nothing is left to do: its source stored already (the
        path mapped and recorded), fetched by another claimer or by another job of this crawl (it
        waits for that one), its request filtered, or its download failed (counted and logged)."""
        known = self.known.get(job.url)
        if known is not None:  # stored in this crawl, for another store or product
            self._done(job, *known)
            return None
        owner = self.fetching.get(job.url)
        if owner is not None:  # one fetch per URL: this job takes its answer, holding no worker
            owner.waiting.append(job)
            return None
        self.fetching[job.url] = job
        try:
            claim = await self._claim(job)
        except OUTAGE_ERRORS + (psycopg.Error,) as exc:
            await self._failed(job, ImageFailed("database", f"source not claimed: {first_line(exc)}"))
            return None
        if claim is None:
            return None
        job.claim = claim
        # (the object is looked for first: a file an older crawl stored here, or one a claimer that
        # died before settling wrote, is recorded without a download)
        if await self._stored_already(claim.object_key):
            self.stats.inc_value("cannaspider/images_already_stored")
            await self._settle_stored(claim)
            self._done(job, claim.source, claim.object_key)
            return None
        # through the store's stealth session (its proxy, identity and TLS: docs/stealth.md), in a
        # download slot of their own so images never take the API pages' turns at that proxy, and
        # without judging the proxy (a failed image is skipped, not rotated)
        meta = {
            "image_path": claim.object_key,
            "stealth": True,
            "dispensary_id": job.dispensary_id,
            "stealth_slot": "images",
            # IMAGES_PROXY_POOL: the crawl's pool (the store's own session) unless an operator
            # gives images a pool of their own (docs/stealth.md, "Proxy pools")
            "proxy_pool": self.proxy_pool,
            "proxy_health": False,
            # an image is worth less than the crawl it would hold open: its own short timeout, a
            # size cap the downloader enforces, no retry (the next crawl asks for it again)
            "download_timeout": self.download_timeout,
            "download_maxsize": self.max_bytes,
            "max_retry_times": self.retry_times,
            # Scrapy's retry middleware logs its give-up at ERROR, which the crawl-health check
            # counts: one slow image failed the crawl's health. The failure's one line is ours, a
            # warning (_failed); the Images check judges their share (docs/health.md)
            "give_up_log_level": logging.DEBUG,
            **self.statuses,
        }
        # built only for a download: a Request parses its URL (w3lib), a tenth of the image pipeline's
        # CPU in a crawl of new products whose images are stored already
        request = Request(job.url, callback=NO_CALLBACK, meta=meta)
        assert self.crawler.engine is not None
        try:
            return await self.crawler.engine.download_async(request)
        except IgnoreRequest as exc:
            logger.debug("images: %s not downloaded: %s", job.url, exc)
            await self._failed(job, ImageFailed("filtered", str(exc)), log=False)
        except Exception as exc:  # noqa: BLE001 - any download failure is this image's failure, counted
            await self._failed(job, ImageFailed(type(exc).__name__.lower(), f"download failed: {first_line(exc)}"))
        return None

    async def save(self, job: ImageJob, response: Response) -> None:
        """The job's download checked, converted, written and recorded, or counted and logged."""
        assert job.claim is not None  # a response only comes for a claimed source
        try:
            await self._write(job, job.claim.object_key, response)
        except (ImageFailed, UnusableImage) as exc:
            await self._failed(job, exc)
            return
        except OUTAGE_ERRORS + (OSError,) as exc:
            await self._failed(job, ImageFailed("store", f"not written to the store: {first_line(exc)}"))
            return
        self.stats.inc_value("cannaspider/images_stored")
        await self._settle_stored(job.claim)
        self._done(job, job.claim.source, job.claim.object_key)

    def abandon(self, job: ImageJob) -> None:
        """A job a bug cut short: its URL may be fetched again (its claim's lease runs out)."""
        self.fetching.pop(job.url, None)
        for each in (job, *job.waiting):
            self.release(each.path)

    async def _claim(self, job: ImageJob) -> Claim | None:
        """The job's claim on its source, or None once the job is settled without one (the
        source stored and its object there: recorded; another claimer fetching it: left)."""
        claim = await self.sources.claim(job.url, job.path)
        if claim.status == STORED_ALREADY:
            if await self._stored_already(claim.object_key):
                self.stats.inc_value("cannaspider/images_already_stored")
                self._done(job, claim.source, claim.object_key)
                return None
            # stored, but its object is gone from the store (deleted by hand): fetched again, once
            claim = await self.sources.take_over(claim.source, claim.object_key, job.path)
        if claim.status == ELSEWHERE:
            # another process or node is fetching it now: never waited on, the next crawl maps it
            self.stats.inc_value("cannaspider/images_source_elsewhere", 1 + len(job.waiting))
            self.abandon(job)
            return None
        return claim

    async def _settle_stored(self, claim: Claim) -> None:
        try:
            await self.sources.stored(claim)
        except OUTAGE_ERRORS + (psycopg.Error,) as exc:  # written: its lease runs out, the next claimer finds it
            logger.warning("images: source %s stored but not marked so: %s", claim.object_key, first_line(exc))

    async def _write(self, job: ImageJob, key: str, response: Response) -> None:
        """Check, convert and write one download; ImageFailed or UnusableImage say why not."""
        if response.status != 200:
            raise ImageFailed("http", f"HTTP {response.status}")
        if not response.body:
            raise ImageFailed("empty", "empty body (0 bytes)")
        status = "cached" if "cached" in response.flags else "downloaded"
        self.stats.inc_value("file_count")  # Scrapy's media pipelines' stats
        self.stats.inc_value(f"file_status_count/{status}")
        # decoding and encoding hold a core for tens of milliseconds: never on the event loop; and
        # memory for every pixel: the conversions at once hold at most IMAGES_CONVERT_BUDGET_PIXELS
        pixels = await asyncio.to_thread(declared_pixels, response.body, max_pixels=self.max_pixels)
        async with self.budget.hold(pixels):
            webp, (width, height) = await asyncio.to_thread(
                self.convert, response.body, quality=self.quality, max_pixels=self.max_pixels
            )
        if width < self.min_width or height < self.min_height:
            raise ImageFailed("small", f"too small ({width}x{height} < {self.min_width}x{self.min_height})")
        persisted = self.backend.persist_file(
            key,
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
            result: Any = self.backend.stat_file(path, self._info())
            if isinstance(result, Deferred):
                result = await maybe_deferred_to_future(result)
        except Exception:  # noqa: BLE001 - as Scrapy's media_to_download: a back-end that cannot tell means "download it"
            return False
        return bool(result and result.get("last_modified"))

    def _done(self, job: ImageJob, source: str, key: str) -> None:
        """The job's source is stored as `key`: its path, and those of the jobs that waited for
        it, are mapped to the source and recorded."""
        self.known[job.url] = (source, key)
        self.fetching.pop(job.url, None)
        for each in (job, *job.waiting):
            if each.path != key:
                self.stats.inc_value("cannaspider/images_shared")  # another path's object: no download
            if each.provider_product_id is None:
                self.paths.map(each.path, source)
            else:
                self.paths.add(each.dispensary_id, each.provider, each.provider_product_id, each.path, source)
        job.waiting.clear()

    async def _failed(self, job: ImageJob, exc: ImageFailed | UnusableImage, *, log: bool = True) -> None:
        # the source released first, the URL's fetch ended after: a job of the same URL that comes
        # meanwhile waits on this one (and fails with it); one that comes after claims the released
        # row and tries again. Ended first, the release still on its way, the newcomer met the row
        # still 'fetching' and was left to the next crawl as if another node held it.
        if job.claim is not None:  # claimable again at once, by anyone: never stuck
            try:
                await self.sources.failed(job.claim, exc.code)
            except OUTAGE_ERRORS + (psycopg.Error,) as error:  # its lease runs out instead
                logger.warning("images: source %s not released: %s", job.url, first_line(error))
        self.fetching.pop(job.url, None)
        for each in (job, *job.waiting):
            self.stats.inc_value(f"cannaspider/images_failed/{exc.code}")
            self.release(each.path)  # another product (or crawl) may ask again
            if not log:
                continue
            what = f"product {each.provider_product_id}" if each.provider_product_id else "brand logo"
            logger.warning("images: dispensary %s %s: %s skipped: %s", each.dispensary_id, what, each.url, exc)
        job.waiting.clear()
