"""The stores of a product crawl: how many crawls ended incomplete, and whether a store's product
count fell by more than HEALTH_MAX_PRODUCT_DROP against its previous complete crawl (a menu that
lost a third of its products overnight is more often a broken crawl than a store's decision), and
every store crawl the OOS guard flagged suspect (each one of a collapse, not only its first, whose
product count no longer falls against the suspect crawl before it: README "Crawl correctness").
Every store crawl that found the store's menu empty fails a check of its own (an empty menu marks
nothing, so nothing else would tell), and so does the fleet when many of its stores went empty
within HEALTH_EMPTIED_WINDOW_S: the shape of an API change or a broken query, not of stores.

This crawl's runs are the crawl_runs rows its process closed (host, pid) since the start of the
stretch the check judges (the crawl's start at spider close, by when the completion pipeline has
closed them all; the previous check's time for a check while it runs: extension.py)."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

from spidermon import monitors

from cannaspider.db import connect, database_url
from cannaspider.monitors.base import HealthMonitor

DROPS = """
SELECT r.dispensary_id, d.name, r.products_seen, p.products_seen
  FROM crawl_runs r
  JOIN dispensaries d ON d.id = r.dispensary_id
 CROSS JOIN LATERAL (
        SELECT products_seen FROM crawl_runs p
         WHERE p.dispensary_id = r.dispensary_id AND p.status = 'complete' AND p.id <> r.id
           AND p.started_at < r.started_at AND NOT p.empty
         ORDER BY p.started_at DESC LIMIT 1) p
 WHERE r.host = %(host)s AND r.pid = %(pid)s AND r.status = 'complete' AND NOT r.empty  -- the empties' own check
   AND coalesce(r.finished_at, r.started_at) >= %(since)s
   AND p.products_seen > 0 AND r.products_seen < p.products_seen * (1 - %(drop)s)
 ORDER BY r.dispensary_id
"""

SUSPECTS = """
SELECT r.dispensary_id, d.name, r.suspect_reason
  FROM crawl_runs r
  JOIN dispensaries d ON d.id = r.dispensary_id
 WHERE r.host = %(host)s AND r.pid = %(pid)s AND r.status = 'complete' AND r.suspect
   AND coalesce(r.finished_at, r.started_at) >= %(since)s
 ORDER BY r.dispensary_id, r.started_at
"""

# this crawl's store crawls that found an empty menu, one line per store, with since when
EMPTIES = """
SELECT DISTINCT ON (r.dispensary_id) r.dispensary_id, d.name, d.menu_empty_since
  FROM crawl_runs r
  JOIN dispensaries d ON d.id = r.dispensary_id
 WHERE r.host = %(host)s AND r.pid = %(pid)s AND r.status = 'complete' AND r.empty
   AND coalesce(r.finished_at, r.started_at) >= %(since)s
 ORDER BY r.dispensary_id, r.started_at DESC
"""

# the fleet's, any process's: stores whose menu went empty within the window (and still is), of the
# stores with a complete crawl closed within it
FLEET_EMPTIED = """
SELECT (SELECT count(*) FROM dispensaries
         WHERE menu_empty_since >= now() - make_interval(secs => %(window)s)),
       (SELECT count(DISTINCT dispensary_id) FROM crawl_runs
         WHERE status = 'complete' AND finished_at >= now() - make_interval(secs => %(window)s))
"""
LISTED = 10  # stores named in a failure's message; the others are counted


def this_crawls(query: str, url: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connect(url) as conn:
        return conn.execute(query, params).fetchall()


def product_drops(url: str, since: datetime, drop: float, *, host: str, pid: int) -> list[tuple[Any, ...]]:
    """(dispensary_id, name, products now, products at the previous complete crawl) per store that fell."""
    return this_crawls(DROPS, url, {"host": host, "pid": pid, "since": since, "drop": drop})


@monitors.name("Stores")
class StoreCrawlsMonitor(HealthMonitor):
    @monitors.name("incomplete store crawls within HEALTH_MAX_INCOMPLETE_SHARE")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_incomplete_share(self) -> None:
        complete = self.stat("cannaspider/stores_complete")
        incomplete = self.stat("cannaspider/stores_incomplete")
        if complete + incomplete == 0:
            return  # not a product crawl
        share = incomplete / (complete + incomplete)
        limit = self.settings.getfloat("HEALTH_MAX_INCOMPLETE_SHARE")
        self.assertLessEqual(
            share,
            limit,
            f"{incomplete} of {complete + incomplete} store crawls incomplete ({share:.0%}; "
            f"HEALTH_MAX_INCOMPLETE_SHARE = {limit:.0%})",
        )

    @monitors.name("no store lost more than HEALTH_MAX_PRODUCT_DROP of its products")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_product_count_drop(self) -> None:
        since = self.stats.get("start_time")
        if not self.stat("cannaspider/stores_complete") or not isinstance(since, datetime):
            return
        drop = self.settings.getfloat("HEALTH_MAX_PRODUCT_DROP")

        fell = product_drops(database_url(self.settings), since, drop, host=socket.gethostname(), pid=os.getpid())
        listed = "; ".join(f"{name} (#{d}): {now} products, {before} before" for d, name, now, before in fell)
        self.assertFalse(fell, f"product count fell by more than {drop:.0%} against the last complete crawl: {listed}")

    @monitors.name("no store crawl flagged suspect by the OOS guard")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_suspect_crawls(self) -> None:
        since = self.stats.get("start_time")
        if not self.stat("cannaspider/stores_suspect") or not isinstance(since, datetime):
            return
        params = {"host": socket.gethostname(), "pid": os.getpid(), "since": since}
        suspects = this_crawls(SUSPECTS, database_url(self.settings), params)
        listed = "; ".join(f"{name} (#{d}): {reason}" for d, name, reason in suspects)
        self.assertFalse(suspects, f"{len(suspects)} store crawl(s) suspect (a collapsed menu): {listed}")

    @monitors.name("no store menu empty")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_empty_menus(self) -> None:
        since = self.stats.get("start_time")
        if not self.stat("cannaspider/stores_empty") or not isinstance(since, datetime):
            return
        params = {"host": socket.gethostname(), "pid": os.getpid(), "since": since}
        empties = this_crawls(EMPTIES, database_url(self.settings), params)
        listed = "; ".join(
            f"{name} (#{d}): empty since {empty_since:%Y-%m-%d %H:%M} UTC" if empty_since else f"{name} (#{d})"
            for d, name, empty_since in empties[:LISTED]
        )
        more = f"; and {len(empties) - LISTED} more" if len(empties) > LISTED else ""
        self.assertFalse(
            empties,
            f"{len(empties)} store(s) with an empty menu (no product, totalCount 0: nothing marked out of stock; "
            f"a broken query, an API change or a menu gone dark): {listed}{more}",
        )

    @monitors.name("no fleet-wide emptying of menus")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_fleet_emptied(self) -> None:
        if not self.stat("cannaspider/stores_empty"):
            return  # this crawl saw no empty menu: it has nothing to add
        window = self.settings.getfloat("HEALTH_EMPTIED_WINDOW_S")
        share = self.settings.getfloat("HEALTH_MAX_EMPTIED_SHARE")
        least = self.settings.getint("HEALTH_FLEET_EMPTIED_MIN_STORES")
        [(emptied, crawled)] = this_crawls(FLEET_EMPTIED, database_url(self.settings), {"window": window})
        many = emptied >= least and emptied > share * crawled
        self.assertFalse(
            many,
            f"{emptied} of the {crawled} stores crawled in the last {window / 3600:g} h went empty "
            f"(HEALTH_MAX_EMPTIED_SHARE = {share:.0%}, HEALTH_FLEET_EMPTIED_MIN_STORES = {least}): "
            "the shape of an API change or a broken query, not of stores; their products' stock is left as it was",
        )
