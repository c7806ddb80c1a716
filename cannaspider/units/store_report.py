"""Reporting a store's close: the crawl's stats and its one log line, from what the close
recorded (the verdict), never from what the crawl hoped for.

A suspect crawl gets a warning either way: it looks complete, so without one an emptied menu or
a broken feed would pass unnoticed, and the operator needs the share and the streak to judge it
(the warning says how to accept a menu that really emptied).
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
    if verdict.suspect:
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
                "that confirm a collapse); if the store really emptied its menu, crawl it again with "
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
