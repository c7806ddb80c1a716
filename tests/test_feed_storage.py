"""cannaspider/feed_storage.py: a feed file that cannot be written (/dev/full: every write fails
with ENOSPC, as on a full disk) is one recorded error and one log line, never an exception per item;
a writable one is written as Scrapy's own storage writes it."""

from __future__ import annotations

import io
import logging

import pytest
from scrapy import Spider
from scrapy.exporters import JsonLinesItemExporter
from scrapy.extensions.feedexport import FeedExporter
from scrapy.utils.test import get_crawler

from cannaspider.crawl_outcome import FEED_ERROR_STAT
from cannaspider.exporters import FlatCsvItemExporter
from cannaspider.feed_storage import FeedNotStored, GuardedFileFeedStorage

ITEMS = [{"name": f"Product {i}", "brand": "Brand " * 20, "price_rec": i / 4} for i in range(2000)]


def storage(uri: str, **feed_options) -> tuple[GuardedFileFeedStorage, Spider]:
    crawler = get_crawler(Spider)
    return GuardedFileFeedStorage.from_crawler(crawler, uri, feed_options=feed_options), Spider("s")


@pytest.mark.parametrize("exporter", [JsonLinesItemExporter, FlatCsvItemExporter])
def test_a_full_disk_is_one_error_line_and_the_store_says_not_stored(exporter, caplog):
    feed, spider = storage("/dev/full", overwrite=True)
    file = feed.open(spider)
    out = exporter(file)
    with caplog.at_level(logging.DEBUG):
        out.start_exporting()
        for item in ITEMS:  # several buffers' worth: each flush would fail
            out.export_item(item)
        out.finish_exporting()
        with pytest.raises(FeedNotStored, match="/dev/full: No space left on device"):
            feed.store(file)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "the feed /dev/full could not be written: No space left on device; "
        "the crawl goes on without it (the database writes do not depend on it)"
    ]
    assert feed.stats.get_value(FEED_ERROR_STAT) == "the feed /dev/full could not be written: No space left on device"
    assert file.closed and feed.file is not None and feed.file.raw.closed  # the descriptor is released


def test_a_writable_feed_is_written_whole_and_appended_to(tmp_path):
    path = tmp_path / "feeds" / "out.jsonl"  # the folder made, as Scrapy's storage does
    for _ in range(2):  # without overwrite: appended
        feed, spider = storage(str(path))
        file = feed.open(spider)
        out = JsonLinesItemExporter(file)
        for item in ITEMS:
            out.export_item(item)
        feed.store(file)
        assert feed.stats.get_value(FEED_ERROR_STAT) is None
    expected = io.BytesIO()
    for item in ITEMS:
        JsonLinesItemExporter(expected).export_item(item)
    assert path.read_bytes() == expected.getvalue() * 2


def test_scrapys_error_storing_line_carries_no_traceback_for_ours_only(caplog):
    storage("/dev/full")  # installs the filter on Scrapy's feed exporter logger
    scrapy_logger = logging.getLogger(FeedExporter.__module__)
    with caplog.at_level(logging.ERROR):
        for exc in (FeedNotStored("/dev/full: No space left on device"), ValueError("a bug")):
            try:
                raise exc
            except Exception:
                scrapy_logger.error("Error storing %s", "jsonlines feed (3 items) in: /dev/full", exc_info=True)
    ours, other = caplog.records
    assert ours.exc_info is None and other.exc_info is not None
    assert caplog.text.count("Traceback") == 1 and "ValueError: a bug" in caplog.text  # a bug's stays
