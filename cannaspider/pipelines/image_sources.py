"""The image sources table (migration 029, docs/images.md "One download per source"): one row per
image URL (its normalized form's SHA-256, image_source_hash in the database, so every process,
node and platform keys a URL alike), naming the one object stored for it, and the fetch's claim.

- `claim(url, path)` asks for the source in one statement: the row is inserted as 'fetching' by
  this claimer (a token of its own) and the path it fetches for becomes the source's object key;
  or, when the row is there, it is taken over if its last fetch failed or its claimer's lease
  (IMAGES_SOURCE_LEASE_S) ran out (a process that died mid-fetch). Otherwise the answer is the
  row as it is: 'stored' (map the path to it, no download) or 'fetching' (another claimer holds
  it: left to a later crawl, never waited on).
- `stored` and `failed` settle a claim, only while the token is still the row's: a claimer whose
  lease ran out and that finishes late does not overwrite the one that took over. A failed row is
  claimable again at once (the next crawl, or the next product that asks), so a claim is never
  stuck.
- `take_over(source, object_key, path)` claims a 'stored' source whose object is missing from the
  store (deleted by hand): fetched again, once, by one claimer.

The per-store paths are written here too (`ImagePathWriter`): store_products.local_image_path,
set once an image is stored (cannaspider/pipelines/image_fetch.py), and image_paths, each
per-store path mapped to the source whose object /img serves for it: DB_WRITE_BATCH_SIZE rows at
a time, in one statement, never a round trip per product. The mapping goes in before the path it
maps is recorded (the same statement), so /img never meets a recorded path it cannot resolve.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass

import psycopg
from scrapy.crawler import Crawler

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import OUTAGE_ERRORS, first_line
from cannaspider.pipelines.batch_writer import batch_document, encode_row

CLAIM = """
WITH k AS (SELECT image_source_hash(%(url)s) AS h),
claimed AS (
    INSERT INTO image_sources AS s (source_hash, url, object_key, status, claim, claimed_by, claimed_at, attempts)
    SELECT h, %(url)s, %(path)s, 'fetching', %(claim)s, %(node)s, now(), 1 FROM k
    ON CONFLICT (source_hash) DO UPDATE
       SET status = 'fetching', claim = EXCLUDED.claim, claimed_by = EXCLUDED.claimed_by, claimed_at = now(),
           object_key = EXCLUDED.object_key, attempts = s.attempts + 1
     WHERE s.status = 'failed'
        OR (s.status = 'fetching' AND s.claimed_at < now() - make_interval(secs => %(lease)s))
    RETURNING s.source_hash, s.object_key, 'mine'::text AS status
)
SELECT source_hash, object_key, status FROM claimed
UNION ALL
SELECT s.source_hash, s.object_key, s.status FROM image_sources s JOIN k ON s.source_hash = k.h
 WHERE NOT EXISTS (SELECT FROM claimed)
"""

TAKE_OVER = """
UPDATE image_sources
   SET status = 'fetching', claim = %(claim)s, claimed_by = %(node)s, claimed_at = now(),
       object_key = %(path)s, attempts = attempts + 1
 WHERE source_hash = %(source)s AND status = 'stored' AND object_key = %(missing)s
RETURNING object_key
"""

STORED = """
UPDATE image_sources SET status = 'stored', stored_at = now(), claim = NULL, last_error = NULL
 WHERE source_hash = %s AND claim = %s
"""

FAILED = """
UPDATE image_sources SET status = 'failed', claim = NULL, claimed_at = NULL, last_error = %s
 WHERE source_hash = %s AND claim = %s
"""

MINE, STORED_ALREADY, ELSEWHERE = "mine", "stored", "fetching"


@dataclass(slots=True)
class Claim:
    """The answer for one URL: `status` MINE (fetch it, write `object_key`, settle with `token`),
    STORED_ALREADY (its object is `object_key`) or ELSEWHERE (another claimer is fetching it)."""

    source: str  # image_source_hash(url); "" when another claimer inserted it this very moment
    object_key: str
    status: str
    token: str = ""


class ImageSources:
    """The claims of one crawl's pipeline, on the crawl's database pool."""

    def __init__(self, db: CrawlDatabase, lease_s: float):
        self.db = db
        self.lease_s = lease_s
        self.node = f"{socket.gethostname()}:{os.getpid()}"

    async def claim(self, url: str, path: str) -> Claim:
        token = uuid.uuid4().hex
        params = {"url": url, "path": path, "claim": token, "node": self.node, "lease": self.lease_s}
        pool = await self.db.open()
        async with pool.connection() as conn:
            row = await (await conn.execute(CLAIM, params)).fetchone()
        if row is None:  # inserted by another claimer after this statement's snapshot: theirs
            return Claim("", path, ELSEWHERE)
        return Claim(row[0], row[1], row[2], token if row[2] == MINE else "")

    async def take_over(self, source: str, missing: str, path: str) -> Claim:
        token = uuid.uuid4().hex
        params = {"source": source, "missing": missing, "path": path, "claim": token, "node": self.node}
        pool = await self.db.open()
        async with pool.connection() as conn:
            row = await (await conn.execute(TAKE_OVER, params)).fetchone()
        return Claim(source, row[0], MINE, token) if row else Claim(source, missing, ELSEWHERE)

    async def stored(self, claim: Claim) -> None:
        await self._settle(STORED, (claim.source, claim.token))

    async def failed(self, claim: Claim, code: str) -> None:
        await self._settle(FAILED, (code, claim.source, claim.token))

    async def _settle(self, query: str, params: tuple[str, ...]) -> None:
        pool = await self.db.open()
        async with pool.connection() as conn:
            await conn.execute(query, params)


# store_products.local_image_path, set once an image is stored (cannaspider/pipelines/image_fetch.py),
# and image_paths, each per-store path mapped to the source whose object /img serves for it
# (docs/images.md, "One download per source"): DB_WRITE_BATCH_SIZE rows at a time, in one statement,
# never a round trip per product. The mapping goes in before the path it maps is recorded (the same
# statement), so /img never meets a recorded path it cannot resolve.

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
