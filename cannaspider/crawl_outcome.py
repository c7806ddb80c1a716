"""The stats a crawl's exit code is judged by.

Scrapy's `crawl` exits 0 whatever happened inside the crawl; ours (commands/crawl.py) reads these
stats once the crawl is over. The components that find a crawl unable to work, or a unit of
work that did not complete, write them; they live apart from every one of those components so
that none has to import another to report.
"""

from __future__ import annotations

from scrapy.statscollectors import StatsCollector

# the crawl's one-line fatal error, read by the crawl command (commands/crawl.py) for its exit
FATAL_ERROR_STAT = "cannaspider/fatal_error"
# units of work (store crawls, keywords, refreshes) that ended without completing: the crawl
# command exits EXIT_INCOMPLETE (drained tasks are counted by their drain: TaskDrain.claimed)
UNITS_INCOMPLETE_STAT = "cannaspider/units_incomplete"
# a feed file that could not be written (a full disk: cannaspider/feed_storage.py), in one line: the
# crawl went on, but the crawl command exits EXIT_FEED
FEED_ERROR_STAT = "cannaspider/feed_error"


def record_fatal_error(stats: StatsCollector, message: str) -> None:
    """The crawl's fatal error: the first one recorded wins (later ones follow from it)."""
    _record_first(stats, FATAL_ERROR_STAT, message)


def record_feed_error(stats: StatsCollector, message: str) -> None:
    """A feed not written: the first one recorded wins."""
    _record_first(stats, FEED_ERROR_STAT, message)


def _record_first(stats: StatsCollector, key: str, message: str) -> None:
    if stats.get_value(key) is None:
        stats.set_value(key, message)
