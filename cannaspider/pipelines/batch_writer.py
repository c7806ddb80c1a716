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

When the database refuses a batch for what is in it (a value out of a column's range, a NUL
character: SQLSTATE classes 22, 23, 54), the batch is split in two and each half retried, down to
single rows, so every good row of every store in it is written and only the bad rows are lost:
each is logged once with its store and product, counted (`cannaspider/products_refused`), and
settled for its store's completion (a refused row makes its store's crawl incomplete, with the
reason: see product_writer.py). An outage (connection lost, pool timeout) keeps the rows for the next flush.
Any other failure (an unexpected exception, a statement the server rejects whatever the data)
settles the batch as refused and marks its stores' crawls incomplete, with the reason: a store's
completion never waits out its timeout for rows that will not come.

A batch refused because its month has no partition (db/partitions.py) is not refused for its
data: the partitions are made and the batch retried once; refused again, it fails its stores'
crawls as above, never a complete crawl with its rows lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Self

import orjson
import psycopg
from psycopg.types.json import Jsonb
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from cannaspider.db.crawl_database import CrawlDatabase
from cannaspider.db.errors import OUTAGE_ERRORS, first_line
from cannaspider.db.partitions import ensure_ahead, missing_partition

logger = logging.getLogger(__name__)


def encode_row(row: tuple[Any, ...]) -> bytes:
    """One row as a JSON array (orjson handles dataclasses and datetimes itself)."""
    return orjson.dumps(row)


def batch_document(rows: list[bytes]) -> Jsonb:
    """Encoded rows as one jsonb parameter (send it with a %t placeholder: text format, as is)."""
    return Jsonb(b"[" + b",".join(rows) + b"]", dumps=_already_encoded)


def _already_encoded(data: bytes) -> bytes:
    return data


# What the data of a row can make PostgreSQL refuse: data exceptions (22: numeric or integer
# overflow, NUL characters, bad escapes), integrity violations (23) and program limits (54: a
# value too large for an index). Anything else says nothing about a particular row.
DATA_ERROR_CLASSES = ("22", "23", "54")


def refused_for_its_data(exc: BaseException) -> bool:
    """The database refused the statement because of a value in it (not an outage, not a bug)."""
    if not isinstance(exc, psycopg.Error) or missing_partition(exc):  # the month's table, not the row
        return False
    if exc.sqlstate is not None:
        return exc.sqlstate[:2] in DATA_ERROR_CLASSES
    return isinstance(exc, psycopg.DataError)  # raised by psycopg itself (e.g. a NUL byte)


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
    item_class: type[Any]

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.store = CrawlDatabase.for_crawler(crawler)
        self.batch_size = crawler.settings.getint("DB_WRITE_BATCH_SIZE")
        self.max_buffered = 4 * self.batch_size
        self.buffer: list[bytes] = []  # encoded rows
        self.keys: list[tuple[Any, ...]] = []  # (dispensary_id, crawl_run_id) of each buffered row
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Future[None] | None = None
        self.store.ledger.flushers.append(self.flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def close_spider(self) -> None:
        try:
            await self.flush()
        except OUTAGE_ERRORS as exc:
            # the database is gone and the crawl is over: the rows still buffered are lost. One line,
            # not a traceback (the store's close then ends the crawl command with a non-zero exit).
            self.after_lost_at_close(len(self.buffer))
            logger.error(
                "%s: the database was lost; %d rows were not stored: %s",
                type(self).__name__,
                len(self.buffer),
                first_line(exc),
            )
        except Exception:  # logged by the write; rows still buffered now are lost
            self.after_lost_at_close(len(self.buffer))
            raise

    def after_lost_at_close(self, rows: int) -> None:
        """Hook: rows the database never took before the crawl closed (it was down)."""

    def process_item(self, item: Any) -> Any:
        # Synchronous unless a batch is full: an awaitable per item costs more than the row.
        if not isinstance(item, self.item_class):
            return item
        key = (item.dispensary_id, item.crawl_run_id)
        try:
            encoded = encode_row(self.row(item))
        except Exception as exc:  # e.g. a lone surrogate orjson cannot encode: this row only
            self.after_unencodable(key, item, exc)  # logs it (once: the drop itself is DEBUG)
            raise DropItem(
                f"{self.describe_item(item)}: not stored: unexpected {type(exc).__name__}: {exc}", log_level="DEBUG"
            ) from exc
        self.buffer.append(encoded)
        self.keys.append(key)
        self.after_buffered(item)
        if len(self.buffer) >= self.batch_size:
            if self.inflight is None or self.inflight.done():
                self.inflight = asyncio.ensure_future(self._background_write())
            elif len(self.buffer) >= self.max_buffered:
                return self._after_inflight(self.inflight, item)  # the database is far behind: slow the crawl down
        return item

    async def _after_inflight(self, inflight: asyncio.Future[None], item: Any) -> Any:
        await asyncio.shield(inflight)
        return item

    async def _background_write(self) -> None:
        try:
            await self._write_buffer()
        except Exception:  # noqa: BLE001 - an outage: already logged, the rows kept; the next flush retries
            return
        if len(self.buffer) >= self.batch_size:  # rows kept arriving while this batch was written
            self.inflight = asyncio.ensure_future(self._background_write())

    def after_buffered(self, item: Any) -> None:
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
            started = time.perf_counter()
            # the rows still to write, as (rows, keys) chunks; the next one is last (a stack), so
            # rows are written in the order they arrived (the latest crawl's row wins the upsert)
            chunks = [(rows, keys)]
            partitions_made = False
            try:
                pool = await self.store.open()
                async with pool.connection() as conn:
                    while chunks:
                        chunk, chunk_keys = chunks[-1]
                        try:
                            async with conn.transaction():
                                result = await self.write(conn, batch_document(chunk), chunk_keys)
                        except Exception as exc:
                            if missing_partition(exc) and not partitions_made:
                                partitions_made = True  # once: refused again, the batch fails its crawls
                                await self._make_partitions(conn, exc)
                                continue
                            if not refused_for_its_data(exc):
                                raise
                            chunks.pop()
                            if len(chunk) == 1:
                                self._refused_row(chunk[0], chunk_keys[0], exc)
                            else:  # split it: the halves that hold no bad row are written
                                half = len(chunk) // 2
                                chunks.append((chunk[half:], chunk_keys[half:]))
                                chunks.append((chunk[:half], chunk_keys[:half]))
                            continue
                        chunks.pop()
                        self.after_write(chunk_keys, result)
            except OUTAGE_ERRORS as exc:
                # the server went away (restart, network): keep the unwritten rows for the next flush
                kept = [row for chunk, _ in chunks for row in chunk]
                self.buffer[:0] = kept
                self.keys[:0] = [key for _, chunk_keys in chunks for key in chunk_keys]
                logger.error(
                    "%s: database unavailable, %d rows kept for the next attempt: %s",
                    type(self).__name__,
                    len(kept),
                    first_line(exc),
                )
                raise
            except Exception as exc:
                # refused whatever the rows hold (or a bug): these stores' crawls cannot count as complete
                lost_keys = [key for _, chunk_keys in chunks for key in chunk_keys]
                # the crawl's reason: why its rows were lost (a missing partition, a bug's exception)
                why = first_line(exc) if isinstance(exc, psycopg.Error) else f"{type(exc).__name__}: {first_line(exc)}"
                reason = f"a batch of this store's rows was refused by the database: {why}"
                if isinstance(exc, psycopg.Error):
                    logger.error(
                        "%s: a batch of %d rows was refused by the database: %s",
                        type(self).__name__,
                        len(lost_keys),
                        first_line(exc),
                    )
                else:
                    logger.exception("%s: writing a batch of %d rows failed", type(self).__name__, len(lost_keys))
                for key in lost_keys:
                    self.store.ledger.failed_runs.setdefault(key, reason)
                self.after_refused(lost_keys)
                self.crawler.stats.inc_value("cannaspider/products_refused", len(lost_keys))
                # not raised on: the rows are settled and their crawls marked, so nobody waits for them
            finally:
                self.crawler.stats.inc_value(
                    f"cannaspider/db_write_ms/{type(self).__name__}", round((time.perf_counter() - started) * 1000)
                )

    async def _make_partitions(self, conn: psycopg.AsyncConnection, exc: Exception) -> None:
        """The month's partition was missing (no timer made it in time): make it, to retry the batch."""
        async with conn.transaction():
            made = await ensure_ahead(conn)
        self.crawler.stats.inc_value("cannaspider/partitions_made", made)
        logger.warning(
            "%s: %s; %d partition(s) made, the batch is written again", type(self).__name__, first_line(exc), made
        )

    def _refused_row(self, row: bytes, key: tuple[Any, ...], exc: Exception) -> None:
        logger.error(
            "%s: %s refused by the database, not stored: %s",
            type(self).__name__,
            self.describe_row(row),
            first_line(exc),
        )
        self.crawler.stats.inc_value("cannaspider/products_refused")
        self.after_refused([key], bad_rows=True, reason=first_line(exc))

    def after_unencodable(self, key: tuple[Any, ...], item: Any, exc: Exception) -> None:
        """Hook: the item's row could not even be built or encoded; the item is dropped."""
        logger.error(
            "%s: %s cannot be stored: unexpected %s: %s",
            type(self).__name__,
            self.describe_item(item),
            type(exc).__name__,
            exc,
        )
        self.crawler.stats.inc_value("cannaspider/products_refused")

    def describe_item(self, item: Any) -> str:
        return f"dispensary {item.dispensary_id}"

    def describe_row(self, row: bytes) -> str:
        """Which store and product an encoded row is, for the log line of a refused row."""
        return "a row"

    def after_refused(self, keys: list[tuple[Any, ...]], *, bad_rows: bool = False, reason: str = "") -> None:
        """Hook: these rows (their run keys) are lost for good: rows the database refused for their
        values (bad_rows, with the database's `reason`), or a whole batch that could not be written
        (its crawls are marked)."""

    def after_write(self, keys: list[tuple[Any, ...]], result: Any) -> None:
        """Hook, on the event loop: the written rows' run keys and what `write` returned."""

    def row(self, item: Any) -> tuple[Any, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def write(
        self, conn: psycopg.AsyncConnection, batch: Jsonb, keys: list[tuple[Any, ...]]
    ) -> Any:  # pragma: no cover - abstract
        """Write the batch (a JSON array of rows, `keys` their run keys) in one statement; return
        what after_write takes."""
        raise NotImplementedError
