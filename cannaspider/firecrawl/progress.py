"""An on-page job's progress, as a client polls it every ~2 s (docs/onpage.md, "Progress"):
written by the job (JobProgress) into onpage_progress (migrations/045_own_pages_progress.sql),
read with the keyword's queued task (read()) for GET /api/keywords/{id}/progress.

The job writes its row when it starts (running, the pages it sends to Firecrawl, every locale
and our pages included), after each poll of a batch (pages Firecrawl is done with; `updated_at`
says the job is alive), when a locale is classified and merged (its totals added), and when it
ends (done, or failed with its one-line error). A row still `running` that no write touched for
STALE_AFTER_S reads `interrupted`: its process ended without saying so (killed, a host restart).

A page is done for Firecrawl when its document arrived, when Firecrawl refused its URL, or
when it left the batch's `total` (a failed page does: docs/firecrawl.md); a batch over, every
page of it is done. The writes are advisory: one that fails is logged and the job goes on (its
merge is what matters).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from cannaspider.db.errors import first_line

logger = logging.getLogger(__name__)

TOTALS = {"ok": "crawled", "blocked": "blocked", "timeout": "failed", "empty": "failed", "fetch_error": "failed"}
POLL_AFTER_S = 2.0  # what the answer suggests to a client
# Longer than anything a live job goes without a write: a poll every FIRECRAWL_POLL_INTERVAL_S, and
# a locale's pages read after its last poll (ONPAGE_PARSE_TIMEOUT_S each, two at a time: 25 pages
# worst case about 250 s)
STALE_AFTER_S = 900

START = """
INSERT INTO onpage_progress AS p (keyword_id, state, pages_total, pages_done, locales_total, locales_done,
                                  crawled, blocked, failed, error, started_at, updated_at, finished_at)
SELECT id, 'running', %(pages)s, 0, %(locales)s, 0, 0, 0, 0, NULL, now(), now(), NULL
  FROM keywords WHERE id = %(keyword_id)s
ON CONFLICT (keyword_id) DO UPDATE SET
       state = 'running', pages_total = EXCLUDED.pages_total, pages_done = 0,
       locales_total = EXCLUDED.locales_total, locales_done = 0, crawled = 0, blocked = 0, failed = 0,
       error = NULL, started_at = now(), updated_at = now(), finished_at = NULL
"""
UPDATE = """
UPDATE onpage_progress SET pages_done = %(done)s, locales_done = %(locales_done)s, crawled = %(crawled)s,
       blocked = %(blocked)s, failed = %(failed)s, updated_at = now()
 WHERE keyword_id = %(keyword_id)s AND state = 'running'
"""
FINISH = """
UPDATE onpage_progress SET state = %(state)s, pages_done = %(done)s, locales_done = %(locales_done)s,
       crawled = %(crawled)s, blocked = %(blocked)s, failed = %(failed)s, error = %(error)s,
       updated_at = now(), finished_at = now()
 WHERE keyword_id = %(keyword_id)s AND state = 'running'
"""

# The keyword's progress row and its newest crawl_onpage task that is waiting or running
READ = """
SELECT k.id,
       (SELECT to_jsonb(p) || jsonb_build_object(
                   'stale', p.state = 'running' AND p.updated_at < now() - make_interval(secs => %(stale)s))
          FROM onpage_progress p WHERE p.keyword_id = k.id),
       (SELECT jsonb_build_object('id', t.id, 'status', t.status,
                                  -- still to start: waiting, or claimed after the last job started
                                  'waiting', t.status = 'pending' OR t.claimed_at > coalesce(
                                      (SELECT p.started_at FROM onpage_progress p WHERE p.keyword_id = k.id),
                                      '-infinity'))
          FROM worker_tasks t
         WHERE t.role = 'crawl_onpage' AND t.payload ->> 'keyword_id' = k.id::text
           AND t.status IN ('pending', 'running')
         ORDER BY t.id DESC LIMIT 1)
  FROM keywords k WHERE k.id = %(keyword_id)s
"""


class JobProgress:
    """One keyword job's progress row. `pool` is the job's async () -> AsyncConnectionPool."""

    def __init__(self, pool: Callable[[], Awaitable[AsyncConnectionPool]], keyword_id: int) -> None:
        self.pool = pool
        self.keyword_id = keyword_id
        self.pages_total = 0
        self.started = False
        self.batches: dict[str, int] = {}  # pages done, by batch ("fr-FR#0": a locale's first)
        self.locales_done = 0
        self.totals: Counter[str] = Counter()
        self._lock = asyncio.Lock()  # writes in order: each writes the state as it is then

    @property
    def done(self) -> int:
        return min(self.pages_total, sum(self.batches.values()))

    async def _write(self, sql: str, params: dict[str, Any]) -> None:
        async with self._lock:
            try:
                pool = await self.pool()
                async with pool.connection() as conn:
                    await conn.execute(sql, {"keyword_id": self.keyword_id, **params})
            except psycopg.Error as exc:
                logger.warning("keyword %s: progress not recorded: %s", self.keyword_id, first_line(exc))

    def _state(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "locales_done": self.locales_done,
            **{k: self.totals[k] for k in ("crawled", "blocked", "failed")},
        }

    async def start(self, pages: int, locales: int) -> None:
        self.pages_total, self.started = pages, True
        await self._write(START, {"pages": pages, "locales": locales})

    async def batch_polled(self, batch: str, done: int) -> None:
        """A batch's pages done so far (written at every poll: updated_at says the job lives)."""
        self.batches[batch] = done
        await self._write(UPDATE, self._state())

    async def locale_merged(self, counts: Counter[str]) -> None:
        self.locales_done += 1
        for status, n in counts.items():
            self.totals[TOTALS.get(status, "failed")] += n
        await self._write(UPDATE, self._state())

    async def finish(self, error: str | None = None) -> None:
        state = self._state()
        if error is None:
            state["done"] = self.pages_total
        await self._write(FINISH, {**state, "state": "failed" if error else "done", "error": error})


def pages_done(submitted: int, invalid: int, arrived: int, reported_total: int, finished: bool) -> int:
    """A batch's pages Firecrawl is done with, from one poll: documents arrived, URLs it refused,
    and the pages that left its `total` (a failed page does); all of them once it is over. A
    `total` of 0 while it runs says nothing yet (no page is counted failed from it)."""
    if finished:
        return submitted
    failed = max(0, submitted - invalid - reported_total) if reported_total > 0 else 0
    return min(submitted, arrived + invalid + failed)


async def read(conn: AsyncConnection, keyword_id: int) -> dict[str, Any] | None:
    """GET /api/keywords/{id}/progress's answer; None for an unknown keyword.

    queued: a crawl_onpage task of the keyword waits (or was claimed, and its job has not started
    since); running: pages done out of total; done / failed: with the totals; interrupted: running,
    but not written for STALE_AFTER_S. idle: never crawled.
    """
    row = await (await conn.execute(READ, {"keyword_id": keyword_id, "stale": STALE_AFTER_S})).fetchone()
    if row is None:
        return None
    _, p, task = row
    waiting = task is not None and bool(task["waiting"])
    if waiting and (p is None or p["state"] != "running" or p["stale"]):
        state = "queued"
    elif p is None:
        state = "idle"
    else:
        state = "interrupted" if p["stale"] else p["state"]
    answer: dict[str, Any] = {
        "keywordId": keyword_id,
        "state": state,
        "pages": {"done": p["pages_done"], "total": p["pages_total"]} if p else None,
        "locales": {"done": p["locales_done"], "total": p["locales_total"]} if p else None,
        "totals": {k: p[k] for k in ("crawled", "blocked", "failed")} if p else None,
        "error": p["error"] if p else None,
        "startedAt": p["started_at"] if p else None,
        "updatedAt": p["updated_at"] if p else None,
        "finishedAt": p["finished_at"] if p else None,
        "task": {"id": task["id"], "status": task["status"]} if task else None,
        "pollAfterS": POLL_AFTER_S if state in ("queued", "running") else None,
    }
    return answer
