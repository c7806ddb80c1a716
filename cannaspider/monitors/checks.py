"""The crawl-health checks: the Spidermon monitors that judge a crawl (docs/health.md).

Each monitor reads the crawl's stats and settings (`HealthMonitor`) and fails with a one-line
message (the report and the notification show it as is): the crawl as a whole (why it finished,
the errors it logged), its store crawls (incomplete, a product count that fell, suspect, empty
menus, a fleet-wide emptying), blocks per proxy and stale persisted hashes, the share of invalid
items (counted by the validation pipeline, validation.py) and of failed images. The suite that
runs them all is `CrawlHealthSuite` (extension.py).
"""

from __future__ import annotations

import os
import re
import socket
from datetime import datetime
from typing import Any

from scrapy.settings import Settings
from spidermon import Monitor, monitors

from cannaspider.crawl_outcome import FATAL_ERROR_STAT
from cannaspider.db import connect, database_url
from cannaspider.monitors.validation import FIELD_ERRORS_PREFIX, INVALID_STAT, ITEMS_STAT

# -- what every check shares -------------------------------------------------------------------------
# What every crawl-health monitor shares: the crawl's stats and settings, and a failure whose
# message is one line (the report and the alert show it as is).


class HealthMonitor(Monitor):  # type: ignore[misc]  # Spidermon is untyped
    longMessage = False  # the message we give, not unittest's "a != b : message"

    @property
    def stats(self) -> dict[str, Any]:
        return self.data.stats or {}

    @property
    def settings(self) -> Settings:
        settings: Settings = self.data.crawler.settings
        return settings

    def stat(self, key: str) -> float:
        value = self.stats.get(key, 0)
        return value if isinstance(value, (int, float)) else 0


# -- the crawl as a whole ----------------------------------------------------------------------------
# The crawl as a whole: why it finished, and how many errors it logged.
#
# A stop the operator asked for is not an alert: SIGTERM/SIGINT (Scrapyd's cancel.json, a deploy
# stopping a `-a follow=1` drainer) ends the crawl with Scrapy's finish reason `shutdown`, which
# HEALTH_STOP_FINISH_REASONS lists: the finish-reason check passes, the other checks judge the work
# done until the stop as usual. Any other reason outside HEALTH_OK_FINISH_REASONS still fails.
#
# CRITICAL lines are errors too: Scrapy counts each level apart (log_count/ERROR,
# log_count/CRITICAL), and a CRITICAL line is never less of a problem than an ERROR one.


ERROR_STATS = ("log_count/ERROR", "log_count/CRITICAL")  # Scrapy's LogCounterHandler, one stat a level


@monitors.name("Finish reason")
class FinishReasonMonitor(HealthMonitor):
    @monitors.name("the crawl finished normally")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_finish_reason(self) -> None:
        reason = self.stats.get("finish_reason")
        allowed = self.settings.getlist("HEALTH_OK_FINISH_REASONS")
        stops = self.settings.getlist("HEALTH_STOP_FINISH_REASONS")
        fatal = self.stats.get(FATAL_ERROR_STAT)
        self.assertIsNone(fatal, f"the crawl stopped on a fatal error: {fatal}")
        if "finish_reason" not in self.stats:
            return  # still running: a periodic check (extension.py) judges a stretch, not an end
        if reason in stops:
            return  # the operator's stop (SIGTERM/SIGINT, Scrapyd's cancel): asked for, not an alert
        self.assertIn(reason, allowed, f"finish reason {reason!r} is not one of {', '.join(allowed)}")


@monitors.name("Errors")
class ErrorCountMonitor(HealthMonitor):
    @monitors.name("errors logged within HEALTH_MAX_ERRORS")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_errors(self) -> None:
        errors = sum(self.stat(key) for key in ERROR_STATS)
        critical = self.stat("log_count/CRITICAL")
        limit = self.settings.getint("HEALTH_MAX_ERRORS")
        of_which = f", {critical:g} of them CRITICAL" if critical else ""
        self.assertLessEqual(errors, limit, f"{errors:g} errors logged{of_which} (HEALTH_MAX_ERRORS = {limit})")


# -- the store crawls --------------------------------------------------------------------------------
# The stores of a product crawl: how many crawls ended incomplete, and whether a store's product
# count fell by more than HEALTH_MAX_PRODUCT_DROP against its previous complete crawl (a menu that
# lost a third of its products overnight is more often a broken crawl than a store's decision), and
# every store crawl the OOS guard flagged suspect (each one of a collapse, not only its first, whose
# product count no longer falls against the suspect crawl before it: README "Crawl correctness").
# Every store crawl that found the store's menu empty fails a check of its own (an empty menu marks
# nothing, so nothing else would tell), and so does the fleet when many of its stores went empty
# within HEALTH_EMPTIED_WINDOW_S: the shape of an API change or a broken query, not of stores.
#
# This crawl's runs are the crawl_runs rows its process closed (host, pid) since the start of the
# stretch the check judges (the crawl's start at spider close, by when the completion pipeline has
# closed them all; the previous check's time for a check while it runs: extension.py).


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


# -- blocks and stale hashes -------------------------------------------------------------------------
# Blocks per proxy and stale persisted-hash fallbacks.
#
# A block is counted per proxy under `cannaspider/proxy/<proxy id>/blocked` when the proxy
# middleware records it; responses classified as blocked without a proxy (stat
# `cannaspider/graphql_failure/blocked`) count for "direct". A stale-hash fallback (stat
# `cannaspider/stale_hash_fallbacks`) means Dutchie rotated a persisted-query hash: the crawl still
# worked (it sent the full query) but DUTCHIE_PERSISTED_HASHES wants updating (docs/dutchie.md).


PROXY_BLOCK_STAT = re.compile(r"^cannaspider/proxy/(?P<proxy>[^/]+)/blocked$")
DIRECT_BLOCK_STAT = "cannaspider/graphql_failure/blocked"


def blocks_per_proxy(stats: dict[str, Any]) -> dict[str, int]:
    per_proxy: dict[str, int] = {}
    for key, value in stats.items():
        match = PROXY_BLOCK_STAT.match(key)
        if match and isinstance(value, int):
            per_proxy[match["proxy"]] = per_proxy.get(match["proxy"], 0) + value
    if not per_proxy and isinstance(stats.get(DIRECT_BLOCK_STAT), int):
        per_proxy["direct"] = stats[DIRECT_BLOCK_STAT]
    return per_proxy


@monitors.name("Blocks")
class BlocksPerProxyMonitor(HealthMonitor):
    @monitors.name("blocks per proxy within HEALTH_MAX_BLOCKS_PER_PROXY")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_blocks_per_proxy(self) -> None:
        limit = self.settings.getint("HEALTH_MAX_BLOCKS_PER_PROXY")
        over = {p: n for p, n in sorted(blocks_per_proxy(self.stats).items()) if n > limit}
        listed = ", ".join(f"{p}: {n}" for p, n in over.items())
        self.assertFalse(over, f"blocked more than {limit} times (HEALTH_MAX_BLOCKS_PER_PROXY): {listed}")


@monitors.name("Persisted hashes")
class StaleHashMonitor(HealthMonitor):
    @monitors.name("stale persisted-hash fallbacks within HEALTH_MAX_STALE_HASH_FALLBACKS")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_stale_hash_fallbacks(self) -> None:
        n = self.stat("cannaspider/stale_hash_fallbacks")
        limit = self.settings.getint("HEALTH_MAX_STALE_HASH_FALLBACKS")
        self.assertLessEqual(
            n, limit, f"{n} requests fell back to the full query: update DUTCHIE_PERSISTED_HASHES (limit {limit})"
        )


# -- product images ----------------------------------------------------------------------------------
# Product images: the share of the crawl's image downloads that failed (docs/health.md, "Images").
#
# One image that is slow past IMAGES_DOWNLOAD_TIMEOUT_S, or a CDN's 404, is skipped and asked for
# again by the next crawl (docs/images.md, "What is skipped"): one warning line, never a failed
# crawl. What says something is wrong is many of them: a share of the images the crawl tried, above
# HEALTH_MAX_IMAGE_FAILURE_SHARE, once at least HEALTH_MIN_IMAGE_FAILURES failed (a store with
# three images, one of them slow, is not a third of a fleet's images failing).


FAILED_PREFIX = "cannaspider/images_failed/"
STORED = "cannaspider/images_stored"
# skips that are no failed image: never fetched (a URL that is not http(s), a request the
# downloader filtered) or refused by the operator's own IMAGES_MIN_WIDTH/HEIGHT
NOT_FAILURES = frozenset({"scheme", "filtered", "small"})


def image_failures(stats: dict[str, Any]) -> dict[str, int]:
    """Failed images by reason (images_failed/<reason>), the skips that are no failure left out."""
    out: dict[str, int] = {}
    for key, value in stats.items():
        if key.startswith(FAILED_PREFIX) and isinstance(value, int) and value > 0:
            reason = key[len(FAILED_PREFIX) :]
            if reason not in NOT_FAILURES:
                out[reason] = value
    return out


@monitors.name("Images")
class ImageFailuresMonitor(HealthMonitor):
    @monitors.name("failed images within HEALTH_MAX_IMAGE_FAILURE_SHARE")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_image_failures(self) -> None:
        by_reason = image_failures(self.stats)
        failed = sum(by_reason.values())
        if failed < self.settings.getint("HEALTH_MIN_IMAGE_FAILURES"):
            return
        tried = failed + self.stat(STORED)
        share = failed / tried
        limit = self.settings.getfloat("HEALTH_MAX_IMAGE_FAILURE_SHARE")
        reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]))
        self.assertLessEqual(
            share,
            limit,
            f"{failed} of {tried:.0f} images failed ({share:.0%}; HEALTH_MAX_IMAGE_FAILURE_SHARE = {limit:.0%}): "
            f"{reasons}",
        )


# -- item validation --------------------------------------------------------------------------------
# The share of the sampled StoreProducts that broke the item schema (validation.py counts them).


@monitors.name("Item validation")
class ItemValidationMonitor(HealthMonitor):
    @monitors.name("StoreProduct items match the item schema")  # type: ignore[untyped-decorator]  # Spidermon's
    def test_items_valid(self) -> None:
        items = self.stat(ITEMS_STAT)
        if not items:
            return
        invalid = self.stat(INVALID_STAT)
        limit = self.settings.getfloat("HEALTH_MAX_INVALID_ITEM_SHARE")
        fields = sorted(k.removeprefix(FIELD_ERRORS_PREFIX) for k in self.stats if k.startswith(FIELD_ERRORS_PREFIX))
        self.assertLessEqual(
            invalid / items,
            limit,
            f"{invalid} of {items} products break the item schema (fields: {', '.join(fields)}; "
            f"HEALTH_MAX_INVALID_ITEM_SHARE = {limit:g})",
        )
