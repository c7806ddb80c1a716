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
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from cannaspider.db.crawl_database import CrawlDatabase

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
