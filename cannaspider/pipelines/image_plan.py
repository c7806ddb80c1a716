"""Which product images need a job (docs/images.md, "When an image is downloaded"): the seed's
rule, applied as products arrive; the jobs go to the pipeline's queue (images.py), whose workers
fetch them (image_fetch.py).

- A product whose row already has a local_image_path for its image URL is skipped; a new one, one
  whose local_image_path is NULL, or one whose image URL changed (the path names the URL's hash)
  gets a job (which fetches only a source no store has: image_fetch.py). The store's products
  that have an image are read once, by one query (STORE_QUERY), before its products are planned;
  a store's products that arrive while its query is out wait for it. The file goes at the seed's
  layout (cannaspider/images/paths.py); a brand's logo is stored once per brand.
- A path already claimed in this crawl is never queued twice (a failed one is released, for
  another product or crawl to ask again); nothing is queued once the pipeline closes.
- The store's query is sent as soon as a request of the store is scheduled (request_scheduled),
  not when its first product arrives: by then the answer is in, so a store's products are planned
  at once, and the spider never goes idle with a store query still out. (Idle on a query, it
  stayed open until the engine's next 5 s heartbeat: no download ends to make the engine look
  again. docs/images.md, "Ingest benchmark".)
- Only http(s) URLs are queued: the normalizer drops the others already, and one that reaches the
  plan anyway is counted (`images_failed/scheme`), never fetched, never logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from scrapy.crawler import Crawler
from scrapy.http import Request
from scrapy.statscollectors import StatsCollector

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import first_line
from cannaspider.images.paths import brand_logo_path, image_file_name, product_image_path
from cannaspider.items import StoreProduct
from cannaspider.pipelines.image_fetch import ImageJob
from cannaspider.stealth.routing import session_key
from cannaspider.storable import HTTP_SCHEMES

# the pipeline's logger: its lines are the image pipeline's (docs/images.md, "What is skipped")
logger = logging.getLogger("cannaspider.pipelines.images")


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
        self.queued()
        return True
