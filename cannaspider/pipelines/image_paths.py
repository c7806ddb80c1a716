"""store_products.local_image_path, set once an image is stored (cannaspider/pipelines/image_fetch.py),
and image_paths, each per-store path mapped to the source whose object /img serves for it
(docs/images.md, "One download per source"): DB_WRITE_BATCH_SIZE rows at a time, in one statement,
never a round trip per product. The mapping goes in before the path it maps is recorded (the same
statement), so /img never meets a recorded path it cannot resolve."""

from __future__ import annotations

import asyncio
import logging

import psycopg
from scrapy.crawler import Crawler

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import OUTAGE_ERRORS, first_line
from cannaspider.pipelines.batch_writer import batch_document, encode_row

# the pipeline's logger: its lines are the image pipeline's (docs/images.md, "What is skipped")
logger = logging.getLogger("cannaspider.pipelines.images")

# One statement per batch: the (dispensary, provider, product, path, source) rows as one JSON
# document (a brand logo's: no dispensary, provider nor product, its mapping only). Returns the
# product rows it found, so a product whose row is still in the product writer's buffer is retried
# at the next flush instead of lost. A path keeps the first source it was mapped to (a path names
# its URL's hash: the same path is the same image).
UPDATE_PATHS = """
WITH batch AS (
    SELECT (r->>0)::bigint AS dispensary_id, r->>1 AS provider, r->>2 AS provider_product_id, r->>3 AS path,
           r->>4 AS source_hash
      FROM jsonb_array_elements(%t) AS r),
mapped AS (
    INSERT INTO image_paths (path, source_hash)
    SELECT DISTINCT ON (path) path, source_hash FROM batch ORDER BY path
    ON CONFLICT (path) DO NOTHING)
UPDATE store_products sp SET local_image_path = b.path
  FROM batch b
 WHERE sp.dispensary_id = b.dispensary_id AND sp.provider = b.provider
   AND sp.provider_product_id = b.provider_product_id
RETURNING sp.dispensary_id, sp.provider, sp.provider_product_id
"""

Key = tuple[int, str, str]  # (dispensary, provider, product)


class ImagePathWriter:
    """local_image_path updates, written DB_WRITE_BATCH_SIZE at a time in one statement."""

    def __init__(self, crawler: Crawler, store: CrawlDatabase):
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.store = store
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE")
        self.rows: dict[Key, tuple[str, str]] = {}  # → (path, source)
        self.maps: dict[str, str] = {}  # a brand logo's path → its source (no product row)
        self.new_rows = 0  # added since the last flush (rows kept for a retry do not start one)
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Task[None] | None = None

    def add(self, dispensary_id: int, provider: str, provider_product_id: str, path: str, source: str) -> None:
        self.rows[(dispensary_id, provider, provider_product_id)] = (path, source)
        self._added()

    def map(self, path: str, source: str) -> None:
        """A path with no product row to record it (a brand logo): its mapping only."""
        self.maps[path] = source
        self._added()

    def _added(self) -> None:
        self.new_rows += 1
        if self.new_rows >= self.batch_size and (self.inflight is None or self.inflight.done()):
            self.inflight = asyncio.ensure_future(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        try:
            await self.flush()
        except Exception:  # noqa: BLE001 - logged by flush; the rows are kept for the next one
            return

    async def flush(self, *, final: bool = False) -> None:
        async with self.lock:
            rows, self.rows = self.rows, {}
            maps, self.maps = self.maps, {}
            self.new_rows = 0
            if not rows and not maps:
                return
            try:
                pool = await self.store.open()
                async with pool.connection() as conn:
                    encoded = [encode_row((*key, *value)) for key, value in rows.items()]
                    encoded += [encode_row((None, None, None, path, source)) for path, source in maps.items()]
                    found = await (await conn.execute(UPDATE_PATHS, (batch_document(encoded),))).fetchall()
            except OUTAGE_ERRORS + (psycopg.Error,) as exc:
                for key, value in rows.items():
                    self.rows.setdefault(key, value)
                for path, source in maps.items():
                    self.maps.setdefault(path, source)
                logger.error("images: %d local_image_path updates not written: %s", len(rows), first_line(exc))
                raise
            for row in found:
                rows.pop((row[0], row[1], row[2]), None)
            self.stats.inc_value("cannaspider/images_paths_written", len(found))
            if final:
                if rows:  # their products were never stored (refused rows): the next crawl retries
                    self.stats.inc_value("cannaspider/images_paths_without_product", len(rows))
                return
            for key, value in rows.items():  # their product rows are still in the writer's buffer
                self.rows.setdefault(key, value)

    async def close(self) -> None:
        if self.inflight is not None:
            await asyncio.gather(self.inflight, return_exceptions=True)
        await self.store.ledger.flush_all()  # the product rows first: an UPDATE needs its row
        await self.flush(final=True)
