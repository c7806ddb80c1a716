"""Feed files whose write failure is one line, not one traceback per item (README, "Feeds and the
item schema"): FEED_STORAGES for plain paths and file:// URIs.

Scrapy's FileFeedStorage hands the exporter a plain file. On a full disk every item after the
first failed write raised inside the item_scraped signal handler, which logged it with its
traceback (235 of them for one store), Scrapy logged one more when it closed the file, and the
crawl exited 0. Here the file stops at its first error: that error is recorded once (stat
FEED_ERROR_STAT, read by the crawl command for its `error:` line and exit code:
cannaspider/commands/crawl.py) and logged as one line, later writes to that feed are dropped, and
storing it at the close raises FeedNotStored, which Scrapy logs as its "Error storing … feed"
line, without a traceback (the message says it all). The crawl goes on: the database writes never
depend on the feed, so every row is still stored.
"""

from __future__ import annotations

import io
import logging
from typing import IO, Any

from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.extensions.feedexport import FeedExporter, FileFeedStorage
from scrapy.statscollectors import StatsCollector

from cannaspider.crawl_outcome import record_feed_error

logger = logging.getLogger(__name__)


class FeedNotStored(Exception):
    """A feed file that could not be written; the message is the whole story."""


class _NoTraceback(logging.Filter):
    """Drops the traceback from Scrapy's "Error storing … feed" line when the error is ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], FeedNotStored):
            record.exc_info = None
            record.exc_text = None
        return True


_NO_TRACEBACK = _NoTraceback()


class _StopAtFirstError(io.BufferedWriter):
    """A feed file that reports its first write error (to `failed`) and drops every write after it.
    The exporters write through it (CSV through a TextIOWrapper over it); close() always releases
    the file descriptor, even when the buffered rest cannot be written."""

    def __init__(self, raw: io.RawIOBase, failed: Any):
        super().__init__(raw)
        self._failed = failed
        self.error: OSError | None = None

    def _fail(self, exc: OSError) -> None:
        if self.error is None:
            self.error = exc
            self._failed(exc)

    def write(self, data: Any) -> int:
        size = len(memoryview(data))
        if self.error is None:
            try:
                super().write(data)
            except OSError as exc:
                self._fail(exc)
        return size

    def flush(self) -> None:
        if self.error is None:
            try:
                super().flush()
            except OSError as exc:
                self._fail(exc)

    def close(self) -> None:
        try:
            super().close()  # calls flush() above, then closes the descriptor whatever it did
        except OSError as exc:
            self._fail(exc)


class GuardedFileFeedStorage(FileFeedStorage):
    def __init__(self, uri: str, *, stats: StatsCollector, feed_options: dict[str, Any] | None = None):
        super().__init__(uri, feed_options=feed_options)
        self.stats = stats
        self.file: _StopAtFirstError | None = None

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, uri: str, *, feed_options: dict[str, Any] | None = None
    ) -> GuardedFileFeedStorage:
        assert crawler.stats is not None
        logging.getLogger(FeedExporter.__module__).addFilter(_NO_TRACEBACK)  # once: the same filter object
        return cls(uri, stats=crawler.stats, feed_options=feed_options)

    def open(self, spider: Spider) -> IO[bytes]:
        opened = super().open(spider)  # Scrapy's file: its folders made, its mode (overwrite or append)
        assert isinstance(opened, io.BufferedWriter)
        self.file = _StopAtFirstError(opened.detach(), self._failed)  # the same descriptor, our buffer
        return self.file

    def _failed(self, exc: OSError) -> None:
        message = f"the feed {self.path} could not be written: {exc.strerror or exc}"
        record_feed_error(self.stats, message)
        logger.error("%s; the crawl goes on without it (the database writes do not depend on it)", message)

    def store(self, file: IO[bytes]) -> None:
        super().store(file)
        if self.file is not None and self.file.error is not None:
            raise FeedNotStored(f"{self.path}: {self.file.error.strerror or self.file.error}")
