"""Base for pipelines that write in batches: items are buffered and written DB_WRITE_BATCH_SIZE
at a time with COPY, never a round trip per row. The buffer is swapped out before any await, so
concurrent items never write a row twice or lose one; a store's completion flushes early.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, is_dataclass
from datetime import datetime
from decimal import Decimal

import psycopg
from psycopg_pool import PoolTimeout
from scrapy.crawler import Crawler

from cannaspider.db.crawl_store import CrawlStore
from cannaspider.db.errors import DatabaseSetupError, first_line

logger = logging.getLogger(__name__)


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value):
        return asdict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(value: object) -> str:
    if is_dataclass(value):
        value = asdict(value)
    elif isinstance(value, list):
        value = [asdict(v) if is_dataclass(v) else v for v in value]
    return json.dumps(value, default=_json_default, separators=(",", ":"))


class BatchWriterPipeline:
    item_class: type

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlStore.for_crawler(crawler)
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE", 1000)
        self.buffer: list = []
        self.lock = asyncio.Lock()
        self.store.flushers.append(self.flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler):
        return cls(crawler)

    async def open_spider(self) -> None:
        await self.store.open()

    async def close_spider(self) -> None:
        await self.flush()

    async def process_item(self, item):
        if not isinstance(item, self.item_class):
            return item
        self.buffer.append(self.row(item))
        self.after_buffered(item)
        if len(self.buffer) >= self.batch_size:
            await self.flush()
        return item

    def after_buffered(self, item) -> None:
        """Hook: called once the item's row is in the buffer."""

    async def flush(self) -> None:
        async with self.lock:
            rows, self.buffer = self.buffer, []
            if not rows:
                return
            try:
                pool = await self.store.open()
                async with pool.connection() as conn:
                    await self.write(conn, rows)
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
                logger.error("%s: a batch of %d rows was refused by the database: %s",
                             type(self).__name__, len(rows), first_line(exc))
                raise

    def run_key(self, row: tuple) -> tuple:
        """(dispensary_id, crawl_run_id) of a buffered row."""
        raise NotImplementedError

    def row(self, item) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    async def write(self, conn, rows: list[tuple]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
