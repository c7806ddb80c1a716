"""Which stored object `/img` shows for a per-store path (docs/images.md, "One download per
source"): an image is stored once per source, as the object of the first path it was fetched for,
and every other store's path is mapped to that source in image_paths (the pipeline writes the
mapping before it records the path: cannaspider/pipelines/image_sources.py). The per-store paths,
the API and the pages are unchanged; only /img looks the path up.

A mapping does not change once written, so answers are kept (SOURCE_TTL_S, in case a source whose
object was deleted by hand is fetched again under another key); a path with no mapping (a file of
its own, written before migration 029, or not recorded yet) is asked again after MISS_TTL_S.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from psycopg_pool import AsyncConnectionPool

LOOKUP = """
SELECT s.object_key FROM image_paths p JOIN image_sources s USING (source_hash) WHERE p.path = %s
"""

SOURCE_TTL_S = 300.0
MISS_TTL_S = 1.0
ENTRIES = 100_000  # paths kept (some 20 MB at most)


class SourceMap:
    """path → the object key of its source, read from the database and kept."""

    def __init__(self, entries: int = ENTRIES):
        self.entries = entries
        self.kept: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self.lookups = 0  # queries sent (the tests count them)

    async def resolve(self, pool: AsyncConnectionPool, path: str) -> str | None:
        """The object key `path` is mapped to, or None (serve the path as it is)."""
        now = time.monotonic()
        hit = self.kept.get(path)
        if hit is not None and hit[0] > now:
            return hit[1]
        self.lookups += 1
        async with pool.connection() as conn:
            row = await (await conn.execute(LOOKUP, (path,))).fetchone()
        key: str | None = row[0] if row else None
        self.kept[path] = (now + (SOURCE_TTL_S if key is not None else MISS_TTL_S), key)
        self.kept.move_to_end(path)
        while len(self.kept) > self.entries:
            self.kept.popitem(last=False)
        return key
