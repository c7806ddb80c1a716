"""Base for pipelines that write in batches: items are buffered and written DB_WRITE_BATCH_SIZE
at a time in one statement (the batch as one JSON document), never a round trip per row. The
buffer is swapped out before any await, so concurrent items never write a row twice or lose one;
a store's completion flushes early.

A full batch is written in the background while the crawl goes on (PostgreSQL works on the other
core), one write at a time per writer; items only wait when four batches are queued, so a slow
database slows the crawl down instead of piling up memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from decimal import Decimal

import orjson
import psycopg
from psycopg_pool import PoolTimeout
from scrapy.crawler import Crawler

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import DatabaseSetupError, first_line

logger = logging.getLogger(__name__)


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def batch_json(rows: list[tuple]) -> str:
    """A whole batch as one JSON array of row arrays: encoded in C in one call (orjson handles the
    dataclasses and datetimes itself), sent as one parameter: no per-row formatting in Python."""
    return orjson.dumps(rows, default=_json_default).decode()


def json_columns(columns: tuple[tuple[str, str], ...], source: str = "r") -> str:
    """SELECT list reading row arrays back: `(r->>0)::bigint AS seq, …`; jsonb columns keep their
    nested JSON (and a JSON null becomes SQL NULL)."""
    parts = []
    for index, (name, sql_type) in enumerate(columns):
        if sql_type == "jsonb":
            parts.append(f"nullif({source}->{index}, 'null'::jsonb) AS {name}")
        elif sql_type == "text":
            parts.append(f"{source}->>{index} AS {name}")
        else:
            parts.append(f"({source}->>{index})::{sql_type} AS {name}")
    return ", ".join(parts)


class BatchWriterPipeline:
    item_class: type

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlStore.for_crawler(crawler)
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE", 1000)
        self.max_buffered = 4 * self.batch_size
        self.buffer: list = []
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Future | None = None
        self.store.flushers.append(self.flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler):
        return cls(crawler)

    async def close_spider(self) -> None:
        await self.flush()

    def process_item(self, item):
        # Synchronous unless a batch is full: an awaitable per item costs more than the row.
        if not isinstance(item, self.item_class):
            return item
        self.buffer.append(self.row(item))
        self.after_buffered(item)
        if len(self.buffer) >= self.batch_size:
            if self.inflight is None or self.inflight.done():
                self.inflight = asyncio.ensure_future(self._background_write())
            elif len(self.buffer) >= self.max_buffered:
                return self._after_inflight(item)  # the database is far behind: slow the crawl down
        return item

    async def _after_inflight(self, item):
        await asyncio.shield(self.inflight)
        return item

    async def _background_write(self) -> None:
        try:
            await self._write_buffer()
        except Exception:  # already logged, rows kept or their crawls marked; the next flush retries
            return
        if len(self.buffer) >= self.batch_size:  # rows kept arriving while this batch was written
            self.inflight = asyncio.ensure_future(self._background_write())

    def after_buffered(self, item) -> None:
        """Hook: called once the item's row is in the buffer."""

    async def flush(self) -> None:
        """Write everything buffered so far (after any batch already being written)."""
        if self.inflight is not None and not self.inflight.done():
            await asyncio.shield(self.inflight)
        await self._write_buffer()

    async def _write_buffer(self) -> None:
        async with self.lock:
            rows, self.buffer = self.buffer, []
            if not rows:
                return
            try:
                pool = await self.store.open()
                started = time.perf_counter()
                async with pool.connection() as conn:
                    result = await self.write(conn, rows)
                self.after_write(result)
                self.crawler.stats.inc_value(f"cannaspider/db_write_ms/{type(self).__name__}",
                                             round((time.perf_counter() - started) * 1000))
            except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, DatabaseSetupError) as exc:
                # the server went away (restart, network): keep the rows for the next flush
                self.buffer[:0] = rows
                logger.error("%s: database unavailable, %d rows kept for the next attempt: %s",
                             type(self).__name__, len(rows), first_line(exc))
                raise
            except psycopg.Error as exc:
                # the batch itself was refused: its stores' crawls cannot count as complete
                for run_key in {self.run_key(row) for row in rows}:
                    self.store.failed_runs.add(run_key)
                self.after_refused(rows)
                logger.error("%s: a batch of %d rows was refused by the database: %s",
                             type(self).__name__, len(rows), first_line(exc))
                raise

    def run_key(self, row: tuple) -> tuple:
        """(dispensary_id, crawl_run_id) of a buffered row."""
        raise NotImplementedError

    def after_refused(self, rows: list[tuple]) -> None:
        """Hook: the database refused these rows for good (their crawls are already marked)."""

    def after_write(self, result) -> None:
        """Hook, on the event loop: what `write` returned."""

    def row(self, item) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    async def write(self, conn: psycopg.AsyncConnection, rows: list[tuple]):  # pragma: no cover - abstract
        """Write `rows` (one transaction); return what after_write takes."""
        raise NotImplementedError
