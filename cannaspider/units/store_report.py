"""Reporting a store's close: the crawl's stats and its one log line, from what the close
recorded (the verdict), never from what the crawl hoped for.

A suspect crawl gets a warning either way: it looks complete, so without one an emptied menu or
a broken feed would pass unnoticed, and the operator needs the share and the streak to judge it
(the warning says how to accept a menu that really collapsed). An empty menu gets one too: it
marks nothing, and a store whose menu went dark, or an API change that empties every store, must
not pass unnoticed either (the crawl-health checks "no store menu empty" and "no fleet-wide
emptying" read what the close recorded: docs/health.md).
"""

from __future__ import annotations

import logging

from scrapy.statscollectors import StatsCollector

from cannaspider.crawl_outcome import UNITS_INCOMPLETE_STAT
from cannaspider.db.store_close import OOS_AFTER_MISSES
from cannaspider.units.store_outcome import StoreOutcome, StoreVerdict

logger = logging.getLogger("cannaspider.units.store_close")  # one logger for the store close's lines


def report_close(stats: StatsCollector, item: StoreOutcome, verdict: StoreVerdict, min_share: float) -> None:
    figures = verdict.figures
    stats.inc_value("cannaspider/stores_complete" if verdict.complete else "cannaspider/stores_incomplete")
    if not verdict.complete:
        stats.inc_value(UNITS_INCOMPLETE_STAT)
    if verdict.events:
        stats.inc_value("cannaspider/product_events", verdict.events)
    if verdict.store_event == "menu_returned":
        stats.inc_value("cannaspider/stores_menu_returned")
        since = verdict.empty_since.isoformat(timespec="seconds") if verdict.empty_since else "?"
        logger.info("dispensary %s: its menu returned (empty since %s)", item.dispensary_id, since)
    if verdict.empty:
        stats.inc_value("cannaspider/stores_empty")
        if verdict.store_event == "menu_emptied":
            stats.inc_value("cannaspider/stores_menu_emptied")
        since = verdict.empty_since.isoformat(timespec="seconds") if verdict.empty_since else "now"
        logger.warning(
            "dispensary %s: crawl complete but its menu is EMPTY (no product, totalCount 0) since %s: "
            "no product counted missing, the stock of its %d products in stock left as it was",
            item.dispensary_id,
            since,
            verdict.in_stock,
        )
    elif verdict.suspect:
        stats.inc_value("cannaspider/stores_suspect")
        if verdict.confirmed:
            stats.inc_value("cannaspider/stores_collapse_confirmed")
            logger.warning(
                "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                "(below OOS_GUARD_MIN_SHARE = %g), suspect crawl %d in a row: the collapse is confirmed, "
                "%d products missing from these crawls marked oos",
                item.dispensary_id,
                verdict.seen_in_stock,
                verdict.in_stock,
                min_share,
                verdict.streak,
                figures["oos"],
            )
        else:
            logger.warning(
                "dispensary %s: crawl complete but SUSPECT: it saw %d of the %d products in stock before it "
                "(below OOS_GUARD_MIN_SHARE = %g): counted none missing (suspect crawl %d of the %d in a row "
                "that confirm a collapse); if the store really dropped most of its menu, crawl it again with "
                "-s OOS_GUARD_MIN_SHARE=0",
                item.dispensary_id,
                verdict.seen_in_stock,
                verdict.in_stock,
                min_share,
                verdict.streak,
                OOS_AFTER_MISSES,
            )
    elif verdict.complete:
        logger.info(
            "dispensary %s: crawl complete: %d products, %d new, %d missed, %d marked oos",
            item.dispensary_id,
            figures["seen_n"],
            figures["new"],
            figures["missed"],
            figures["oos"],
        )
    else:
        logger.warning(
            "dispensary %s: crawl INCOMPLETE (%s): stored %d products, marked none missing",
            item.dispensary_id,
            verdict.error,
            figures["seen_n"],
        )
