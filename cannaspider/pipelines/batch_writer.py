"""Base for pipelines that write in batches: items are buffered and written DB_WRITE_BATCH_SIZE
at a time in one statement (the batch as one JSON document), never a round trip per row. The
buffer is swapped out before any await, so concurrent items never write a row twice or lose one;
a store's completion flushes early.

Each row is encoded to JSON (orjson, in C) as it is buffered, while its values are still in the
CPU's cache (encoding a thousand rows later cost twice as much), and the batch goes to PostgreSQL
as those bytes joined: typed jsonb, in text format, never decoded to a Python str and re-encoded.

A full batch is written in the background while the crawl goes on (PostgreSQL works on the other
core), one write at a time per writer; items only wait when four batches are queued, so a slow
database slows the crawl down instead of piling up memory.
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson
import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout
from scrapy.crawler import Crawler

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import DatabaseSetupError, first_line

logger = logging.getLogger(__name__)


def encode_row(row: tuple) -> bytes:
    """One row as a JSON array (orjson handles dataclasses and datetimes itself)."""
    return orjson.dumps(row)


def batch_document(rows: list[bytes]) -> Jsonb:
    """Encoded rows as one jsonb parameter (send it with a %t placeholder: text format, as is)."""
    return Jsonb(b"[" + b",".join(rows) + b"]", dumps=_already_encoded)


def _already_encoded(data: bytes) -> bytes:
    return data


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
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE")
        self.max_buffered = 4 * self.batch_size
        self.buffer: list[bytes] = []  # encoded rows
        self.keys: list[tuple] = []  # (dispensary_id, crawl_run_id) of each buffered row
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
        self.buffer.append(encode_row(self.row(item)))
        self.keys.append((item.dispensary_id, item.crawl_run_id))
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
            keys, self.keys = self.keys, []
            if not rows:
                return
            try:
                pool = await self.store.open()
                started = time.perf_counter()
                async with pool.connection() as conn:
                    result = await self.write(conn, batch_document(rows))
                self.after_write(keys, result)
                self.crawler.stats.inc_value(
                    f"cannaspider/db_write_ms/{type(self).__name__}", round((time.perf_counter() - started) * 1000)
                )
            except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, DatabaseSetupError) as exc:
                # the server went away (restart, network): keep the rows for the next flush
                self.buffer[:0] = rows
                self.keys[:0] = keys
                logger.error(
                    "%s: database unavailable, %d rows kept for the next attempt: %s",
                    type(self).__name__,
                    len(rows),
                    first_line(exc),
                )
                raise
            except psycopg.Error as exc:
                # the batch itself was refused: its stores' crawls cannot count as complete
                self.store.failed_runs.update(keys)
                self.after_refused(keys)
                logger.error(
                    "%s: a batch of %d rows was refused by the database: %s",
                    type(self).__name__,
                    len(rows),
                    first_line(exc),
                )
                raise

    def after_refused(self, keys: list[tuple]) -> None:
        """Hook: the database refused these rows (their run keys) for good; their crawls are marked."""

    def after_write(self, keys: list[tuple], result) -> None:
        """Hook, on the event loop: the written rows' run keys and what `write` returned."""

    def row(self, item) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    async def write(self, conn: psycopg.AsyncConnection, batch: Jsonb):  # pragma: no cover - abstract
        """Write the batch (a JSON array of rows) in one statement; return what after_write takes."""
        raise NotImplementedError
